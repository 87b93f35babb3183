"""The site-admin path of the operations manual (docs/site-admin.md; it was the README's), run as
written: the block between `<!-- admin-path:begin -->` and `<!-- admin-path:end -->` (install -> ingest
-> communities -> query -> publish -> doctor -> status) on the embedded store, in a fresh folder
holding `./docs`.

Every line is either `export NAME=VALUE ...` or a `hansa ...` command; anything else fails the test
(the block must stay runnable by a person as it is). Commands run through the real root command
with exactly the page's arguments, so a renamed option, a changed default or a missing step fails
here, not at an admin's desk."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from hansa.adapters.graph.embedded import SCHEMA_VERSION as EMBEDDED_SCHEMA
from hansa.cli import main

ROOT = Path(__file__).resolve().parents[1]
# The manual's pages whose marked bash blocks the tests run (moved out of the README, issue 33).
SITE_ADMIN_DOC = ROOT / "docs" / "site-admin.md"
PRODUCTION_DOC = ROOT / "docs" / "production.md"
DOCS = {
    "lighthouse.md": "# Brightwater Lighthouse\n\nThe Brightwater Lighthouse stands on the northern cliffs of Karsholm "
    "Island. Engineer Margaret Ellison designed the Brightwater Lighthouse, and it was completed in 1874. The "
    "Karsholm Harbour Trust still owns the Brightwater Lighthouse.\n",
    "volcano.txt": "Mount Teravik is a stratovolcano on the Hallgrim Peninsula. The Hallgrim Volcano Observatory "
    "watches Mount Teravik with twelve seismometers. Volcanologist Ingrid Saeter leads the Hallgrim Volcano "
    "Observatory.\n",
}


def doc_block(name: str, doc: Path = SITE_ADMIN_DOC) -> str:
    """The bash block the manual page `doc` marks `<!-- NAME:begin -->` ... `<!-- NAME:end -->`: the
    tests run the page's own text, so the documentation cannot drift from what works."""
    block = re.compile(rf"<!-- {name}:begin -->\s*```bash\n(.*?)```\s*<!-- {name}:end -->", re.S)
    found = block.findall(doc.read_text(encoding="utf-8"))
    assert len(found) == 1, f"{doc.relative_to(ROOT)} must hold exactly one {name} block"
    return found[0]


def admin_path() -> list[list[str]]:
    """The block's commands as argument lists (comments dropped), in order."""
    lines = doc_block("admin-path").splitlines()
    return [shlex.split(line, comments=True) for line in lines if shlex.split(line, comments=True)]


def test_the_block_is_the_admin_path_in_order() -> None:
    steps = [" ".join(words[:3]) for words in admin_path() if words[0] == "hansa"]
    order = ["hansa site install", "hansa site ingest", "hansa site communities", "hansa site publish", "hansa site doctor"]
    assert [s for s in steps if s in order] == order


def test_the_readme_admin_path_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "docs").mkdir()
    for name, text in DOCS.items():
        (tmp_path / "docs" / name).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    env: dict[str, str | None] = {"HANSA_CONFIG": None, "HANSA_HOME": None, "HANSA_SITE_GATEWAY_URL": None,
                                  "HANSA_GRAPH_BACKEND": None, "HANSA_MILVUS_URI": None}
    outputs: dict[str, str] = {}
    for words in admin_path():
        if words[0] == "export":
            for assignment in words[1:]:
                name, _, value = assignment.partition("=")
                env[name] = value
            continue
        assert words[0] == "hansa", f"the admin-path block may hold only `export` and `hansa` lines, not {words}"
        res = CliRunner().invoke(main, words[1:], env=env, catch_exceptions=False)
        assert res.exit_code == 0, f"`{' '.join(words)}` failed ({res.exit_code}):\n{res.output}"
        outputs[" ".join(words[1:3])] = res.stdout

    home = tmp_path / "acme-home"
    assert (home / "site.json").is_file() and (tmp_path / "acme-publication.json").is_file()
    assert "Margaret Ellison" in outputs["site query"] and "docs/lighthouse.md" in outputs["site query"]
    assert "FAIL" not in outputs["site doctor"] and f"PASS  graph schema: schema v{EMBEDDED_SCHEMA} of site acme" in outputs["site doctor"]
    status = json.loads(outputs["site status"])
    assert status["site_id"] == "acme" and status["graph"]["documents"] == 2 and status["last_publication"]["sequence"] == 1
