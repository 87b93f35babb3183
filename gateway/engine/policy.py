"""A query policy: which router, gate and refiner one query runs with — chosen in-process only.

Why not from HTTP: a client must not pick a strategy that costs the federation more (every site,
say) or skips the gate; the operator's configured policy answers HTTP queries. `hansa eval` (and
tests, benchmarks) run several strategies through the *same* Gateway service and sites by passing a
policy per call:

    from hansa.gateway.engine import QueryPolicy, QueryRequest
    result = gateway.query(QueryRequest(question=q, origin="govt"), client="eval",
                           policy=QueryPolicy(name="gated", gate=MyCalibratedGate()))

Strategies yet to come (gated, tiers, refine, learned) are policies: a Gate, a Refiner, a Router.
`None` fields take the gateway's defaults (SummaryRouter with [gateway] site_margin, AlwaysEscalate,
OneRound).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hansa.gateway.engine.gate import Gate
from hansa.gateway.engine.refine import Refiner
from hansa.gateway.engine.route import Router


@dataclass(frozen=True)
class QueryPolicy:
    name: str = "hansa"
    router: Router | None = None
    gate: Gate | None = None
    refiner: Refiner | None = None
    mode: str = "local"  # the retrieval mode sites are asked for (tiers will choose per site)

    def to_json(self, router: Router, gate: Gate, refiner: Refiner) -> dict[str, Any]:
        return {"name": self.name, "router": type(router).__name__, "gate": getattr(gate, "name", type(gate).__name__),
                "refiner": getattr(refiner, "name", type(refiner).__name__), "mode": self.mode}
