"""Extractive fusion of partial answers, with attribution a reader can follow.

The gateway holds no documents, so it cannot write new claims; it can only choose among the
sentences sites already stand behind. Each candidate sentence is weighted by

    weight = site confidence x max(0, cosine(sentence, question))

(the site's belief it answered, times how on-topic the sentence is), near-duplicates (cosine above
DUPLICATE_COSINE) collapse to the better-attributed copy — one its site actually cites, then the
more confident site, then the higher weight — and the best MAX_SENTENCES are kept, best first.
Every sentence carries an [n] marker indexing the citation list, so each claim points at the
(site, document) it came from. Conflict-aware fusion (SPLIT-RAG) comes later.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from hansa.adapters.embedder.base import Embedder
from hansa.gateway.client import OK, SiteCall
from hansa.sync.wire import Citation, PartialAnswer

MAX_SENTENCES = 4
MAX_SENTENCES_PER_SITE = 32  # a site's own ranking decides which; bounds the embedding cost
DUPLICATE_JACCARD = 0.8


@dataclass(frozen=True)
class FusedSentence:
    text: str
    site_id: str
    doc_id: str
    weight: float
    citation: int  # 1-based index into FusedAnswer.citations: the [n] marker


@dataclass(frozen=True)
class FusedAnswer:
    answer: str
    citations: tuple[Citation, ...]
    sentences: tuple[FusedSentence, ...]
    note: str | None = None  # why there is no answer, when there is none


@dataclass
class _Candidate:
    text: str
    site_id: str
    doc_id: str
    confidence: float
    cited: bool
    order: int
    words: frozenset[str]
    weight: float = 0.0

    def attribution(self) -> tuple[bool, float, float]:
        return (self.cited, self.confidence, self.weight)


def _support(answer: PartialAnswer) -> list[tuple[str, str, float | None]]:
    """The (sentence, doc_id, relevance or None) a site offers; a bare answer counts as one, under
    its top source."""
    out = [(s[0].strip(), s[1], s[2] if len(s) > 2 else None) for s in answer.sentences if s[0].strip()]
    if not out and answer.answer.strip():
        out = [(answer.answer.strip(), answer.citations[0].doc_id if answer.citations else "", None)]
    return out[:MAX_SENTENCES_PER_SITE]


def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in re.findall(r"\w+", text.casefold()) if len(w) > 2)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def _why_no_answer(calls: Sequence[SiteCall]) -> str:
    if not calls:
        return "no site was asked: no published summary matches the question"
    failed = "; ".join(
        f"{c.site_id}: {c.status}" + (f" ({c.error})" if c.error else "") for c in calls if c.status != OK
    )
    if all(c.status != OK for c in calls):
        return f"no site answered: {failed}"
    note = "the sites that answered found nothing relevant to the question"
    return f"{note}; the others failed: {failed}" if failed else note


def _rank_citations(ok: Sequence[SiteCall], chosen: Sequence[_Candidate]) -> tuple[Citation, ...]:
    """Union of the answering sites' citations (plus any chosen sentence's uncited document),
    one per (site, document), best score kept, ranked by score (then site confidence)."""
    best: dict[tuple[str, str], tuple[float, Citation]] = {}
    for call in ok:
        assert call.answer is not None
        conf = call.answer.confidence
        for c in call.answer.citations:
            key = (call.site_id, c.doc_id)
            if key not in best or c.score > best[key][1].score:
                best[key] = (conf, replace(c, site_id=call.site_id))  # page and source travel along
    for cand in chosen:
        key = (cand.site_id, cand.doc_id)
        if key not in best:
            best[key] = (cand.confidence, Citation(cand.site_id, cand.doc_id, "", 0.0))
    ranked = sorted(best.values(), key=lambda e: (-e[1].score, -e[0], e[1].site_id, e[1].doc_id))
    return tuple(c for _, c in ranked)


def fuse(
    question_vector: np.ndarray,
    calls: Sequence[SiteCall],
    embedder: Embedder,
    max_sentences: int = MAX_SENTENCES,
    duplicate_jaccard: float = DUPLICATE_JACCARD,
) -> FusedAnswer:
    ok = [c for c in calls if c.status == OK and c.answer is not None]
    pairs: list[tuple[SiteCall, str, str, float | None]] = []
    for call in ok:
        assert call.answer is not None
        pairs.extend((call, text, doc_id, rel) for text, doc_id, rel in _support(call.answer))
    if not pairs:
        note = _why_no_answer(calls)
        return FusedAnswer(answer=f"No answer: {note}.", citations=_rank_citations(ok, []), sentences=(), note=note)
    relevance = np.array([rel if rel is not None else 0.0 for *_, rel in pairs], dtype=np.float32)
    missing = [i for i, (*_, rel) in enumerate(pairs) if rel is None]
    if missing:  # only sentences a site sent without their relevance
        q = np.asarray(question_vector, dtype=np.float32).reshape(-1)
        q = q / (np.linalg.norm(q) or 1.0)
        relevance[missing] = np.asarray(embedder.embed([pairs[i][1] for i in missing]), dtype=np.float32) @ q
    candidates: list[_Candidate] = []
    for i, (call, text, doc_id, _) in enumerate(pairs):
        assert call.answer is not None
        cited = any(c.doc_id == doc_id for c in call.answer.citations)
        weight = call.answer.confidence * max(0.0, float(relevance[i]))
        candidates.append(_Candidate(text, call.site_id, doc_id, call.answer.confidence, cited, i, _words(text), weight))
    kept: list[_Candidate] = []
    for cand in sorted(candidates, key=lambda c: (-c.weight, c.order)):
        dup = next((j for j, k in enumerate(kept) if _jaccard(k.words, cand.words) > duplicate_jaccard), None)
        if dup is None:
            kept.append(cand)
        elif cand.attribution() > kept[dup].attribution():
            kept[dup] = cand
    chosen = [c for c in sorted(kept, key=lambda c: (-c.weight, c.order)) if c.weight > 0][:max_sentences]
    citations = _rank_citations(ok, chosen)
    if not chosen:
        note = _why_no_answer(calls)
        return FusedAnswer(answer=f"No answer: {note}.", citations=citations, sentences=(), note=note)

    index = {(c.site_id, c.doc_id): n for n, c in enumerate(citations, start=1)}
    sentences = tuple(
        FusedSentence(c.text, c.site_id, c.doc_id, c.weight, index[(c.site_id, c.doc_id)]) for c in chosen
    )
    answer = " ".join(f"{s.text} [{s.citation}]" for s in sentences)
    return FusedAnswer(answer=answer, citations=citations, sentences=sentences)
