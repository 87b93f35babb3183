"""The gateway's query pipeline as named stages: route -> gate -> call -> assess -> refine -> fuse
-> synthesize, composed by `QueryEngine` in that fixed order; each stage's contract is in its
module's docstring (fusion's in gateway.fusion, whose `fuse` the engine calls directly)."""
from hansa.gateway.engine.abstain import AbstainDecision, Abstainer, CalibratedAbstainer, EvidenceRule
from hansa.gateway.engine.assess import Assessment, assess
from hansa.gateway.engine.calibration import Calibration, LogisticModel, load_calibration
from hansa.gateway.engine.budgeted import BudgetedRefiner
from hansa.gateway.engine.engine import QueryEngine, QueryResult
from hansa.gateway.engine.gate import AlwaysEscalate, CalibratedGate, Gate, GateDecision
from hansa.gateway.engine.policy import QueryPolicy, gated, refine_policy, tiers_policy
from hansa.gateway.engine.refine import OneRound, RefineState, RefineStep, Refiner
from hansa.gateway.engine.request import Budget, QueryRequest
from hansa.gateway.engine.route import Router, Routing, SummaryRouter
from hansa.gateway.engine.tiers import TierCutoffs, TieredRouter

__all__ = ["AbstainDecision", "Abstainer", "CalibratedAbstainer", "CalibratedGate", "Calibration", "EvidenceRule",
           "LogisticModel", "gated", "load_calibration",
           "AlwaysEscalate", "Assessment", "Budget", "BudgetedRefiner", "Gate", "GateDecision", "OneRound",
           "QueryEngine", "QueryPolicy", "QueryRequest", "QueryResult", "RefineState", "RefineStep", "Refiner",
           "Router", "Routing", "SummaryRouter", "TierCutoffs", "TieredRouter", "assess", "refine_policy",
           "tiers_policy"]
