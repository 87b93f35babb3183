"""`hansa embedder list|fetch|verify` as an admin runs them (the catalog's real files, cached per user)."""
from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from hansa.adapters.embedder.catalog import MODELS
from hansa.cli import main


def _run(tmp_path: Path, *args: str):  # noqa: ANN202
    return CliRunner().invoke(main, ["--home", str(tmp_path), "--log-level", "warning", "embedder", *args])


def test_fetch_verify_and_list_the_configured_model(tmp_path: Path) -> None:
    fetched = _run(tmp_path, "fetch")  # the configured default; a no-op where it is cached already
    assert fetched.exit_code == 0, fetched.output
    assert "all-MiniLM-L6-v2" in fetched.output and MODELS["all-MiniLM-L6-v2"].graph.sha256[:12] in fetched.output
    verified = _run(tmp_path, "verify")
    assert verified.exit_code == 0 and "all-MiniLM-L6-v2: ok" in verified.output
    listed = _run(tmp_path, "list", "--json")
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert set(rows) == set(MODELS)
    assert rows["all-MiniLM-L6-v2"]["configured"] and rows["all-MiniLM-L6-v2"]["fetched"]
    assert rows["e5-small-v2-q"]["query_prefix"] == "query: " and rows["bge-small-en-v1.5"]["pooling"] == "cls"


def test_an_unknown_model_is_refused_with_the_catalog(tmp_path: Path) -> None:
    result = _run(tmp_path, "verify", "text-embedding-3-large")
    assert result.exit_code != 0 and "bge-small-en-v1.5-q" in result.output
