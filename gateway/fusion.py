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

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from hansa.adapters.embedder.base import Embedder
from hansa.gateway.client import OK, SiteCall
from hansa.sync.wire import Citation, PartialAnswer

MAX_SENTENCES = 4
MAX_SENTENCES_PER_SITE = 32  # a site's own ranking decides which; bounds the embedding cost
DUPLICATE_COSINE = 0.9


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
    vector: np.ndarray
    weight: float = 0.0

    def attribution(self) -> tuple[bool, float, float]:
        return (self.cited, self.confidence, self.weight)


def _support(answer: PartialAnswer) -> list[tuple[str, str]]:
    """The (sentence, doc_id) pairs a site offers; a bare answer counts as one, under its top source."""
    pairs = [(t.strip(), d) for t, d in answer.sentences if t.strip()]
    if not pairs and answer.answer.strip():
        pairs = [(answer.answer.strip(), answer.citations[0].doc_id if answer.citations else "")]
    return pairs[:MAX_SENTENCES_PER_SITE]


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
    one per (site, document), best score kept, ranked by (site confidence, score)."""
    best: dict[tuple[str, str], tuple[float, Citation]] = {}
    for call in ok:
        assert call.answer is not None
        conf = call.answer.confidence
        for c in call.answer.citations:
            key = (call.site_id, c.doc_id)
            if key not in best or c.score > best[key][1].score:
                best[key] = (conf, Citation(call.site_id, c.doc_id, c.title, c.score))
    for cand in chosen:
        key = (cand.site_id, cand.doc_id)
        if key not in best:
            best[key] = (cand.confidence, Citation(cand.site_id, cand.doc_id, "", 0.0))
    ranked = sorted(best.values(), key=lambda e: (-e[0], -e[1].score, e[1].site_id, e[1].doc_id))
    return tuple(c for _, c in ranked)


def fuse(
    question_vector: np.ndarray,
    calls: Sequence[SiteCall],
    embedder: Embedder,
    max_sentences: int = MAX_SENTENCES,
    duplicate_cosine: float = DUPLICATE_COSINE,
) -> FusedAnswer:
    ok = [c for c in calls if c.status == OK and c.answer is not None]
    pairs: list[tuple[SiteCall, str, str]] = []
    for call in ok:
        assert call.answer is not None
        pairs.extend((call, text, doc_id) for text, doc_id in _support(call.answer))
    if not pairs:
        note = _why_no_answer(calls)
        return FusedAnswer(answer=f"No answer: {note}.", citations=_rank_citations(ok, []), sentences=(), note=note)

    vectors = np.asarray(embedder.embed([text for _, text, _ in pairs]), dtype=np.float32)
    q = np.asarray(question_vector, dtype=np.float32).reshape(-1)
    q = q / (np.linalg.norm(q) or 1.0)
    relevance = vectors @ q
    candidates: list[_Candidate] = []
    for i, ((call, text, doc_id), vec) in enumerate(zip(pairs, vectors)):
        assert call.answer is not None
        cited = any(c.doc_id == doc_id for c in call.answer.citations)
        weight = call.answer.confidence * max(0.0, float(relevance[i]))
        candidates.append(_Candidate(text, call.site_id, doc_id, call.answer.confidence, cited, i, vec, weight))

    kept: list[_Candidate] = []
    for cand in sorted(candidates, key=lambda c: (-c.weight, c.order)):
        dup = next((j for j, k in enumerate(kept) if float(k.vector @ cand.vector) > duplicate_cosine), None)
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
