"""SCOUT-RAG's answer quality without an LLM: completeness, breadth and Q = (C + V) / 2.

Measured on a fused answer (what the user would get), so a later round can make it worse — a
more relevant-looking but off-point passage pushing out one that covered the question — which is
why the engine keeps the best answer seen.

  completeness C  share of the question's key terms (its content words, as sites count them)
                  found in the answer's sentences: SCOUT-RAG's "coverage of core conceptual
                  elements". The terms it misses are what a Depth follow-up asks for.
  breadth V       distinct sites and distinct documents the answer's sentences come from,
                  each against a small target (BREADTH_SITES, BREADTH_DOCS), averaged: an answer
                  from one document of one site is narrow. Sites report documents, not
                  communities, so documents stand in for SCOUT-RAG's subtopics.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hansa.gateway.query.fusion import FusedAnswer
from hansa.core.text import content_words  # the sites' own notion of a content word

BREADTH_SITES = 2
BREADTH_DOCS = 3


@dataclass(frozen=True)
class Quality:
    completeness: float
    breadth: float
    uncovered: tuple[str, ...]  # key terms the answer lacks, in question order

    @property
    def value(self) -> float:
        return (self.completeness + self.breadth) / 2

    def to_json(self) -> dict[str, Any]:
        return {"q": round(self.value, 4), "completeness": round(self.completeness, 4),
                "breadth": round(self.breadth, 4), "uncovered": list(self.uncovered)}


def key_terms(question: str) -> list[str]:
    """The question's content words (as sites count them) in the order they appear: the order
    only matters for how a follow-up question reads."""
    return list(dict.fromkeys(w for token in question.split() for w in content_words(token)))


def answer_quality(question: str, fused: FusedAnswer) -> Quality:
    terms = key_terms(question)
    said = frozenset().union(*(content_words(s.text) for s in fused.sentences)) if fused.sentences else frozenset()
    uncovered = tuple(t for t in terms if t not in said)
    completeness = 1 - len(uncovered) / len(terms) if terms else (1.0 if fused.sentences else 0.0)
    sites = {s.site_id for s in fused.sentences}
    docs = {(s.site_id, s.doc_id) for s in fused.sentences}
    breadth = (min(1.0, len(sites) / BREADTH_SITES) + min(1.0, len(docs) / BREADTH_DOCS)) / 2
    return Quality(completeness, breadth, uncovered)
