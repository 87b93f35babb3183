"""Stage: gate — with an origin, is the origin's own answer good enough (DGRAG)?

Contract: when the request names an `origin`, the engine calls the origin first, assesses its
answer (query.assess) and asks the policy's gate `decide(assessment) -> GateDecision` (or, for
a gate that reads the evidence itself, an `EvidenceGate`, `decide_with_evidence(question, passages,
assessment)`: query.llm_gate):
`answer=True` returns the origin's answer without calling anyone else; `answer=False` escalates
to the routed sites (the origin's evidence is kept for fusion, and it is not called twice).
Without an origin no gate runs. A gate must be cheap and must not raise on any assessment.

`AlwaysEscalate` never trusts the origin alone, so a request with an origin costs one extra call
and answers as without one: the safe default when no calibration is loaded. `CalibratedGate` is
DGRAG's gate without an LLM: the origin's evidence features (query.assess) -> a calibrated
probability that the origin's answer suffices (query.calibration, fit on the evaluation's fit
split) -> answer locally at or above the model's threshold, else escalate. The decision carries
the features and threshold so the trace shows why.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from hansa.gateway.query.assess import Assessment, Passage
from hansa.gateway.query.calibration import LogisticModel


@dataclass(frozen=True)
class GateDecision:
    answer: bool  # True: answer from the origin alone; False: escalate to routed sites
    reason: str
    confidence: float | None = None  # the gate's confidence that the origin's answer suffices
    threshold: float | None = None  # the confidence at or above which the origin answers alone
    features: Mapping[str, float] = field(default_factory=dict)  # what the confidence was computed from

    @property
    def decision(self) -> str:
        """What the trace and the metrics call it: answer or escalate."""
        return "answer" if self.answer else "escalate"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"decision": self.decision, "reason": self.reason}
        if self.confidence is not None:
            out["confidence"] = round(self.confidence, 4)
        if self.threshold is not None:
            out["threshold"] = round(self.threshold, 4)
        if self.features:
            out["features"] = {k: round(float(v), 4) for k, v in self.features.items()}
        return out


class Gate(Protocol):
    name: str

    def decide(self, assessment: Assessment) -> GateDecision: ...


@runtime_checkable
class EvidenceGate(Gate, Protocol):
    """A gate that reads the origin's evidence itself (query.llm_gate): the engine hands it the
    passages, most relevant first, instead of the assessment alone."""

    def decide_with_evidence(self, question: str, passages: Sequence[Passage], assessment: Assessment) -> GateDecision: ...


@dataclass(frozen=True)
class AlwaysEscalate:
    name: str = "always-escalate"

    def decide(self, assessment: Assessment) -> GateDecision:
        return GateDecision(False, "no calibrated gate yet: always escalate")


@dataclass(frozen=True)
class CalibratedGate:
    """Answer from the origin when the calibrated probability that its evidence suffices reaches
    the model's threshold. With no evidence at all from the origin it escalates without scoring."""

    model: LogisticModel
    name: str = "calibrated"

    def decide(self, assessment: Assessment) -> GateDecision:
        features = {n: float(getattr(assessment, n)) for n in self.model.features}
        if assessment.passages == 0:
            return GateDecision(False, "the origin offered no evidence", 0.0, self.model.threshold, features)
        p = self.model.probability(assessment)
        if p >= self.model.threshold:
            return GateDecision(True, "the origin's evidence is confident enough", p, self.model.threshold, features)
        return GateDecision(False, "the origin's evidence is below the calibrated threshold", p,
                            self.model.threshold, features)
