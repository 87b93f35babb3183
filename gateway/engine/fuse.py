"""Stage: fuse — the partial answers of every round into one cited answer.

Contract: `fuse_answer(question_vector, calls, embedder, reliability=None, site_prior=None, coverage=None)
-> FusedAnswer` (gateway.fusion; `reliability` is the gateway's learned per-site weight, updated by
fusion unless `learn` is False: then the caller records the answer's `observations`;
`site_prior` weighs the citations by the sites' routing match, Routing.site_prior;
`coverage` by how much of the question each site's answer uses, gateway.lexical.AnswerCoverage;
`reading` the reader that judges the best candidates against `question`, gateway.reading;
`conduct` the sites' record that screens a site's fixed text around questions, gateway.conduct;
`screen` the question's screen that the assessment used, gateway.screening.Screen): every
sentence of the answer comes from an "ok" call and carries a citation marker; with no usable
evidence the answer says why (`note`). The fusion module is looked up at call time, so a rewrite of
`gateway.fusion.fuse` with the same signature is picked up without touching the engine.

`measure_early(embedder)`: the call stage's hook (gateway.client.run_calls) that embeds an answer's
likeliest-measured sentences as it arrives, while the round still waits on slower sites. Fusion's
measuring is most of the gateway's own time after the calls; done during the wait it no longer
delays the answer (a site cut at its deadline is followed by a fusion that finds its vectors
memoized). Only with a memoizing embedder ([gateway] embedding_memo_entries > 0): without one the
early vectors would be thrown away.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from hansa.adapters.embedder.base import Embedder
from hansa.adapters.embedder.memo import MemoEmbedder
from hansa.gateway import fusion
from hansa.gateway.client import OnAnswer, SiteCall
from hansa.gateway.conduct import SiteConduct
from hansa.gateway.fusion import FusedAnswer
from hansa.gateway.lexical import AnswerCoverage
from hansa.gateway.reading import ReadingStage
from hansa.gateway.relevance import first_measured
from hansa.gateway.reliability import SiteReliability
from hansa.gateway.screening import Screen


def fuse_answer(question_vector: np.ndarray, calls: Sequence[SiteCall], embedder: Embedder, *,
                reliability: SiteReliability | None = None, site_prior: Mapping[str, float] | None = None,
                coverage: AnswerCoverage | None = None, reading: ReadingStage | None = None,
                question: str = "", conduct: SiteConduct | None = None, learn: bool = True,
                screen: Screen | None = None) -> FusedAnswer:
    return fusion.fuse(question_vector, calls, embedder, reliability=reliability, learn=learn, site_prior=site_prior,
                       coverage=coverage, reading=reading, question=question, conduct=conduct, screen=screen)


def measure_early(embedder: Embedder) -> OnAnswer | None:
    if not isinstance(embedder, MemoEmbedder):
        return None

    def hook(call: SiteCall) -> None:
        if call.answer is not None:
            texts = first_measured(call.answer)
            if texts:
                embedder.embed(texts)

    return hook
