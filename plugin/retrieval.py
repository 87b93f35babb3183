"""A site's answer to the gateway: cited documents plus an extractive partial answer.

Why extractive: a site must answer without an LLM, and whatever leaves the site must be
attributable. The answer is made of whole sentences copied from the best chunks, each paired with
the document it came from, so the gateway can fuse and attribute them; no other chunk text ever
appears in the response (the site's data stays home, per the trust model).

Two modes, as the gateway asks:
- local: chunk vectors (Milvus) → their chunks (graph) → graph expansion to chunks sharing entities,
  rescored by cosine with the question, so expansion adds neighbours only when they are relevant;
- global: community-summary vectors → the chunks of the best communities (broad questions).

Which sentences answer: statements only (plugin.answer_candidates). They are ranked by cosine
with the question plus a small bonus for sharing its content words, which favours the sentence
that talks about what was asked ("items") over one that merely shares its topic. Their vectors were
computed at ingest (plugin.sentence_vectors): a request embeds only the question. With `[site]
reader` (distributed reading), the reader re-ranks the READ_CANDIDATES best of them by whether they
answer the question; the relevance the site reports stays the cosine (the gateway's measurement
bounds it, gateway.query.fusion), so the reader changes only which sentences leave.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from hansa.adapters.embedder.scale import ScoreScale, default_scale, scale_of
from hansa.adapters.records import ChunkHit
from hansa.core.logs import get_logger
from hansa.plugin import sentence_vectors
from hansa.plugin.answer_policy import AnswerPolicy
from hansa.plugin.answer_candidates import MAX_SENTENCE_CHARS, answer_sentences, chunk_sentences  # noqa: F401  (re-exported)
from hansa.core.text import content_words
from hansa.plugin.readers import page_within
from hansa.plugin.site import CHUNKS, SUMMARIES, SiteContext
from hansa.sync.wire import Citation, PartialAnswer, RetrieveRequest

log = get_logger(__name__)

EXPAND_LIMIT = 10  # graph neighbours added to the vector seeds
ANSWER_CHUNKS = 5  # best chunks whose sentences compete for the answer
READ_CANDIDATES = 12  # with [site] reader: sentences read per request, the best by cosine
MAX_CANDIDATES = 40  # sentences ranked per request (vectors stored at ingest)
MAX_ANSWER_SENTENCES = 3  # default of [site] answer_max_sentences: counting those brought along (see _ANAPHORA)
REDUNDANCY = 0.5  # weight of a candidate's similarity to the chosen sentences (see _choose)
GLOBAL_COMMUNITIES = 3  # communities whose chunks answer a global question
GLOBAL_MAX_CHUNKS = 200  # chunk vectors read per global question

# The values in cosine units are the site's embedder's (adapters/embedder/scales.toml, looked up by
# its model_id): answer_margin (a further sentence may join the answer if within this cosine of the
# best one), duplicate_cosine (... and is not a near-copy of a sentence already chosen), overlap_bonus
# (added to the cosine, times the share of the question's content words a sentence has), and the
# confidence map: the cosine of the best evidence (chunk or sentence) with the question, mapped
# linearly from conf_low (unrelated text: MiniLM scores it ~0.0-0.2) to conf_high (a sentence that
# states the answer: ~0.6-0.85 for MiniLM) and clipped to [0, 1]. At confidence 0 the site cites what
# it found but offers no answer sentences: nothing it holds is about the question.


@dataclass(frozen=True)
class _Sentence:
    text: str
    doc_id: str
    chunk_id: str  # with `position`, names its stored vector (plugin.sentence_vectors)
    chunk_rank: int  # rank of its chunk: keeps the chosen sentences in a readable order
    position: int  # character offset in its chunk
    context: "_Sentence | None" = None  # the sentence before it, when this one depends on it
    relevance: float = 0.0  # cosine with the question of the pick it belongs to (sent to the gateway)
    page: int | None = None  # the 1-based PDF page the sentence starts on; None for unpaged text

    @property
    def scored_text(self) -> str:
        return f"{self.context.text} {self.text}" if self.context else self.text


def confidence_from_similarity(similarity: float, scale: ScoreScale | None = None) -> float:
    """The documented mapping from best cosine similarity to a confidence in [0, 1], on `scale`
    (the site's embedder's; the default model's when not given)."""
    scale = scale or default_scale()
    value = (similarity - scale.conf_low) / (scale.conf_high - scale.conf_low)
    return round(float(min(1.0, max(0.0, value))), 4)


def _overlap(question_words: frozenset[str], sentence: str) -> float:
    """Share of the question's content words that the sentence contains, in [0, 1]."""
    if not question_words:
        return 0.0
    return len(question_words & content_words(sentence)) / len(question_words)


def _cosine(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1) * (float(np.linalg.norm(query)) or 1.0)
    norms[norms == 0] = 1.0
    return (matrix @ query) / norms


def _rescore(ctx: SiteContext, chunks: Sequence[ChunkHit], query: np.ndarray) -> list[ChunkHit]:
    """Give chunks a cosine score from their stored vectors (chunks without one are dropped)."""
    if not chunks:
        return []
    stored = ctx.vectors.get(CHUNKS, [c.chunk_id for c in chunks])
    kept = [c for c in chunks if c.chunk_id in stored]
    if not kept:
        return []
    scores = _cosine(np.stack([np.asarray(stored[c.chunk_id], dtype=np.float32) for c in kept]), query)
    return [_with_score(c, float(s)) for c, s in zip(kept, scores)]


def _with_score(chunk: ChunkHit, score: float) -> ChunkHit:
    return replace(chunk, score=score)


def _local_chunks(ctx: SiteContext, query: np.ndarray, top_k: int) -> list[ChunkHit]:
    hits = ctx.vectors.search(CHUNKS, query[None, :], limit=2 * top_k)[0]
    if not hits:
        return []
    scores = {h.id: h.score for h in hits}
    seeds = [_with_score(c, scores[c.chunk_id]) for c in ctx.graph.chunks([h.id for h in hits])]
    seen = {c.chunk_id for c in seeds}
    expanded = [c for c in ctx.graph.expand(list(seen), limit=EXPAND_LIMIT) if c.chunk_id not in seen]
    return seeds + _rescore(ctx, expanded, query)


def _global_chunks(ctx: SiteContext, query: np.ndarray) -> list[ChunkHit] | None:
    """Chunks of the best-matching communities; None when the site has no community summaries."""
    hits = ctx.vectors.search(SUMMARIES, query[None, :], limit=GLOBAL_COMMUNITIES)[0]
    if not hits:
        return None
    by_id = {c.id: c for c in ctx.graph.communities()}
    chunk_ids: dict[str, None] = {}  # ordered set: best community first, its most central chunks first
    for hit in hits:
        community = by_id.get(hit.id)
        for cid in community.chunk_ids if community is not None else ():
            chunk_ids.setdefault(cid)
        if len(chunk_ids) >= GLOBAL_MAX_CHUNKS:
            break
    if not chunk_ids:
        return None
    return _rescore(ctx, ctx.graph.chunks(list(chunk_ids)[:GLOBAL_MAX_CHUNKS]), query)


def _citations(site_id: str, ranked: Sequence[ChunkHit], top_k: int, picked: Sequence[_Sentence]) -> tuple[Citation, ...]:
    """One citation per document, best first (the answer policy then decides which may leave). Its
    page is that of the first answer sentence taken from it (picked in reading order), else the page
    its best chunk starts on: the best chunk of a long PDF need not be the one the answer quotes
    (issue 34: p.14 cited for a sentence on p.4)."""
    best: dict[str, ChunkHit] = {}
    for chunk in ranked:  # ranked best first: the first chunk of a document is its best
        best.setdefault(chunk.doc_id, chunk)
    quoted: dict[str, int] = {}
    for sentence in picked:
        if sentence.page is not None:
            quoted.setdefault(sentence.doc_id, sentence.page)
    return tuple(
        Citation(site_id=site_id, doc_id=c.doc_id, title=c.title, score=round(c.score, 4),
                 page=quoted.get(c.doc_id, c.page), source=c.source or None)
        for c in list(best.values())[:top_k]
    )


def _candidates(ranked: Sequence[ChunkHit]) -> list[_Sentence]:
    out: list[_Sentence] = []
    seen: set[str] = set()
    for rank, chunk in enumerate(ranked[:ANSWER_CHUNKS]):
        previous: _Sentence | None = None
        for candidate in chunk_sentences(chunk.text):
            text = candidate.text
            context = previous if candidate.context is not None else None
            page = page_within(chunk.page, chunk.text, candidate.position)
            sentence = _Sentence(text, chunk.doc_id, chunk.chunk_id, rank, candidate.position, context, page=page)
            previous = sentence
            if text in seen:  # chunk overlap repeats sentences
                continue
            seen.add(text)
            out.append(sentence)
            if len(out) >= MAX_CANDIDATES:
                return out
    return out


def _choose(ctx: SiteContext, candidates: Sequence[_Sentence], query: np.ndarray, question: str,
            limit: int = MAX_ANSWER_SENTENCES, scale: ScoreScale | None = None) -> tuple[list[_Sentence], float]:
    """Up to `limit` sentences (counting the context each brings), and the best cosine
    for the confidence.

    Relevance is the cosine with the question plus overlap_bonus times the share of the question's
    content words the sentence (with its context) contains: small next to the cosine gap between
    on- and off-topic text, so it only reorders sentences the embedder finds about equally relevant.
    Only sentences within answer_margin of the best cosine compete. The best comes first; each further
    pick maximizes relevance minus REDUNDANCY times its cosine with the closest sentence already
    chosen (maximal marginal relevance), so a second sentence that restates the first ("You can build
    a safe room" / "A safe room must be anchored") loses to one that answers another part of the
    question; near-copies (duplicate_cosine) are never taken. The three are `scale`'s (the site's
    embedder's; the default model's when not given)."""
    if not candidates:
        return [], 0.0
    scale = scale or default_scale()
    vectors = sentence_vectors.vectors_for(ctx, [(s.chunk_id, s.position) for s in candidates], [s.scored_text for s in candidates])
    cosines = _cosine(vectors, query)
    asked = content_words(question)
    relevance = cosines + scale.overlap_bonus * np.array([_overlap(asked, s.scored_text) for s in candidates], dtype=np.float32)
    floor = float(cosines.max()) - scale.answer_margin
    eligible = [i for i in np.argsort(-relevance, kind="stable").tolist() if cosines[i] >= floor]
    if ctx.reader is not None:  # distributed reading: the reader ranks the best candidates by cosine
        eligible = eligible[:READ_CANDIDATES]
        for i, reading in zip(eligible, ctx.reader.read(question, [candidates[i].text for i in eligible])):
            relevance[i] = reading.score
        eligible.sort(key=lambda i: -float(relevance[i]))
    chosen: list[int] = []
    closest = np.zeros(len(candidates), dtype=np.float32)  # cosine with the nearest chosen sentence
    picked: dict[str, _Sentence] = {}  # by text: overlapping chunks repeat sentences
    while eligible and len(picked) < limit:
        i = max(eligible, key=lambda k: float(relevance[k] - REDUNDANCY * closest[k]))  # first wins ties
        eligible.remove(i)
        if chosen and closest[i] >= scale.duplicate_cosine:
            continue
        parts = [p for p in (candidates[i].context, candidates[i]) if p is not None and p.text not in picked]
        if len(picked) + len(parts) > limit:
            continue  # a shorter runner-up may still fit
        chosen.append(i)
        closest = np.maximum(closest, _cosine(vectors, vectors[i]))
        for part in parts:
            picked[part.text] = replace(part, relevance=round(float(cosines[i]), 6))
    return sorted(picked.values(), key=lambda s: (s.chunk_rank, s.position)), float(cosines.max())


def empty_answer(site_id: str) -> PartialAnswer:
    return PartialAnswer(site_id=site_id, answer="", citations=(), confidence=0.0, sentences=())


def retrieve(ctx: SiteContext, req: RetrieveRequest) -> PartialAnswer:
    """Answer one request from this site's data; an empty site answers with nothing, not an error."""
    site_id = ctx.site_id
    query = np.asarray(ctx.embedder.embed_query(req.question), dtype=np.float32)
    chunks: list[ChunkHit] | None = None
    if req.mode == "global":
        chunks = _global_chunks(ctx, query)
        if chunks is None:
            log.info("retrieve.global_fallback", reason="no community summaries")
    if chunks is None:
        chunks = _local_chunks(ctx, query, req.top_k)
    if not chunks:
        log.info("retrieve.empty", mode=req.mode)
        return empty_answer(site_id)
    ranked = sorted(chunks, key=lambda c: -c.score)
    policy = AnswerPolicy.from_config(ctx.cfg.site)
    scale = scale_of(ctx.embedder)
    picked, best_sentence = _choose(ctx, _candidates(ranked), query, req.question, policy.max_sentences, scale)
    confidence = confidence_from_similarity(max(ranked[0].score, best_sentence), scale)
    if confidence == 0.0:
        picked = []
    answer = policy.apply(PartialAnswer(
        site_id=site_id,
        answer=" ".join(s.text for s in picked),
        citations=_citations(site_id, ranked, req.top_k, picked),
        confidence=confidence,
        sentences=tuple((s.text, s.doc_id, s.relevance) for s in picked),
    ), {c.doc_id: c.source for c in ranked if c.source})
    log.info("retrieve.done", mode=req.mode, chunks=len(ranked), citations=len(answer.citations), confidence=answer.confidence)
    return answer
