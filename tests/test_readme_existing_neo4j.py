"""docs/site-admin.md's "Running a site on an existing Neo4j + Milvus" block (it was the README's), run
as written: the block between `<!-- existing-neo4j:begin -->` and `<!-- existing-neo4j:end -->` goes to
`bash -euo pipefail` in a fresh folder holding `./docs`, against the session's real Neo4j + GDS and
Milvus server.

The environment holds only what an admin would set before it (the servers' addresses and the
password, which the block reads with defaults) plus PATH. Issue 34: the block used to set neither
the Neo4j URI, the password nor the Milvus URI, so vectors went silently to a Milvus Lite file;
here they must reach the server and nothing may land in a Lite file under HANSA_HOME."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pymilvus import MilvusClient

from hansa.adapters.graph.neo4j_gds import Neo4jGraphStore

from tests.test_readme_admin_path import DOCS, SITE_ADMIN_DOC, doc_block

pytestmark = pytest.mark.neo4j

RUN_TIMEOUT_S = 600


def existing_neo4j_block() -> str:
    return doc_block("existing-neo4j", SITE_ADMIN_DOC)


def test_the_block_names_every_server_setting() -> None:
    block = existing_neo4j_block()
    for needed in ("HANSA_GRAPH_BACKEND=neo4j", "HANSA_NEO4J_URI=", "HANSA_NEO4J_PASSWORD=", "HANSA_NEO4J_USER=",
                   "HANSA_NEO4J_DATABASE=", "HANSA_MILVUS_URI=", "site install", "site ingest", "site communities",
                   "site status"):
        assert needed in block, f"the existing-Neo4j block lost {needed!r}"


def _clear_graph(uri: str) -> None:
    """Another test's site may hold the shared database (one site per database): remove it."""
    with Neo4jGraphStore(uri, "neo4j", "", "neo4j") as store:
        store.uninstall()


def test_the_readme_existing_neo4j_block_runs_as_written(tmp_path: Path, neo4j_uri: str, milvus_server_uri: str) -> None:
    (tmp_path / "docs").mkdir()
    for name, text in DOCS.items():
        (tmp_path / "docs" / name).write_text(text, encoding="utf-8")
    (tmp_path / "block.sh").write_text(existing_neo4j_block(), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HANSA_")}  # only what an admin sets
    env.update({"HANSA_HOME": str(tmp_path / "home"), "HANSA_NEO4J_URI": neo4j_uri,
                "HANSA_NEO4J_PASSWORD": "unused-auth-is-off", "HANSA_MILVUS_URI": milvus_server_uri,
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"})
    _clear_graph(neo4j_uri)
    try:
        proc = subprocess.run(["bash", "-euo", "pipefail", "block.sh"], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=RUN_TIMEOUT_S)
        assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
        assert "Margaret Ellison" in proc.stdout and "docs/lighthouse.md" in proc.stdout, proc.stdout
        # the doctor, with the block's settings: every check passes but the publication (that comes after joining)
        doctor = subprocess.run(["bash", "-euo", "pipefail", "-c", "eval \"$(grep '^export ' block.sh)\"; hansa site doctor --json"],
                                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
        assert [n for n, c in checks.items() if c["status"] == "fail"] == ["publication"], checks
        assert checks["neo4j reachable"]["status"] == "pass", checks
        assert checks["vector store reachable"]["detail"] == f"Milvus server {milvus_server_uri}", checks
        # the vectors are in the Milvus server, not in a Lite file the admin never asked for
        assert not list((tmp_path / "home").glob("milvus*.db")), sorted(p.name for p in (tmp_path / "home").iterdir())
        client = MilvusClient(uri=milvus_server_uri, timeout=30)
        try:
            assert any(name.startswith("hansa_") for name in client.list_collections())
        finally:
            client.close()
    finally:
        _clear_graph(neo4j_uri)


def test_the_block_refuses_to_run_without_the_password(tmp_path: Path) -> None:
    """`${HANSA_NEO4J_PASSWORD:?...}`: an admin who forgot it is told so before anything runs."""
    (tmp_path / "block.sh").write_text(existing_neo4j_block(), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HANSA_")}
    env["HANSA_HOME"] = str(tmp_path / "home")
    proc = subprocess.run(["bash", "-euo", "pipefail", "block.sh"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode != 0 and "HANSA_NEO4J_PASSWORD" in proc.stderr and "password" in proc.stderr, proc.stderr
    assert not (tmp_path / "home").exists()
