"""Stage: fuse — the partial answers of every round into one cited answer.

Contract: `fuse_answer(question_vector, calls, embedder, reliability=None) -> FusedAnswer`
(gateway.fusion; `reliability` is the gateway's learned per-site weight, updated by fusion): every
sentence of the answer comes from an "ok" call and carries a citation marker; with no usable
evidence the answer says why (`note`). The fusion module is looked up at call time, so a rewrite of
`gateway.fusion.fuse` with the same signature is picked up without touching the engine.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from hansa.adapters.embedder.base import Embedder
from hansa.gateway import fusion
from hansa.gateway.client import SiteCall
from hansa.gateway.fusion import FusedAnswer
from hansa.gateway.reliability import SiteReliability


def fuse_answer(question_vector: np.ndarray, calls: Sequence[SiteCall], embedder: Embedder, *,
                reliability: SiteReliability | None = None) -> FusedAnswer:
    return fusion.fuse(question_vector, calls, embedder, reliability=reliability)
