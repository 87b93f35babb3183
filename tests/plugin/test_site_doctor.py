"""`hansa site doctor` on the embedded backend through the real root command: a fresh home fails
with fixes, a built and published site passes, and each broken part (configuration, a dropped
collection, a readable key, a gateway that does not know the site) fails its own check, exit code 1."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest
from click.testing import CliRunner, Result

from hansa.adapters.graph.embedded import SCHEMA_VERSION as EMBEDDED_SCHEMA
from hansa.cli import main
from hansa.core.config import load_config
from hansa.core.serving import BackgroundServer

SITE = "acme"
DOCS = {
    "lighthouse.txt": "The Brightwater Lighthouse stands on Karsholm Island. Engineer Margaret Ellison designed the "
    "Brightwater Lighthouse in 1874. The Karsholm Harbour Trust owns the Brightwater Lighthouse.",
    "volcano.txt": "Mount Teravik is a stratovolcano on the Hallgrim Peninsula. The Hallgrim Volcano Observatory "
    "watches Mount Teravik. Ingrid Saeter leads the Hallgrim Volcano Observatory.",
}


def doctor(home: Path, *args: str, **env: str | None) -> Result:
    environ = {"HANSA_SITE_SITE_ID": SITE, "HANSA_CONFIG": None, "HANSA_SITE_GATEWAY_URL": None, **env}
    return CliRunner().invoke(main, ["--home", str(home), "site", *args], env=environ, catch_exceptions=False)


def checks(result: Result) -> dict[str, dict[str, str]]:
    return {c["name"]: c for c in json.loads(result.stdout)["checks"]}


@pytest.fixture(scope="module")
def site_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site installed, ingested, with communities, published to a file."""
    root = tmp_path_factory.mktemp("doctor")
    docs = root / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    home = root / "home"
    for args in (("install",), ("ingest", "--no-progress", str(docs)), ("communities", "--no-progress"),
                 ("publish", "--out", str(root / "publication.json"))):
        res = doctor(home, *args)
        assert res.exit_code == 0, res.output
    return home


def test_a_fresh_home_fails_with_a_fix_for_each_missing_part(tmp_path: Path) -> None:
    res = doctor(tmp_path / "home", "doctor")
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert "FAIL  site installed: " in "\n".join(lines)
    for name in ("site installed", "graph schema", "vector collections", "site identity", "publication"):
        at = next(i for i, line in enumerate(lines) if line.startswith(f"FAIL  {name}: "))
        assert lines[at + 1].startswith("      fix: "), name
    assert any(l.startswith("PASS  embedder: onnx: sentence-transformers/all-MiniLM-L6-v2, 384-d") for l in lines)
    assert any(l.startswith("SKIP  gateway: ") for l in lines)


def test_a_built_site_passes_every_check(site_home: Path) -> None:
    res = doctor(site_home, "doctor", "--json")
    assert res.exit_code == 0, res.output
    found = checks(res)
    assert json.loads(res.stdout)["ok"] is True
    assert {c["status"] for c in found.values()} == {"pass", "skip"} and found["gateway"]["status"] == "skip"
    assert "hansa_chunks (384-d" in found["vector collections"]["detail"]
    assert f"schema v{EMBEDDED_SCHEMA} of site acme" in found["graph schema"]["detail"]
    assert "written to a file" in found["publication"]["detail"]


def test_a_broken_config_fails_first_and_skips_the_rest(tmp_path: Path) -> None:
    bad = tmp_path / "hansa.toml"
    bad.write_text("[site]\nsite_idd = 'x'\n", encoding="utf-8")
    res = doctor(tmp_path / "home", "doctor", "--json", HANSA_CONFIG=str(bad))
    assert res.exit_code == 1
    found = checks(res)
    assert found["config"]["status"] == "fail" and "unknown key 'site_idd'" in found["config"]["detail"]
    assert {c["status"] for n, c in found.items() if n != "config"} == {"skip"}
    other = doctor(tmp_path / "home", "status", HANSA_CONFIG=str(bad))  # any other command refuses
    assert other.exit_code == 1 and "unknown key 'site_idd'" in other.output


@pytest.fixture(scope="module")
def empty_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a real gateway (its Flask API over the Gateway service) whose registry is empty."""
    from hansa.gateway.http.app import create_gateway_app
    from hansa.gateway.service import Gateway

    cfg = load_config(env={"HANSA_HOME": str(tmp_path_factory.mktemp("gateway"))})
    with Gateway.open(cfg) as gw, BackgroundServer(create_gateway_app(gw)) as server:
        yield server.url


def test_a_missing_collection_a_readable_key_and_an_unknown_gateway_fail(site_home: Path, empty_gateway: str) -> None:
    federation_url = empty_gateway
    from hansa.adapters.vector.milvus import MilvusVectorStore

    key = site_home / "keys" / "site-ed25519.pem"
    with MilvusVectorStore(str(site_home / "milvus.db")) as store:
        store.drop("summaries")
    key.chmod(0o644)
    try:
        res = doctor(site_home, "doctor", "--gateway", federation_url)
        assert res.exit_code == 1
        text = res.stdout
        assert "FAIL  vector collections: collection(s) hansa_summaries missing in Milvus Lite file" in text
        assert "FAIL  site identity: private key" in text and "chmod 600" in text
        assert f"FAIL  gateway: the gateway at {federation_url} has not enrolled site 'acme'" in text
        assert "fix: not enrolled: `hansa site join-request`" in text
        assert "PASS  graph schema: " in text  # what is fine stays fine
    finally:
        key.chmod(0o600)
        assert doctor(site_home, "install").exit_code == 0  # the fix the doctor names
    res = doctor(site_home, "doctor", "--json")
    assert checks(res)["vector collections"]["status"] == "pass" and checks(res)["site identity"]["status"] == "pass"


