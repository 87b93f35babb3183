"""DGRAG's gate with an LLM (optional): k sampled answers from the origin's evidence, then
"insufficient information" detection and answer agreement (cosine + Jaccard) against a threshold.

Why: the calibrated gate (query.gate.CalibratedGate) judges the evidence; an LLM can judge whether
the evidence actually *answers*: if sampled answers admit they lack information, or disagree with
each other, the origin is guessing and the question escalates (DGRAG §3.3). Known weakness (DGRAG's
own): a model can be consistently wrong, so agreement is necessary, not sufficient.

Contract: the engine calls `decide_with_evidence(question, passages, assessment)` on an
`EvidenceGate` such as this one (the origin's passages, most relevant first); `decide(assessment)` alone cannot run an LLM
and escalates. Never raises: an LLM failure escalates with the reason (the safe side).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Sequence

import numpy as np

from hansa.adapters.embedder.base import Embedder
from hansa.adapters.llm.base import LLM
from hansa.core.errors import HansaError
from hansa.gateway.query.assess import Assessment, Passage
from hansa.gateway.query.gate import GateDecision
from hansa.gateway.query.synthesize import EVIDENCE_IS_DATA, quoted
from hansa.core.text import content_words  # the sites' own notion of a content word

# Phrases by which an answer admits the evidence does not hold the answer (lower-cased, substring).
INSUFFICIENT = ("insufficient information", "not enough information", "no information", "cannot answer",
                "can't answer", "unable to answer", "does not mention", "doesn't mention", "not mentioned",
                "does not say", "doesn't say", "i don't know", "i do not know", "no answer")
CONTEXT_PASSAGES = 5
PROMPT = ("Answer the question using only the evidence. If the evidence does not contain the answer, reply "
          f"exactly: Insufficient information. {EVIDENCE_IS_DATA}")


def insufficient(answer: str) -> bool:
    text = answer.lower()
    return not text.strip() or any(p in text for p in INSUFFICIENT)


def _jaccard(a: str, b: str) -> float:
    wa, wb = content_words(a), content_words(b)
    return len(wa & wb) / len(wa | wb) if wa | wb else 1.0


def agreement(answers: Sequence[str], embedder: Embedder, weight: float = 0.5) -> float:
    """Mean over answer pairs of `weight` * cosine(embeddings) + (1 - weight) * Jaccard(content words)."""
    if len(answers) < 2:
        return 1.0
    vecs = np.asarray(embedder.embed(list(answers)), dtype=np.float64)
    vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    pairs = list(combinations(range(len(answers)), 2))
    return float(np.mean([weight * float(vecs[i] @ vecs[j]) + (1 - weight) * _jaccard(answers[i], answers[j])
                          for i, j in pairs]))


@dataclass
class LLMGate:
    llm: LLM
    embedder: Embedder
    samples: int = 3  # DGRAG's k
    threshold: float = 0.7  # composite agreement at or above which the origin answers alone
    temperature: float = 0.7
    max_tokens: int = 80
    name: str = "llm"

    def decide(self, assessment: Assessment) -> GateDecision:
        return GateDecision(False, "the LLM gate needs the origin's evidence: escalate")

    def decide_with_evidence(self, question: str, passages: Sequence[Passage], assessment: Assessment) -> GateDecision:
        if not passages:
            return GateDecision(False, "the origin offered no evidence", 0.0, self.threshold)
        # quoted as delimited data, as synthesis quotes it: an origin's passage may hold an instruction (issue 32)
        evidence = quoted({n: [p.text] for n, p in enumerate(passages[:CONTEXT_PASSAGES], 1)})
        messages = [{"role": "system", "content": PROMPT},
                    {"role": "user", "content": f"Evidence:\n{evidence}\n\nQuestion: {question}"}]
        try:
            answers = [self.llm.complete(messages, max_tokens=self.max_tokens, temperature=self.temperature)
                       for _ in range(self.samples)]
        except HansaError as exc:
            return GateDecision(False, f"the LLM failed ({exc}): escalate", None, self.threshold)
        admitted = sum(insufficient(a) for a in answers)
        if admitted:
            return GateDecision(False, f"{admitted} of {len(answers)} sampled answers report insufficient information",
                                0.0, self.threshold, {"insufficient": float(admitted), "samples": float(len(answers))})
        score = agreement(answers, self.embedder)
        features = {"agreement": score, "samples": float(len(answers)), "insufficient": 0.0}
        if score >= self.threshold:
            return GateDecision(True, "the origin's sampled answers agree", score, self.threshold, features)
        return GateDecision(False, "the origin's sampled answers disagree", score, self.threshold, features)
