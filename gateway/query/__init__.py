"""The gateway's query pipeline as named stages: route -> gate -> call -> assess -> refine -> fuse
-> synthesize, composed by `QueryEngine` (engine.py) in that fixed order; each stage's contract is in
its module's docstring (fusion's in gateway.query.fusion, whose `fuse` the engine calls directly).

Beside the stages lives what only a query uses: how sites are scored for a question (router.py: DGRAG
summary matching, which route.py's `SummaryRouter` applies; lexical.py: CORI over term statistics;
learned/: the learned router), what fusion checks in site answers (relevance, reading, screening,
claims, conflicts) and makes of them (synthesis.py: the LLM's checked rewrite, which synthesize.py's
stage runs; answers.py: citations and the per-site summary), what the gateway learns of each site
from its answers (reliability, conduct, history), and the fitting of the gate and abstention
through the engine (calibrate.py; the fitted models are calibration.py's).

May import the routing index, the registry (trust.registry: who is enrolled and routable) and the
site transport port (gateway.client, transport, query_id); never the HTTP surface, the composition
root, or trust's key-holding and publication operations.
"""
from hansa.gateway.query.abstain import AbstainDecision, Abstainer, CalibratedAbstainer, EvidenceRule
from hansa.gateway.query.assess import Assessment, assess
from hansa.gateway.query.calibration import Calibration, LogisticModel, load_calibration
from hansa.gateway.query.budgeted import BudgetedRefiner
from hansa.gateway.query.engine import QueryEngine, QueryResult
from hansa.gateway.query.gate import AlwaysEscalate, CalibratedGate, Gate, GateDecision
from hansa.gateway.query.policy import QueryPolicy, gated, refine_policy, tiers_policy
from hansa.gateway.query.refine import OneRound, RefineState, RefineStep, Refiner
from hansa.gateway.query.request import Budget, QueryRequest
from hansa.gateway.query.route import Router, Routing, SummaryRouter
from hansa.gateway.query.tiers import TierCutoffs, TieredRouter

__all__ = ["AbstainDecision", "Abstainer", "CalibratedAbstainer", "CalibratedGate", "Calibration", "EvidenceRule",
           "LogisticModel", "gated", "load_calibration",
           "AlwaysEscalate", "Assessment", "Budget", "BudgetedRefiner", "Gate", "GateDecision", "OneRound",
           "QueryEngine", "QueryPolicy", "QueryRequest", "QueryResult", "RefineState", "RefineStep", "Refiner",
           "Router", "Routing", "SummaryRouter", "TierCutoffs", "TieredRouter", "assess", "refine_policy",
           "tiers_policy"]
