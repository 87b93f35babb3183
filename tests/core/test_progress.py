"""Progress for a person (a tqdm bar with counts and a rate) or, with --log-json, as JSON events."""
from __future__ import annotations

import json

import pytest

from hansa.core import logs
from hansa.core.progress import Progress


@pytest.fixture(autouse=True)
def _text_logs_after() -> None:
    yield
    logs.configure("info", as_json=False)


def test_json_mode_logs_events_with_counts_and_rate_and_never_a_bar(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("info", as_json=True)
    with Progress("ingest", 3, "doc", enabled=True, every_s=0) as shown:
        for chunks in (4, 2, 6):
            shown.advance(1, chunks=chunks)
    lines = capsys.readouterr().err.splitlines()
    events = [json.loads(line) for line in lines]  # every line is JSON: no bar was drawn
    assert [(e["event"], e["done"], e["total"], e["chunks"]) for e in events] == [
        ("ingest.progress", 1, 3, 4), ("ingest.progress", 2, 3, 6), ("ingest.progress", 3, 3, 12)]
    assert all(e["chunks_per_s"] > 0 and "elapsed_s" in e for e in events)


def test_json_events_are_throttled_but_the_last_always_comes(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("info", as_json=True)
    with Progress("ingest", 50, "doc", enabled=True, every_s=3600) as shown:
        for _ in range(50):
            shown.advance(1, chunks=1)
    events = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [(e["done"], e["chunks"]) for e in events] == [(50, 50)]


def test_a_terminal_gets_a_bar_with_the_counts_and_disabled_means_silent(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("info", as_json=False)
    with Progress("ingest", 2, "doc", enabled=True) as shown:
        shown.advance(1, chunks=5)
        shown.advance(1, chunks=5)
    err = capsys.readouterr().err
    assert "ingest" in err and "2/2" in err and "chunks=10" in err and "chunks_per_s=" in err
    logs.configure("info", as_json=True)
    with Progress("ingest", 2, "doc", enabled=False, every_s=0) as shown:
        shown.advance(2, chunks=5)
    assert capsys.readouterr().err == ""
