"""How `hansa query` shows a gateway response (the HTTP paths are in tests/gateway/http/test_query_cli.py):
only the citations the answer uses, numbered as its markers, with page, source and site; each
conflict with its sides and the kept value; the per-site summary with each call."""
from __future__ import annotations

from hansa.cli.query import render

RESPONSE = {
    "answer": "The dam is 221 m high [2].",
    "citations": [
        {"n": 1, "title": "Reservoirs", "site_id": "water", "doc_id": "docs/res.md", "used": False},
        {"n": 2, "title": "Hoover Dam report", "page": 4, "source": "reports:hoover.pdf", "site_id": "energy",
         "doc_id": "reports/hoover.pdf", "used": True},
    ],
    "conflicts": [{"claim": {"subject": "Hoover Dam", "predicate": "height", "kind": "number"},
                   "sides": [{"value": "221 m", "sites": ["energy", "water"]}, {"value": "200 m", "sites": ["tour"]}],
                   "winner": "221 m", "reason": "the heavier consistent set"}],
    "sites": {"total": 3, "successful": 2, "skipped": 0, "failed": 0, "timed_out": 1, "partial": True,
              "details": [{"site_id": "energy", "status": "ok", "latency_ms": 41.5},
                          {"site_id": "tour", "status": "timeout", "latency_ms": 5000.0, "error": "deadline"}]},
}


def test_render_shows_used_citations_conflicts_and_sites() -> None:
    lines = render(RESPONSE).splitlines()
    assert lines[0] == "The dam is 221 m high [2]."
    assert "[2] Hoover Dam report, page 4 — reports:hoover.pdf (site energy)" in lines
    assert not any(line.startswith("[1] ") for line in lines)  # not used by the answer
    assert "conflict on Hoover Dam height: 221 m (energy, water); 200 m (tour); kept 221 m (the heavier consistent set)" in lines
    assert "sites: 2 of 3 answered, 0 failed, 1 timed out, 0 skipped (partial answer)" in lines
    assert "  tour: timeout in 5000.0 ms: deadline" in lines


def test_a_citation_without_title_source_or_page_shows_its_id() -> None:
    text = render({"answer": "x [1]", "citations": [{"n": 1, "title": "", "site_id": "s", "doc_id": "d/1", "used": True}]})
    assert "[1] d/1 (site s)" in text.splitlines()
