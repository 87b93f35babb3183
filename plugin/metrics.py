"""The site API's Prometheus metrics (served at `/metrics`, see hansa.core.metrics).

Why these: an operator needs to see whether the gateway's calls succeed (`retrieve requests by
status`), how long the site takes to answer them (the latency the gateway's per-site deadline is
measured against), and whether someone is knocking with bad signatures (`refusals by reason`, the
stable codes of hansa.sync.httpsig: replayed, stale, bad-signature, ...).

Imported only where the app is built, so a server can switch prometheus_client to multiprocess
mode before the first import (core/metrics.py).
"""
from __future__ import annotations

from prometheus_client import Counter, Histogram

RETRIEVE_REQUESTS = Counter(
    "hansa_site_retrieve_requests", "POST /v1/retrieve requests answered, by HTTP status", ["status"])
RETRIEVE_SECONDS = Histogram(
    "hansa_site_retrieve_seconds", "Time to answer POST /v1/retrieve (all statuses), seconds",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0))
SIGNATURE_REFUSALS = Counter(
    "hansa_site_signature_refusals", "Requests refused by RFC 9421 verification, by reason", ["reason"])
