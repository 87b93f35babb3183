"""Relevance the gateway measures itself, and the bound on what it is willing to measure.

Why: a site's self-reported relevance and confidence are claims, not evidence — a site that says
1.0 about "Buy cheap watches at example.com today." would otherwise lead every answer. The gateway
embeds the sentences it fuses with the federation's model (one batch per question) and uses the
cosine it measured; a site's own figure may only lower that (`trusted`), never raise it.

The batch is bounded (MAX_MEASURED): sentences are taken round-robin across sites, each site's in
its own order, so one site sending many sentences cannot crowd the others out of the measurement.
"""
from __future__ import annotations

from typing import Sequence, TypeVar

import numpy as np

from hansa.adapters.embedder.base import Embedder

MAX_MEASURED = 96  # sentences embedded per question: ~16 sites x their 3-6 answer sentences
OVERCLAIM = 0.25  # a site reporting this much more than the gateway measured is overclaiming

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


def trusted(measured: float, reported: float | None) -> float:
    """The relevance fusion uses: what the gateway measured, lowered (never raised) by what the
    site reported, and never below 0."""
    value = measured if reported is None else min(measured, reported)
    return max(0.0, float(value))


def overclaimed(measured: float, reported: float | None) -> bool:
    return reported is not None and reported - measured > OVERCLAIM
