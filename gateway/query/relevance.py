"""Relevance the gateway measures itself, and the bound on what it is willing to measure.

Why: a site's self-reported relevance and confidence are claims, not evidence — a site that says
1.0 about "Buy cheap watches at example.com today." would otherwise lead every answer. The gateway
embeds the sentences it fuses with the federation's model (one batch per question) and uses the
cosine it measured; a site's own figure may only lower that (`trusted`), never raise it.

The candidates are bounded (MAX_MEASURED): sentences are taken round-robin across sites, each
site's in its own order, so one site sending many sentences cannot crowd the others out.

Verify what is used, not everything (gateway.query.fusion): measuring is embedding, and embedding ~96
sentences per question was most of the gateway's own time. A claim is an upper bound on what fusion
will use (`trusted` never exceeds it), so fusion ranks with the claims, measures what that ranking
would use (the answer's sentences, the sides of a conflict), and re-ranks until everything it uses
was measured. Each site's highest claims are spot-checked (`spot_checks`) whatever the ranking says;
a site whose measured sentences fall short of its claims by more than DISTRUST has every sentence
measured. The guarantee stays: no claim ever raises a weight above what the gateway measured, and
every sentence in an answer was measured. What it saves: sentences the ranking never reaches.
"""
from __future__ import annotations

from typing import Sequence, TypeVar

import numpy as np

from hansa.adapters.embedder.base import Embedder
from hansa.adapters.embedder.memo import MemoEmbedder
from hansa.gateway.client import OnAnswer, SiteCall
from hansa.sync.wire import PartialAnswer

MAX_MEASURED = 96  # sentences embedded per question: ~16 sites x their 3-6 answer sentences
MAX_SENTENCES_PER_SITE = 32  # a site's own ranking decides which; bounds the embedding cost
# The sentences a fused answer holds (gateway.query.fusion): each site's that many best are measured first.
MAX_SENTENCES = 4
# A claim may exceed the measurement by float rounding and because a site scores a sentence that
# leans on the one before it ("Its lens ...") together with it; beyond this, the site's claims are
# not used to skip measuring any of its sentences.
DISTRUST = 0.1
SPOT_CHECK = 1  # each site's highest claims measured whatever the ranking (the one it most wants in)
EAGER_BELOW = 8  # with this few candidates, one batch of all costs less than rounds of verification

T = TypeVar("T")


def round_robin(per_site: Sequence[Sequence[T]], limit: int = MAX_MEASURED) -> list[T]:
    """Up to `limit` items, one from each site in turn (each site's best first)."""
    out: list[T] = []
    depth = 0
    while len(out) < limit and any(depth < len(items) for items in per_site):
        for items in per_site:
            if depth < len(items) and len(out) < limit:
                out.append(items[depth])
        depth += 1
    return out


def offered(answer: PartialAnswer) -> list[tuple[str, str, float | None]]:
    """The (sentence, doc_id, relevance or None) a site offers; a bare answer counts as one, under
    its top source."""
    out = [(s[0].strip(), s[1], s[2] if len(s) > 2 else None) for s in answer.sentences if s[0].strip()]
    if not out and answer.answer.strip():
        out = [(answer.answer.strip(), answer.citations[0].doc_id if answer.citations else "", None)]
    return out[:MAX_SENTENCES_PER_SITE]


def first_measured(answer: PartialAnswer, n: int = MAX_SENTENCES) -> list[str]:
    """The sentences of one site's answer that fusion is likeliest to measure: those without a claim
    (always measured) and the highest claims, `n` in all. Why: the engine measures them while the
    question still waits on other sites (measure_early), and the assessment
    measures them to bound the site's other sentences (gateway.query.assess); the embedding memo
    then hands fusion the same vectors, so what fusion decides is unchanged."""
    sentences = offered(answer)
    order = sorted(range(len(sentences)), key=lambda i: (sentences[i][2] is not None, -(sentences[i][2] or 0.0), i))
    return [sentences[i][0] for i in order[:n]]


def measure_early(embedder: Embedder) -> OnAnswer | None:
    """The call stage's hook (gateway.client.run_calls) that embeds an answer's likeliest-measured
    sentences as it arrives, while the round still waits on slower sites. Fusion's measuring is most
    of the gateway's own time after the calls; done during the wait it no longer delays the answer
    (a site cut at its deadline is followed by a fusion that finds its vectors memoized). Only with a
    memoizing embedder ([gateway] embedding_memo_entries > 0): without one the early vectors would be
    thrown away."""
    if not isinstance(embedder, MemoEmbedder):
        return None

    def hook(call: SiteCall) -> None:
        if call.answer is not None:
            texts = first_measured(call.answer)
            if texts:
                embedder.embed(texts)

    return hook


def measure(question_vector: np.ndarray, texts: Sequence[str], embedder: Embedder) -> np.ndarray:
    """Cosine of each text with the question, measured here (one embedding batch)."""
    if not texts:
        return np.zeros(0, dtype=np.float32)
    q = np.asarray(question_vector, dtype=np.float32).reshape(-1)
    q = q / (np.linalg.norm(q) or 1.0)
    vecs = np.asarray(embedder.embed(list(texts)), dtype=np.float32)
    norms = np.linalg.norm(vecs, axis=1)
    norms[norms == 0] = 1.0
    return (vecs / norms[:, None]) @ q


def spot_checks(claims: Sequence[tuple[str, float | None]], per_site: int = SPOT_CHECK) -> set[int]:
    """Indices of (site, claim) pairs measured in any case: each site's `per_site` highest claims
    (first offered wins ties) and every sentence that came without a claim (nothing bounds it)."""
    out = {i for i, (_, claim) in enumerate(claims) if claim is None}
    by_site: dict[str, list[tuple[float, int]]] = {}
    for i, (site, claim) in enumerate(claims):
        if claim is not None:
            by_site.setdefault(site, []).append((-claim, i))
    for ranked in by_site.values():
        out.update(i for _, i in sorted(ranked)[:per_site])
    return out


def upper_bound(reported: float | None) -> float:
    """What an unmeasured sentence can at most weigh in: its claim (`trusted` never exceeds it), or
    1, the largest cosine, without one."""
    return 1.0 if reported is None else max(0.0, min(1.0, float(reported)))


def distrusted(measured: float, reported: float | None) -> bool:
    return reported is not None and reported - measured > DISTRUST


def trusted(measured: float, reported: float | None) -> float:
    """The relevance fusion uses: what the gateway measured, lowered (never raised) by what the
    site reported, and never below 0."""
    value = measured if reported is None else min(measured, reported)
    return max(0.0, float(value))


def overclaimed(measured: float, reported: float | None, bound: float) -> bool:
    """A site reporting more than `bound` (the embedder's `overclaim`, adapters/embedder/scales.toml)
    above what the gateway measured is overclaiming."""
    return reported is not None and reported - measured > bound
