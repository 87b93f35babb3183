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

The package re-exports nothing: a name is imported from the module that defines it, so loading one
module (say claims, from the HTTP room) does not load the engine.
"""
