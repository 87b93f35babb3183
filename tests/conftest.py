"""Session-wide fixtures: a real Neo4j + GDS, started once, never skipped.

If Neo4j cannot start, every test that needs it errors with the launcher's log: CI must fail loudly
rather than pass without the production backend.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = (REPO / ".." / "shared").resolve()

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def neo4j_uri(tmp_path_factory: pytest.TempPathFactory):
    """Bolt URI of a real Neo4j 5.26 + GDS 2.13 (scripts/neo4j_dev.py), or of HANSA_TEST_NEO4J_URI
    when a developer already runs one (`scripts/neo4j-dev` in another terminal)."""
    external = os.environ.get("HANSA_TEST_NEO4J_URI")
    if external:
        yield external
        return
    sys.path.insert(0, str(REPO / "scripts"))
    import neo4j_dev  # noqa: E402  (dev tooling lives in scripts/, not in the package)

    dev = neo4j_dev.Neo4jDev.start(tmp_path_factory.mktemp("neo4j"))
    try:
        yield dev.uri
    finally:
        dev.stop()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """../shared beside the repository: datasets and test vectors (never copied into the repo)."""
    if not SHARED.is_dir():
        raise RuntimeError(f"{SHARED} is missing: the shared data folder must sit beside the repository")
    return SHARED


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # noqa: ARG001
    """With HANSA_FORBID_SKIPS=1 (scripts/test, CI) a skipped test is a failure: a skip would hide
    a missing real component behind a green run."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("HANSA_FORBID_SKIPS") == "1" and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped, but skips are forbidden here (HANSA_FORBID_SKIPS=1): {report.longrepr}"
