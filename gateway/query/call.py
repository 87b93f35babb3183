"""Stage: call — one round of calls to sites through the transport, measured.

Contract: `call_round(transport, kind, site_ids, records, request, timeout_s, max_response_bytes,
on_answer=None)` asks every named site at once (in the given order; `request` one for all, or one
per site) and returns a `Round`: one SiteCall per site (see gateway.transport.SiteTransport: never
raises for a site's failure) and the wall time spent waiting, which the trace subtracts from the
total to report the gateway's own overhead. `on_answer` is the transport's hook for answers that
arrive while others are awaited (the engine measures their sentences then: work done while the
question waits anyway does not delay it, so it is not overhead). Site
targets (URL, keys) come from the registry records only: no request can make the gateway call an
address the registry does not hold.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from hansa.gateway.client import OnAnswer, SiteCall, SiteTarget
from hansa.gateway.trust.registry import SiteRecord
from hansa.gateway.transport import SiteTransport
from hansa.sync.wire import RetrieveRequest


@dataclass(frozen=True)
class Round:
    kind: str  # "origin", "routed", "refine" (or the refiner's name for it: depth, breadth, hybrid)
    calls: tuple[SiteCall, ...]
    wait_ms: float
    requests: tuple[RetrieveRequest, ...] = ()  # what each call asked, when sites were asked differently

    @property
    def bytes_out(self) -> int:
        return sum(c.bytes_out for c in self.calls)

    @property
    def bytes_in(self) -> int:
        return sum(c.bytes_in for c in self.calls)

    def trace_json(self, number: int) -> dict[str, Any]:
        return {"round": number, "kind": self.kind, "sites": [c.site_id for c in self.calls],
                "ms": round(self.wait_ms, 1), "bytes_out": self.bytes_out, "bytes_in": self.bytes_in}


def call_round(
    transport: SiteTransport,
    kind: str,
    site_ids: Sequence[str],
    records: Mapping[str, SiteRecord],
    request: RetrieveRequest | Sequence[RetrieveRequest],
    timeout_s: float,
    max_response_bytes: int,
    on_answer: OnAnswer | None = None,
) -> Round:
    targets = [SiteTarget(s, records[s].url, records[s].public_keys) for s in site_ids]
    t0 = time.perf_counter()
    calls = (transport.call(targets, request, timeout_s, max_response_bytes=max_response_bytes, on_answer=on_answer)
             if targets else [])
    per_site = () if isinstance(request, RetrieveRequest) else tuple(request)
    return Round(kind, tuple(calls), (time.perf_counter() - t0) * 1000, per_site)
