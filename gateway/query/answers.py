"""What a reader gets beside an answer: citations they can use and a per-site summary.

Citations: the fused answer's citation list holds every document the answering sites cited; a
reader needs the ones the answer uses, each with its title, the cited sentence (snippet), the page
for PDFs and the document's source, never only an opaque id. `readable_citations` builds them from
`FusedAnswer.sentences` (read-only): `n` is the [n] marker, `used` says whether the answer (the
synthesized one when given) carries it.

Per-site summary, as Elasticsearch's cross-cluster search reports `_clusters`: total (called plus
skipped), successful, skipped (chosen but not called: budget, gate), failed, timed_out, and
`partial: true` when any called site failed. `all_failed` is what makes a query a 502.

The query engine builds both into its QueryResult (gateway.query.engine); the HTTP adapters only
serialize them.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Sequence

from hansa.gateway.client import OK, TIMEOUT, SiteCall
from hansa.gateway.query.fusion import FusedAnswer

if TYPE_CHECKING:  # the engine imports this module: no import of the engine package at run time
    from hansa.gateway.query.request import Budget

_MARKER = re.compile(r"\[(\d+)\]")


def readable_citations(fused: FusedAnswer, answer: str | None = None) -> list[dict[str, Any]]:
    """Every citation as JSON plus `n`, `used` and, for the used ones, the first cited sentence as
    `snippet` (the evidence sentence that carries its marker). `answer`: the answer as written
    (synthesized); its [n] markers say which citations are used (default: the fused sentences')."""
    snippets: dict[int, str] = {}
    for s in fused.sentences:
        snippets.setdefault(s.citation, s.text)
    used = set(snippets) if answer is None else {int(n) for n in _MARKER.findall(answer)} & set(snippets)
    out = []
    for n, c in enumerate(fused.citations, start=1):
        item = {"n": n, **c.to_json(), "used": n in used}
        if not item.get("title"):
            item["title"] = c.doc_id  # a document the site did not title: its id is all there is
        if n in used:
            item["snippet"] = snippets[n]
        out.append(item)
    return out


def site_summary(calls: Sequence[SiteCall], selected: Sequence[str] = ()) -> dict[str, Any]:
    """The `_clusters`-like summary of one query's calls (`selected`: the sites the router or the
    request chose; those not called count as skipped)."""
    called = {c.site_id for c in calls}
    ok = sum(1 for c in calls if c.status == OK)
    timed_out = sum(1 for c in calls if c.status == TIMEOUT)
    failed = len(calls) - ok - timed_out
    skipped = len([s for s in dict.fromkeys(selected) if s not in called])
    return {"total": len(calls) + skipped, "successful": ok, "skipped": skipped, "failed": failed,
            "timed_out": timed_out, "partial": ok < len(calls),
            "details": [c.trace_json() for c in calls]}


def all_failed(summary: dict[str, Any], budget: "Budget") -> bool:
    """True when sites were called and none answered on their own account: the query is a 502, not
    a 200 "No answer". A query whose own time or byte budget cut the calls short is not the sites'
    failure (the client asked for it): that stays a 200 with `partial: true`."""
    if budget.time_ms is not None or budget.bytes is not None:
        return False
    return summary["successful"] == 0 and summary["failed"] + summary["timed_out"] > 0

