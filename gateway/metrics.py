"""The gateway's Prometheus metrics (served at `/metrics`, see hansa.core.metrics).

Why these: an operator of a federation needs to see what became of questions (answered, abstained,
no site to ask, error), which sites are slow or failing (per-site latency and call status: the
per-site deadline is measured against the first), how often the gate escalates, what happens to
publications (accepted, refused by reason), how large the routing index is, and whether clients
hit their rate limits. Counts only, no question text.

Imported only where the gateway is built, so a server can switch prometheus_client to
multiprocess mode before the first import (core/metrics.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from prometheus_client import Counter, Gauge, Histogram

if TYPE_CHECKING:
    from hansa.gateway.query.engine import QueryTrace

QUERIES = Counter("hansa_gateway_queries", "Questions answered by the gateway, by outcome", ["outcome"])
SITE_CALL_SECONDS = Histogram(
    "hansa_gateway_site_call_seconds", "Latency of one signed call to a site, by site, seconds", ["site"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0))
SITE_CALLS = Counter("hansa_gateway_site_calls", "Calls to sites, by site and status (ok, timeout, error, invalid)",
                     ["site", "status"])
GATE_DECISIONS = Counter("hansa_gateway_gate_decisions", "Origin-gate decisions (answer, escalate)", ["decision"])
ABSTENTIONS = Counter("hansa_gateway_abstentions", "Questions the gateway abstained from answering")
PUBLICATIONS = Counter("hansa_gateway_publications", "Site publications, by result (accepted, refused) and reason",
                       ["result", "reason"])
RATE_LIMITED = Counter("hansa_gateway_rate_limited", "Requests refused by a rate limit, by limit (query, publication)",
                       ["limit"])
SUMMARIES = Gauge("hansa_gateway_summaries", "Summaries in the routing index (per worker; workers converge)",
                  multiprocess_mode="livemax")

OUTCOMES = ("answered", "abstained", "no_sites", "error")


def query_outcome(trace: QueryTrace, calls: Iterable[Any]) -> str:
    """What became of one question, from its trace and calls: no_sites
    (no site was asked), error (every site asked failed), abstained (sites answered but the evidence
    did not answer the question) or answered. The first two come first: an engine that abstains
    when nobody could be asked or nobody answered must not hide an outage as an abstention."""
    calls = list(calls)
    if not calls:
        return "no_sites"
    if not any(c.status == "ok" for c in calls):
        return "error"
    return "abstained" if trace.abstained else "answered"


def record_query(trace: QueryTrace, calls: Iterable[Any]) -> None:
    calls = list(calls)
    outcome = query_outcome(trace, calls)
    QUERIES.labels(outcome=outcome).inc()
    if outcome == "abstained":
        ABSTENTIONS.inc()
    if trace.gate is not None:
        GATE_DECISIONS.labels(decision=trace.gate.decision).inc()
    for call in calls:
        SITE_CALLS.labels(site=call.site_id, status=call.status).inc()
        SITE_CALL_SECONDS.labels(site=call.site_id).observe(call.latency_ms / 1000)
