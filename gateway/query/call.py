"""Stage: call — one round of calls to sites through the transport, measured.

Contract: `Calls` is one query's clock and budget, handed to every stage. `Calls.round(kind,
site_ids, requests=None)` asks every named site at once (in the given order; the query's request
for all, or one per site from `requests`), cut to what the budget has left, and returns a `Round`:
one SiteCall per site (see gateway.transport.SiteTransport: never raises for a site's failure) and
the wall time spent waiting, which the trace subtracts from the total to report the gateway's own
overhead. The transport's `on_answer` hook gets answers that arrive while others are awaited (the
engine measures their sentences then: work done while the question waits anyway does not delay
it, so it is not overhead). Site targets (URL, keys) come from the registry records only: no
request can make the gateway call an address the registry does not hold.

The per-site summary of a query's calls (`site_summary`), as Elasticsearch's cross-cluster search
reports `_clusters`: total (called plus skipped), successful, skipped (chosen but not called:
budget, gate), failed, timed_out, and `partial: true` when any called site failed. `all_failed` is
what makes a query a 502. The engine builds it into its QueryResult; the HTTP adapters only
serialize it.

The time a round's deadline keeps back for the gateway's own work after it (`FinishReserve`).

Why: `site_timeout_s` is the user's wait for a round, counted from when the gateway began working
toward it; routing already comes out of it (`Calls.round`). What follows the round did not: waking the
waiting thread, assessing, fusing. On an idle gateway that is a few milliseconds, but on busy cores
(the load drill's 4 workers on 2 cores) it took up to ~150 ms, added to every question that waited
for a hung site. So each process records how long that work took for its recent questions, and a
round stops waiting that much earlier: the 95th percentile of the last `WINDOW` samples, once it
has `MIN_SAMPLES`, never more than `[gateway] finish_reserve_max_ms` (0 turns it off). A site that
answers within that last stretch of the deadline is not waited for.

Samples come only from questions whose last round cut a call at its deadline: theirs is the
finishing that adds to the deadline, while a question whose sites all answered early ends before
it anyway (and its finishing is longer: fusion embeds the last answer's sentences, which a round
still waiting on a slower site has embedded already, gateway.query.fusion.measure_early). A sample runs from
the round's deadline to the answer being fused, so a thread the machine woke late counts as the
gateway's own time too; an LLM's synthesis is not counted (it has its own timeout).
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from hansa.core.jsonsafe import dumps
from hansa.gateway.client import MAX_RESPONSE_BYTES, OK, TIMEOUT, OnAnswer, SiteCall, SiteTarget
from hansa.gateway.trust.registry import SiteRecord
from hansa.gateway.transport import SiteTransport
from hansa.gateway.query.request import Budget, QueryRequest
from hansa.sync.wire import RetrieveRequest


WINDOW = 256  # recent questions cut at a deadline; one slow burst fades after this many
QUANTILE = 0.95
MIN_SAMPLES = 8  # fewer say too little about this machine's load; nothing is kept back until then


class FinishReserve:
    """Recent finishing times of this process's questions, and the reserve they call for."""

    def __init__(self, max_ms: float, window: int = WINDOW) -> None:
        if max_ms < 0:
            raise ValueError("finish_reserve_max_ms must be 0 (off) or positive")
        self.max_ms = float(max_ms)
        self._samples: deque[float] = deque(maxlen=window)
        self._lock = threading.Lock()

    def record(self, ms: float) -> None:
        if self.max_ms > 0:
            with self._lock:
                self._samples.append(max(float(ms), 0.0))

    def reserve_ms(self) -> float:
        """What a round keeps back now (0 before `MIN_SAMPLES` questions cut at a deadline)."""
        if self.max_ms <= 0:
            return 0.0
        with self._lock:
            if len(self._samples) < MIN_SAMPLES:
                return 0.0
            samples = sorted(self._samples)
        return min(samples[min(int(QUANTILE * len(samples)), len(samples) - 1)], self.max_ms)


@dataclass(frozen=True)
class Round:
    kind: str  # "origin", "routed", "refine" (or the refiner's name for it: depth, breadth, hybrid)
    calls: tuple[SiteCall, ...]
    wait_ms: float
    requests: tuple[RetrieveRequest, ...] = ()  # what each call asked, when sites were asked differently


class Calls:
    """One query's clock and budget, and its calls across rounds: the one context the stages are
    handed. Each round is cut to what the budget has left; `stages` and `waiting_ms` are the
    trace's stage timings and the time spent waiting for sites."""

    def __init__(self, request: QueryRequest, retrieve: RetrieveRequest, records: Mapping[str, SiteRecord],
                 transport: SiteTransport, site_timeout_s: float, finish: FinishReserve,
                 on_answer: OnAnswer | None, started: float) -> None:
        """`started`: when the query arrived (time.perf_counter); the budget's time counts from it."""
        self.t0 = started
        self.stages: dict[str, float] = {}
        self.waiting_ms = 0.0
        self.budget: Budget = request.budget
        self.retrieve, self.records, self.transport, self.on_answer = retrieve, records, transport, on_answer
        self.site_timeout_s, self.finish = site_timeout_s, finish
        self.request_bytes = len(dumps(retrieve.to_json()))  # what each call sends (bytes_out)
        self.rounds: list[Round] = []
        self.calls: list[SiteCall] = []
        self.out_of_budget = False
        self.out_of_time = False
        self._skipped: list[str] = []  # chosen, then not called (budget, gate); see `skipped`
        # When the gateway began working toward the next round: the query's arrival, then the end of
        # each round. A round's deadline counts from here, so routing, the gate's assessment and a
        # refiner's choice come out of the sites' time instead of being added to the user's wait.
        self._since_ms = 0.0
        # What the last round kept back for the gateway's work after it (`FinishReserve`), and where
        # that work began (the round's end, or its deadline when the round ended late).
        self.reserve_ms = 0.0
        self.finish_from_ms = 0.0

    def add(self, stage: str, since: float) -> float:
        """`stage` ran from `since` until now (its time goes to `stages`); returns now."""
        now = time.perf_counter()
        self.stages[stage] = self.stages.get(stage, 0.0) + (now - since) * 1000
        return now

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.t0) * 1000

    def skip(self, site_ids: Sequence[str]) -> None:
        self._skipped.extend(site_ids)

    @property
    def skipped(self) -> list[str]:
        called = set(self.called)
        return [s for s in dict.fromkeys(self._skipped) if s not in called]

    @property
    def cut_at_deadline(self) -> bool:
        """Whether the last round cut a call at its deadline (its finishing added to the deadline)."""
        return bool(self.rounds) and any(c.status == TIMEOUT for c in self.rounds[-1].calls)

    @property
    def called(self) -> list[str]:
        return [c.site_id for c in self.calls]

    def sites_left(self) -> int | None:
        """Distinct sites the budget still allows (a follow-up to a site already asked is free)."""
        return None if self.budget.sites is None else self.budget.sites - len(set(self.called))

    def time_left_ms(self) -> float | None:
        return None if self.budget.time_ms is None else self.budget.time_ms - self.elapsed_ms()

    def _within_sites(self, site_ids: Sequence[str]) -> list[str]:
        """`site_ids` cut to as many new sites as the budget has left (the rest are skipped)."""
        left = self.sites_left()
        if left is None:
            return list(site_ids)
        seen = set(self.called)
        new = [s for s in site_ids if s not in seen][:max(left, 0)]
        self.skip([s for s in site_ids if s not in seen and s not in new])
        return [s for s in site_ids if s in seen or s in new]

    def _byte_cap(self, site_ids: Sequence[str], wire: Sequence[RetrieveRequest], own_requests: bool) -> int:
        """The most bytes each answer of the round may take: what the byte budget has left, shared."""
        cap = MAX_RESPONSE_BYTES
        if self.budget.bytes is not None and site_ids:
            spent = sum(c.bytes_out + c.bytes_in for c in self.calls)
            sent = max(len(dumps(r.to_json())) for r in wire) if own_requests else self.request_bytes
            cap = min(cap, (self.budget.bytes - spent) // len(site_ids) - sent)
        return cap

    def round(self, kind: str, site_ids: Sequence[str],
              requests: Mapping[str, RetrieveRequest] | None = None) -> Round | None:
        """Call `site_ids` (at most as many new sites as the budget has left) with the time left of
        the round's deadline and of the budget, and the bytes left, each with its own request from
        `requests` (default: the query's); None when nothing is left to call them with (then
        `out_of_budget`, or `out_of_time` when the deadline alone ran out) or nobody to call."""
        wanted = bool(site_ids)
        site_ids = self._within_sites(site_ids)
        self.reserve_ms = self.finish.reserve_ms()
        started_ms = self.elapsed_ms()
        deadline_s = self.site_timeout_s - (started_ms - self._since_ms + self.reserve_ms) / 1000
        timeout_s = deadline_s
        if self.budget.time_ms is not None:
            timeout_s = min(timeout_s, (self.budget.time_ms - self.elapsed_ms()) / 1000)
        wire = [(requests or {}).get(s, self.retrieve) for s in site_ids]
        cap = self._byte_cap(site_ids, wire, bool(requests))
        if not site_ids or timeout_s <= 0 or cap <= 0:
            if deadline_s <= 0 and site_ids and cap > 0 and timeout_s == deadline_s:
                self.out_of_time = True  # the gateway's own work took the whole site_timeout_s
            else:
                self.out_of_budget = self.out_of_budget or wanted
            self.skip(site_ids)
            return None
        targets = [SiteTarget(s, self.records[s].url, self.records[s].public_keys) for s in site_ids]
        t0 = time.perf_counter()
        calls = self.transport.call(targets, wire if requests else self.retrieve, timeout_s, max_response_bytes=cap,
                                    on_answer=self.on_answer)
        rnd = Round(kind, tuple(calls), (time.perf_counter() - t0) * 1000, tuple(wire) if requests else ())
        self.waiting_ms += rnd.wait_ms
        self._since_ms = self.elapsed_ms()
        self.finish_from_ms = min(self._since_ms, started_ms + timeout_s * 1000)
        self.rounds.append(rnd)
        self.calls.extend(rnd.calls)
        return rnd


def site_summary(calls: Sequence[SiteCall], selected: Sequence[str] = ()) -> dict[str, Any]:
    """The `_clusters`-like summary of one query's calls (`selected`: the sites the router or the
    request chose; those not called count as skipped)."""
    called = {c.site_id for c in calls}
    ok = sum(1 for c in calls if c.status == OK)
    timed_out = sum(1 for c in calls if c.status == TIMEOUT)
    failed = len(calls) - ok - timed_out
    skipped = len([s for s in dict.fromkeys(selected) if s not in called])
    return {"total": len(calls) + skipped, "successful": ok, "skipped": skipped, "failed": failed,
            "timed_out": timed_out, "partial": ok < len(calls),
            "details": [c.trace_json() for c in calls]}


def all_failed(summary: dict[str, Any], budget: Budget) -> bool:
    """True when sites were called and none answered on their own account: the query is a 502, not
    a 200 "No answer". A query whose own time or byte budget cut the calls short is not the sites'
    failure (the client asked for it): that stays a 200 with `partial: true`."""
    if budget.time_ms is not None or budget.bytes is not None:
        return False
    return summary["successful"] == 0 and summary["failed"] + summary["timed_out"] > 0
