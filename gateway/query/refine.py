"""Stage: refine — further rounds under the request's budget (SCOUT-RAG).

Contract: after the first routed round the engine asks the policy's refiner, round after round,
`next_round(state) -> RefineStep`: either sites to ask next (never ones already called unless
the step gives that site a follow-up question; the engine drops the others, and any unknown to
the registry) or a stop with its reason. The engine enforces the budget, not the refiner: before
each round it checks time, sites (distinct sites called) and bytes left, stops with reason
"budget" if none is, and caps the round's sites to what is left. It also stops after MAX_ROUNDS.
By default the engine fuses every answer seen; a `JudgingRefiner` (a `quality(question, fused)`
method returning an object with a float `.value`) makes the engine fuse after each round, hand
the qualities to the next `next_round`, and return the best-quality answer seen — never one lost
to a later, worse round.

`OneRound` is today's refiner: one routed round, then stop.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence, runtime_checkable

from hansa.gateway.client import SiteCall
from hansa.gateway.query.assess import Assessment
from hansa.gateway.query.request import QueryRequest
from hansa.gateway.query.route import SiteScore

if TYPE_CHECKING:
    from hansa.gateway.query.quality import Quality
    from hansa.gateway.query.fusion import FusedAnswer

MAX_ROUNDS = 8


@dataclass(frozen=True)
class RefineState:
    request: QueryRequest
    considered: Sequence[SiteScore]  # every routable site, ranked by the router
    called: frozenset[str]
    calls: Sequence[SiteCall]  # every call so far, all rounds
    assessment: Assessment  # of all calls so far
    rounds: int  # rounds done (the origin's included)
    sites_left: int | None  # under the budget (None: distinct sites; no limit)
    # For refiners that judge answers (a `quality(question, fused)` method): the quality of the
    # answer fused after each round so far (the latest last), and the latest one's full measure.
    qualities: tuple[float, ...] = ()
    quality: Any = None
    time_left_ms: float | None = None  # under the budget (None: no time limit)
    rounds_ms: tuple[float, ...] = ()  # each round's wait so far


@dataclass(frozen=True)
class RefineStep:
    sites: tuple[str, ...] = ()
    stop: str | None = None  # why refinement stops (None with sites: go on)
    kind: str = "refine"  # what the round is called in the trace (SCOUT-RAG: depth, breadth, hybrid)
    # site -> a follow-up question, asked in local mode; a site with a follow-up may be one
    # already called (SCOUT-RAG's Depth re-asks HIGH sites what the answer still lacks).
    followups: Mapping[str, str] = field(default_factory=dict)


class Refiner(Protocol):
    name: str

    def next_round(self, state: RefineState) -> RefineStep: ...


@runtime_checkable
class JudgingRefiner(Refiner, Protocol):
    """A refiner that judges each round's fused answer (SCOUT-RAG's Stage III, query.budgeted):
    the engine fuses after every round, hands it the qualities, and returns the best answer seen."""

    def quality(self, question: str, fused: "FusedAnswer") -> "Quality": ...


@dataclass(frozen=True)
class OneRound:
    name: str = "one-round"

    def next_round(self, state: RefineState) -> RefineStep:
        return RefineStep(stop="one round (no refinement)")
