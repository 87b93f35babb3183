"""Stage: refine — further rounds under the request's budget (SCOUT-RAG).

Contract: after the first routed round the engine asks the policy's refiner, round after round,
`next_round(state) -> RefineStep`: either sites to ask next (never ones already called; the
engine drops any that were, and any unknown to the registry) or a stop with its reason. The
engine enforces the budget, not the refiner: before each round it checks time, sites and bytes
left, stops with reason "budget" if none is, and caps the round's sites to what is left. It also
stops after MAX_ROUNDS. Whatever happens the engine fuses every answer seen, so the best answer
found is never lost to a later, worse round.

`OneRound` is today's refiner: one routed round, then stop.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from hansa.gateway.client import SiteCall
from hansa.gateway.engine.assess import Assessment
from hansa.gateway.engine.request import QueryRequest
from hansa.gateway.router import SiteScore

MAX_ROUNDS = 8


@dataclass(frozen=True)
class RefineState:
    request: QueryRequest
    considered: Sequence[SiteScore]  # every routable site, ranked by the router
    called: frozenset[str]
    calls: Sequence[SiteCall]  # every call so far, all rounds
    assessment: Assessment  # of all calls so far
    rounds: int  # rounds done (the origin's included)
    sites_left: int | None  # under the budget (None: no limit)


@dataclass(frozen=True)
class RefineStep:
    sites: tuple[str, ...] = ()
    stop: str | None = None  # why refinement stops (None with sites: go on)


class Refiner(Protocol):
    name: str

    def next_round(self, state: RefineState) -> RefineStep: ...


@dataclass(frozen=True)
class OneRound:
    name: str = "one-round"

    def next_round(self, state: RefineState) -> RefineStep:
        return RefineStep(stop="one round (no refinement)")
