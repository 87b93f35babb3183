"""`hansa --log-json site ...`: every line on stderr is one JSON object (issue 34: tqdm bars, the
ingest's "skipped" notes and other libraries' warnings came between the JSON lines, which a log
shipper drops or mangles). Run as real processes, so lines written straight to the terminal count."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.test_readme_admin_path import DOCS

COMMANDS = [
    ["site", "install"],
    ["site", "ingest", "./docs"],           # docs/table.csv: the "skipped (unsupported type)" note
    ["site", "communities"],
    ["site", "query", "Who designed the Brightwater Lighthouse?"],
    ["site", "delete", "docs/volcano.txt", "docs/nothing.txt"],   # the "not found" note, a refresh
    ["site", "status"],
]


def test_every_stderr_line_of_the_site_commands_is_json(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    for name, text in DOCS.items():
        (tmp_path / "docs" / name).write_text(text, encoding="utf-8")
    (tmp_path / "docs" / "table.csv").write_text("a,b\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HANSA_")}
    env.update({"HANSA_HOME": str(tmp_path / "home"), "HANSA_SITE_SITE_ID": "acme",
                "PYTHONWARNINGS": "always"})  # warnings a library raises must come as JSON too
    hansa = Path(sys.executable).parent / "hansa"
    events: list[str] = []
    for command in COMMANDS:
        proc = subprocess.run([str(hansa), "--log-json", *command], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, f"{command}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
        for line in proc.stderr.splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                raise AssertionError(f"`hansa --log-json {' '.join(command)}` wrote a non-JSON line: {line!r}") from None
            assert isinstance(record, dict) and {"ts", "level", "event"} <= set(record), line
            events.append(record["event"])
    for expected in ("ingest.skipped_unsupported", "ingest.progress", "ingest.done", "communities.done",
                     "delete.unknown", "communities.refreshed"):
        assert expected in events, (expected, events)


def test_a_refusal_under_log_json_is_one_json_error_event(tmp_path: Path) -> None:
    """A refused Neo4j port: exit 1 at once, and the reason as a JSON event, not click's "Error:" line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HANSA_")}
    env.update({"HANSA_HOME": str(tmp_path / "home"), "HANSA_SITE_SITE_ID": "acme", "HANSA_GRAPH_BACKEND": "neo4j",
                "HANSA_NEO4J_URI": "bolt://127.0.0.1:1"})
    hansa = Path(sys.executable).parent / "hansa"
    proc = subprocess.run([str(hansa), "--log-json", "site", "install"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1, proc.stderr
    records = [json.loads(line) for line in proc.stderr.splitlines()]
    [failure] = [r for r in records if r["event"] == "command.failed"]
    assert failure["level"] == "error" and failure["exit_code"] == 1
    assert failure["error"].startswith("cannot reach Neo4j at bolt://127.0.0.1:1") and "HANSA_NEO4J_URI" in failure["error"]
