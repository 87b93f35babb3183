"""The gateway's query pipeline as named stages: route -> gate -> call -> assess -> refine -> fuse
-> synthesize, composed by `QueryEngine` (engine.py) in that fixed order; each stage's contract is in
its module's docstring (fusion's in gateway.query.fusion, whose `fuse` the engine calls directly).

One module per stage: request.py (the request, a follow-up made standalone), route.py (DGRAG
summary matching, term statistics, the router protocol), gate.py, call.py (the query's clock and
budget, each round of calls, the per-site summary), assess.py, refine.py, fusion.py (screening,
relevance measured by the gateway, fusion, readable citations), synthesize.py (the LLM's checked
rewrite). Beside them lives what only a query uses: the learned router (learned/), what fusion
checks in site answers (reading, claims, conflicts), what the gateway learns of each site from its
answers (reliability and citation history, conduct), and the fitting of the gate and abstention
through the engine (calibrate.py; the fitted models are calibration.py's).

May import the routing index, the registry (trust.registry: who is enrolled and routable) and the
site transport port (gateway.client, transport); never the HTTP surface, the composition
root, or trust's key-holding and publication operations.

The package re-exports nothing: a name is imported from the module that defines it, so loading one
module (say claims, from the HTTP room) does not load the engine.
"""
