"""`hansa site ...` through the real root command, on a fresh home: the whole admin workflow."""
from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from hansa.cli import main
from hansa.core.config import load_config
from hansa.plugin.install import load_identity
from hansa.plugin.site import SiteContext
from hansa.sync.publication import open_publication
from hansa.sync.wire import EmbeddingSpace
from tests.plugin.conftest import CORPUS


def _run(home: Path, *args: str, site_id: str = "acme", env: dict[str, str] | None = None) -> Result:
    env = {"HANSA_SITE_SITE_ID": site_id, "HANSA_CONFIG": None, **(env or {})}
    return CliRunner().invoke(main, ["--home", str(home), "site", *args], env=env, catch_exceptions=False)


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site tests' corpus (tests/plugin/conftest.py): four short documents in one folder."""
    folder = tmp_path_factory.mktemp("docs")
    for name, text in CORPUS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def test_install_ingest_communities_publish_status(tmp_path: Path, docs: Path) -> None:
    home = tmp_path / "home"

    result = _run(home, "install")
    assert result.exit_code == 0, result.output
    assert "site acme installed" in result.output and "(created)" in result.output
    public_key = re.search(r"public key \(enroll this at the gateway\): (\S+)", result.output).group(1)
    again = _run(home, "install")
    assert again.exit_code == 0 and "already installed: graph schema" in again.output

    result = _run(home, "ingest", "--no-progress", str(docs))
    assert result.exit_code == 0, result.output
    assert "documents_new: 4" in result.output
    assert "documents_unchanged: 4" in _run(home, "ingest", "--no-progress", str(docs)).output

    result = _run(home, "communities", "--no-progress")
    assert result.exit_code == 0, result.output
    communities = int(re.search(r"^  communities: (\d+)$", result.output, re.M).group(1))
    assert communities > 0

    out = tmp_path / "publication.json"
    result = _run(home, "publish", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "sequence: 1" in result.output and f"summaries: {communities}" in result.output
    with SiteContext.open(load_config(env={"HANSA_HOME": str(home), "HANSA_SITE_SITE_ID": "acme"})) as ctx:
        identity = load_identity(ctx)
        space = EmbeddingSpace.of(ctx.embedder)
    assert identity.public_key_b64 == public_key
    payload = open_publication(out.read_bytes(), "acme", [identity.public_key], space, now=datetime.now(timezone.utc))
    assert payload.sequence == 1 and len(payload.summaries) == communities

    result = _run(home, "status")
    assert result.exit_code == 0, result.output
    assert "site: acme" in result.output
    assert f"public key: {public_key}" in result.output
    assert "4 documents" in result.output and f"{communities} communities" in result.output
    assert f"{communities} summaries" in result.output
    assert "last publication: sequence 1" in result.output
    assert "config: " in result.output


def test_bad_input_exits_1_with_the_message_and_ingests_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert _run(home, "install").exit_code == 0
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "binary.txt").write_bytes(b"\x00\x01\x02 not text \xff\xfe")
    (bad / "fine.md").write_text("# Fine\n\nA perfectly good document about the Brightwater Lighthouse.\n")
    result = _run(home, "ingest", "--no-progress", str(bad))
    assert result.exit_code == 1
    assert "Error:" in result.output and "binary.txt" in result.output
    assert "0 documents" in _run(home, "status").output


def test_a_missing_site_id_is_a_one_line_error(tmp_path: Path) -> None:
    result = _run(tmp_path / "home", "install", site_id="")
    assert result.exit_code == 1
    assert "no site id" in result.output and "Traceback" not in result.output


def test_publish_and_serve_before_install_say_what_to_do(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for args in (["publish", "--out", str(tmp_path / "x.json")], ["serve", "--port", "8799"]):
        result = _run(home, *args)
        assert result.exit_code == 1
        assert "run `hansa site install` first" in result.output


def test_status_of_a_fresh_home(tmp_path: Path) -> None:
    result = _run(tmp_path / "home", "status")
    assert result.exit_code == 0, result.output
    assert "installed: no" in result.output and "last publication: none" in result.output


def test_help_teaches_the_order() -> None:
    result = CliRunner().invoke(main, ["site", "--help"])
    assert result.exit_code == 0
    steps = [result.output.index(f"hansa site {cmd}") for cmd in ("install", "ingest", "communities", "publish", "serve")]
    assert steps == sorted(steps)


def test_query_delete_sync_skip_bad_and_uninstall_on_the_embedded_store(tmp_path: Path, docs: Path) -> None:
    import json
    import shutil

    home = tmp_path / "home"
    folder = tmp_path / "kb"
    shutil.copytree(docs, folder)
    (folder / "notes.csv").write_text("a,b\n", encoding="utf-8")
    assert _run(home, "install").exit_code == 0
    result = _run(home, "ingest", "--no-progress", str(folder))
    assert "documents_new: 4" in result.output
    assert f"skipped (unsupported type): {folder / 'notes.csv'}" in result.output
    assert _run(home, "communities", "--no-progress").exit_code == 0

    asked = _run(home, "query", "Who designed the Brightwater Lighthouse?")
    assert asked.exit_code == 0 and "Margaret Ellison" in asked.stdout
    # `site query` shows what the gateway would get: under the default answer policy a file's name, not its path
    assert "[1] kb/lighthouse.md: Brightwater Lighthouse" in asked.stdout and "— lighthouse.md" in asked.stdout
    assert "kb:lighthouse.md" not in asked.stdout
    as_json = json.loads(_run(home, "query", "--json", "--top-k", "2", "Who designed the Brightwater Lighthouse?").stdout)
    assert as_json["site_id"] == "acme" and len(as_json["citations"]) <= 2
    assert as_json["citations"][0] == {**as_json["citations"][0], "doc_id": "kb/lighthouse.md", "source": "lighthouse.md"}
    assert _run(home, "query", "").exit_code == 1  # bad input: a clear one-line error

    deleted = _run(home, "delete", "--no-progress", "kb/volcano.md", "kb/absent.md")
    assert "deleted: kb/volcano.md" in deleted.stdout and "not found (nothing done): kb/absent.md" in deleted.output
    assert "run `hansa site publish`" in deleted.output

    (folder / "roastery.txt").unlink()
    (folder / "broken.txt").write_bytes(b"\x00\x01")
    refused = _run(home, "ingest", "--no-progress", "--sync", str(folder))
    assert refused.exit_code == 1 and "broken.txt" in refused.output
    synced = _run(home, "ingest", "--no-progress", "--sync", "--skip-bad", "--json", str(folder))
    report = json.loads(synced.stdout)
    assert report["documents_deleted"] == ["kb/roastery.txt"] and len(report["bad"]) == 1
    assert report["documents_new"] == 1  # volcano.md is still in the folder: a sync brings it back
    assert "skipped (unreadable):" in synced.output
    status = _run(home, "status").stdout
    assert "graph (embedded): 3 documents" in status, status

    # a second site id on the same stores (same graph file and Milvus data) is refused, naming the first
    other = _run(home, "install", site_id="other")
    assert other.exit_code == 1 and "'acme'" in other.output

    assert (home / "terms.json").exists()  # built with the communities
    assert "term statistics: " in _run(home, "status").stdout
    # a threshold changed since the sketch was built: status says so and how to fix it, publish refuses
    stale = _run(home, "status", env={"HANSA_SITE_TERMS_MIN_DOCUMENTS": "3"})
    assert stale.exit_code == 0 and "run `hansa site communities`" in stale.stdout
    gone = _run(home, "uninstall", "--yes")
    assert gone.exit_code == 0 and "collections: chunks, summaries, sentences" in gone.stdout
    assert not (home / "site.json").exists() and not (home / "sources.json").exists()
    assert not (home / "terms.json").exists()
    assert (home / "keys" / "site-ed25519.pem").exists()
    assert "installed: no" in _run(home, "status").stdout
    assert _run(home, "install", site_id="other").exit_code == 0  # free for another site now
