"""A query policy: which router, gate and refiner one query runs with — the operator's choice.

Served: `[gateway] strategy` names the policy every HTTP query runs with (`named_policy`: one of
STRATEGIES; "hansa" is the engine's defaults). Why not from HTTP: a client must not pick a strategy
that costs the federation more (every site, say) or skips the gate. `hansa eval` (and tests,
benchmarks) run several strategies through the *same* Gateway service and sites by passing a
policy per call, built by the same `named_policy`:

    from hansa.gateway.query.policy import QueryPolicy
    from hansa.gateway.query.request import QueryRequest
    result = gateway.query(QueryRequest(question=q, origin="govt"), client="eval",
                           policy=QueryPolicy(name="gated", gate=MyCalibratedGate()))

Strategies (gated, tiers, refine, learned) are policies: a Gate, a Refiner, a Router, an
Abstainer. `None` fields take the gateway's defaults (SummaryRouter with [gateway] site_margin; the
loaded calibration's gate and abstainer, else AlwaysEscalate and the EvidenceRule; OneRound).
`gated(calibration)` is the evaluation's `gated` strategy: origin first, the calibrated gate, then
escalation, with calibrated abstention.
SCOUT-RAG's two: `tiers_policy(gateway)` (tiered first round only) and `refine_policy(gateway)`
(tiers + budgeted Depth/Breadth/Hybrid refinement, the best answer seen returned).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hansa.gateway.query.abstain import Abstainer, CalibratedAbstainer, EvidenceRule
from hansa.gateway.query.calibration import Calibration
from hansa.gateway.query.gate import AlwaysEscalate, CalibratedGate, Gate
from hansa.gateway.query.budgeted import BudgetedRefiner
from hansa.gateway.query.refine import OneRound, Refiner
from hansa.gateway.query.route import Router, SummaryRouter
from hansa.gateway.query.tiers import TierCutoffs, TieredRouter


@dataclass(frozen=True)
class QueryPolicy:
    name: str = "hansa"
    router: Router | None = None
    gate: Gate | None = None
    refiner: Refiner | None = None
    abstainer: Abstainer | None = None
    mode: str = "local"  # the retrieval mode sites are asked for (a tiered router's sites: their tier's)
    site_prior: float | None = None  # fusion's routing prior weight (None: [gateway] fusion_site_prior)
    answer_coverage: float | None = None  # fusion's answer-coverage weight (None: [gateway] fusion_answer_coverage)
    reading: bool | None = None  # False: no reader for this query (None: the gateway's [gateway] reader)

    def to_json(self, router: Router, gate: Gate, refiner: Refiner, abstainer: Abstainer | None = None) -> dict[str, Any]:
        out = {"name": self.name, "router": type(router).__name__, "gate": gate.name, "refiner": refiner.name,
               "mode": self.mode}
        if abstainer is not None:
            out["abstainer"] = abstainer.name
        if self.reading is False:
            out["reading"] = "off"
        return out


def default_gate(calibration: Calibration) -> Gate:
    return CalibratedGate(calibration.gate) if calibration.gate is not None else AlwaysEscalate()


def default_abstainer(calibration: Calibration) -> Abstainer:
    return CalibratedAbstainer(calibration.abstain) if calibration.abstain is not None else EvidenceRule()


def gated(calibration: Calibration) -> QueryPolicy:
    """The `gated` strategy: the origin answers first and the calibrated gate decides (always escalate
    without a gate model); abstention as calibrated."""
    return QueryPolicy(name="gated", gate=default_gate(calibration), abstainer=default_abstainer(calibration))


def one_round_policy(margin: float, lexical_weight: float) -> QueryPolicy:
    """Summary routing's margin rule in one round, whatever the calibration holds (the gateway's
    routing without an escalation model; `hansa eval`'s `one_round`)."""
    return QueryPolicy(name="one_round", router=SummaryRouter(margin, lexical_weight), refiner=OneRound())


def escalation_policy(calibration: Calibration, margin: float, lexical_weight: float) -> QueryPolicy:
    """The `escalate` strategy (query.escalate): the summary router's ranking asked batch by batch
    while the calibrated evidence is not confident. Needs a calibration with an `escalate` model."""
    from hansa.core.errors import InputError
    from hansa.gateway.query.escalate import Escalation, EscalationRouter

    if calibration.escalate is None:
        raise InputError("the escalate strategy needs a calibration with an 'escalate' model "
                         "(hansa eval --split fit --calibration-rows, then hansa gateway calibrate)")
    schedule = calibration.escalate_schedule
    router = EscalationRouter(SummaryRouter(margin, lexical_weight), schedule[0])
    return QueryPolicy(name="escalate", router=router, refiner=Escalation(calibration.escalate, schedule),
                       abstainer=default_abstainer(calibration))


def tiered_router(gateway: Any, cutoffs: TierCutoffs | None = None) -> TieredRouter:
    """SCOUT-RAG's tiers over the score the gateway routes by: summaries blended with term
    statistics (`[gateway] lexical_weight`). Tier gaps: `cutoffs` if given, else those the gateway's
    calibration holds (fit on the fit split's gold sites: query.tiers.cutoffs_from_gaps), else
    around `[gateway] site_margin`. `gateway` is a hansa.gateway.service.Gateway (its index gives
    richness, its history history)."""
    cfg = gateway.cfg
    chosen = cutoffs or gateway.calibration.tiers or TierCutoffs.around(cfg.site_margin)
    return TieredRouter(gateway.index, gateway.history, chosen, lexical_weight=cfg.lexical_weight)


def tiers_policy(gateway: Any, cutoffs: TierCutoffs | None = None) -> QueryPolicy:
    """SCOUT-RAG Stages I-II: tiered sites, HIGH asked globally and MODERATE locally, one round."""
    return QueryPolicy(name="tiers", router=tiered_router(gateway, cutoffs))


STRATEGIES = ("hansa", "one_round", "tiers", "refine", "escalate", "gated", "learned", "hansa_noreader")


def named_policy(name: str, gateway: Any, router_model: Any = None) -> QueryPolicy | None:
    """The policy `name` (STRATEGIES) built against `gateway` (a hansa.gateway.service.Gateway);
    None for "hansa", the engine's defaults. `router_model`: the learned router's model file."""
    from hansa.core.errors import ConfigError

    cfg = gateway.cfg
    if name == "hansa":
        return None
    if name == "hansa_noreader":  # the engine's defaults without the reader: [gateway] reader = "none"
        return QueryPolicy(name="hansa_noreader", reading=False)
    if name == "one_round":
        return one_round_policy(cfg.site_margin, cfg.lexical_weight)
    if name == "tiers":
        return tiers_policy(gateway)
    if name == "refine":
        return refine_policy(gateway)
    if name == "escalate":
        return escalation_policy(gateway.calibration, cfg.site_margin, cfg.lexical_weight)
    if name == "gated":
        return gated(gateway.calibration)
    if name == "learned":
        from hansa.gateway.query.learned.router import learned_policy

        return learned_policy(gateway, model_path=router_model)
    raise ConfigError(f"[gateway] strategy {name!r} is not one of {', '.join(STRATEGIES)}")


def refine_policy(gateway: Any, cutoffs: TierCutoffs | None = None, refiner: BudgetedRefiner | None = None) -> QueryPolicy:
    """SCOUT-RAG Stages I-III: the tiered first round, then budgeted refinement."""
    return QueryPolicy(name="refine", router=tiered_router(gateway, cutoffs), refiner=refiner or BudgetedRefiner())
