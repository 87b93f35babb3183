"""Summary vectors as the gateway holds them: one signed byte per dimension (int8 codes).

Why: float32 summary vectors were most of what the gateway stores (4.1% of the raw corpus of the 16
SQuAD sites, of 7.0% in all). A site signs and sends exact float32 vectors, and the gateway verifies
the publication on them; only then are they quantised, once, and the codes are what both the
in-memory index scores against and the durable copy keeps: a restart rebuilds exactly the index
that served before it (scripts/bench_storage.py measures routing on both; benchmarks/storage.json).

The scheme is symmetric scalar quantisation with a per-vector scale: codes = round(v / max|v| * 127).
The scale itself is not kept. A summary vector is compared by cosine only, so its length carries
nothing, and the direction codes / |codes| is the dequantised vector up to that length; the index
unit-normalises every row it takes (gateway.index.ann) and so computes the cosine with it exactly. A
per-vector scale, not one shared range, because a unit vector's largest component varies from
vector to vector: each vector uses the full -127..127 range whatever its peak.

Why no float16 and no float32 switch: int8 routes as float32 does on the published summaries
(benchmarks/storage.json), float16 would hold twice the bytes for no measured gain, and a switch
back to float32 would keep a second durable layout (and its migration) alive for nothing.
"""
from __future__ import annotations

import numpy as np

from hansa.core.errors import InputError

CODE_MAX = 127
CODE_BYTES_PER_DIM = 1  # what a summary vector takes at the gateway: `dim` bytes


def quantise(vectors: np.ndarray) -> np.ndarray:
    """int8 codes (n, dim) of float vectors (n, dim); a zero or non-finite vector is refused."""
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim != 2:
        raise InputError(f"vectors must have shape (n, dim), got {arr.shape}")
    peak = np.abs(arr).max(axis=1, keepdims=True) if arr.size else np.ones((len(arr), 1), np.float32)
    if not np.isfinite(arr).all() or (peak == 0).any():
        raise InputError("a vector is zero or not finite: it has no direction to quantise")
    return np.rint(arr / peak * CODE_MAX).astype(np.int8)


def directions(codes: np.ndarray) -> np.ndarray:
    """The unit float32 vectors (n, dim) the codes stand for: what cosines are computed against."""
    arr = np.asarray(codes, dtype=np.int8).astype(np.float32)
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    if (norms == 0).any():
        raise InputError("an all-zero code vector has no direction (it was not written by `quantise`)")
    return arr / norms
