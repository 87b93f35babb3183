"""Stage: gate — with an origin, is the origin's own answer good enough (DGRAG)?

Contract: when the request names an `origin`, the engine calls the origin first, assesses its
answer (engine.assess) and asks the policy's gate `decide(assessment) -> GateDecision`:
`answer=True` returns the origin's answer without calling anyone else; `answer=False` escalates
to the routed sites (the origin's evidence is kept for fusion, and it is not called twice).
Without an origin no gate runs. A gate must be cheap and must not raise on any assessment.

`AlwaysEscalate` is today's gate: it never trusts the origin alone, so a request with an origin
costs one extra call and answers as without one. DGRAG's calibrated gate (features -> confidence
-> threshold, fit on the evaluation's fit split) replaces it by implementing `Gate`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from hansa.gateway.engine.assess import Assessment


@dataclass(frozen=True)
class GateDecision:
    answer: bool  # True: answer from the origin alone; False: escalate to routed sites
    reason: str
    confidence: float | None = None  # the gate's confidence that the origin's answer suffices

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"decision": "answer" if self.answer else "escalate", "reason": self.reason}
        if self.confidence is not None:
            out["confidence"] = round(self.confidence, 4)
        return out


class Gate(Protocol):
    name: str

    def decide(self, assessment: Assessment) -> GateDecision: ...


@dataclass(frozen=True)
class AlwaysEscalate:
    name: str = "always-escalate"

    def decide(self, assessment: Assessment) -> GateDecision:
        return GateDecision(False, "no calibrated gate yet: always escalate")
