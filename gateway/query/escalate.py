"""Stage: refine, as DGRAG's gate applied round by round — ask the best-ranked sites first, and more
only while the evidence in hand is not good enough.

Why: at realistic site sizes the summaries a site publishes rank its gold site first for most
questions but not for all (SQuAD, 16 sites: gold-site recall 0.63 at k = 1 and 0.82 at k = 4 on
the report split), and a fixed k pays for the hard questions on every easy one. A site's own
answer, though, sees every chunk it holds: after asking the leader, the evidence it returned says
whether the answer was there. So the engine asks a small first batch, assesses the evidence
(query.assess: best relevance, margin, coverage, agreement, best summary, the trailing gap of the
sites not yet asked) and escalates to the next sites of the ranking only while a calibrated
model's P(the sites asked so far hold the answer) stays below its threshold. Cheap questions stop
after one call; hard ones go deeper than a fixed k ever would. Measured (benchmarks/README.md,
"Escalation round by round"; report split, 16 sites): SQuAD gold-site recall 0.941 at 4.3 sites
per question against 0.840 at 4.0 for one round of the margin rule; on MTRAG's ~90-passage sites
no gain (0.907 of questions with every gold site asked, against 0.904).

Contract (query.refine): `EscalationRouter` ranks as its base router and selects the first batch;
`Escalation.next_round` stops with a reason when the evidence is confident, the schedule is done,
no ranked site is left, the request named its sites, or the request's own `top_k_sites` (a
client's "at most k sites"; the configured default only sizes one-round routing) is reached; else
it names the next ranked sites up to the schedule's next size. The engine enforces the budget
(sites, time, bytes) and MAX_ROUNDS, and fuses every answer seen.

The model and the schedule come from the calibration (`escalate`, fit on the evaluation's fit
split by gateway.query.calibrate: rows of every prefix of the ranking, labelled "every gold site is
among them"; the threshold and the schedule chosen by replaying the stopping rule on those rows).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Mapping, Sequence

import numpy as np

from hansa.core.errors import InputError
from hansa.gateway.query.calibration import LogisticModel
from hansa.gateway.query.refine import RefineState, RefineStep
from hansa.gateway.query.route import Router
from hansa.gateway.index.summaries import SummaryHit
from hansa.gateway.query.route import SiteScore

DEFAULT_SCHEDULE = (1, 2, 3, 4, 6, 8, 12, 16)  # distinct sites asked after each round, cumulative


def check_schedule(schedule: Sequence[int]) -> tuple[int, ...]:
    """A schedule is strictly increasing positive site counts, at most MAX_ROUNDS of them."""
    from hansa.gateway.query.refine import MAX_ROUNDS

    out = tuple(schedule)
    if (not out or len(out) > MAX_ROUNDS or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in out)
            or any(b <= a for a, b in zip(out, out[1:]))):
        raise InputError(f"an escalation schedule is 1 to {MAX_ROUNDS} increasing positive site counts, got {out!r}")
    return out


@dataclass(frozen=True)
class EscalationRouter:
    """Ranks as `base`; the first round asks only the schedule's first batch (at most k)."""

    base: Router
    first: int = 1
    name: str = "escalation"

    @property
    def reads_lexical(self) -> bool:
        return self.base.reads_lexical

    def rank(self, question_vector: np.ndarray, hits: Sequence[SummaryHit], routable: Collection[str],
             lexical: Mapping[str, float] | None = None) -> list[SiteScore]:
        return self.base.rank(question_vector, hits, routable, lexical=lexical)

    def select(self, ranked: Sequence[SiteScore], k: int) -> list[SiteScore]:
        return list(ranked[:max(1, min(self.first, k))])

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "model_version": None}


@dataclass(frozen=True)
class Escalation:
    model: LogisticModel
    schedule: tuple[int, ...] = DEFAULT_SCHEDULE
    name: str = "escalation"

    def confidence(self, state: RefineState) -> float:
        return self.model.probability(state.assessment) if state.assessment.passages else 0.0

    def next_round(self, state: RefineState) -> RefineStep:
        if state.request.sites is not None:
            return RefineStep(stop="the request named its sites")
        cap = state.request.top_k_sites  # a client's own "at most k sites" bounds every round
        if cap is not None and len(state.called) >= cap:
            return RefineStep(stop=f"the request's top_k_sites ({cap})")
        p = self.confidence(state)
        # with only the origin asked, DGRAG's gate has already judged its evidence and escalated
        judged_by_gate = state.request.origin is not None and state.called == {state.request.origin}
        if p >= self.model.threshold and not judged_by_gate:
            return RefineStep(stop=f"evidence confident ({p:.2f} >= {self.model.threshold:.2f})")
        asked = len(state.called)
        target = next((n for n in self.schedule if n > asked), None)
        if target is None:
            return RefineStep(stop=f"escalation schedule done ({asked} sites asked, confidence {p:.2f})")
        if cap is not None:
            target = min(target, cap)
        fresh = tuple(s.site_id for s in state.considered if s.site_id not in state.called)[:target - asked]
        if not fresh:
            return RefineStep(stop=f"no ranked site left to ask (confidence {p:.2f})")
        return RefineStep(fresh, kind="escalate")
