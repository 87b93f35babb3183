"""Site answers shared across the strategies of one eval run (`hansa eval --share-site-calls`).

Why: every strategy asks the same sites the same question: `exhaustive` asks all 16, `top1`,
`oracle`, `full_information` and the engine's first rounds ask some of the same (site, request)
pairs again. A site's answer depends only on the request and its data, and the data do not change
during a run, so asking twice measures nothing new; on two cores it tripled the time of a
2,000-question run. This transport wraps the gateway's real one: the first time a (site, request)
pair is asked, the call goes to the site (signed, verified, timed); later asks of the same pair get
that verified answer back after waiting as long as the first call took, so end-to-end latency still
includes the site's time, and bytes, statuses and the gateway's own work are unchanged.

What it changes, said in the run's settings: a replayed call costs the site no CPU, so under load
later strategies see less contention than the first; only answers that came back "ok" are replayed
(a timeout or an error is asked again). For evaluation only: a gateway serving users never shares
answers between requests this way (its answers are bound to each signed request).
"""
from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from dataclasses import replace
from typing import Callable, Sequence

from hansa.gateway.client import MAX_RESPONSE_BYTES, OK, OnAnswer, SiteCall, SiteTarget, per_target
from hansa.gateway.transport import SiteTransport
from hansa.sync.wire import RetrieveRequest

MAX_ENTRIES = 65_536  # ~ 4,000 questions x 16 sites; oldest forgotten first


class SharedSiteCalls:
    """A SiteTransport that asks each (site, request) pair once and replays its verified answer."""

    def __init__(self, inner: SiteTransport, max_entries: int = MAX_ENTRIES,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.inner = inner
        self.sleep = sleep
        self.max_entries = max_entries
        self._answers: OrderedDict[tuple[str, str], SiteCall] = OrderedDict()
        self._lock = threading.Lock()
        self.asked = 0  # calls that reached a site
        self.replayed = 0  # calls answered from an earlier identical one

    @staticmethod
    def _key(site_id: str, request: RetrieveRequest) -> tuple[str, str]:
        return site_id, json.dumps(request.to_json(), sort_keys=True)

    def call(self, targets: Sequence[SiteTarget], request: RetrieveRequest | Sequence[RetrieveRequest],
             timeout_s: float, *, max_response_bytes: int = MAX_RESPONSE_BYTES,
             on_answer: OnAnswer | None = None) -> list[SiteCall]:
        t0 = time.monotonic()
        requests = per_target(request, len(targets))
        keys = [self._key(t.site_id, r) for t, r in zip(targets, requests)]
        with self._lock:
            known = {i: self._answers[k] for i, k in enumerate(keys)
                     if k in self._answers and self._answers[k].latency_ms <= timeout_s * 1000}
        fresh = [i for i in range(len(targets)) if i not in known]
        calls: dict[int, SiteCall] = dict(known)
        if fresh:
            answered = self.inner.call([targets[i] for i in fresh], [requests[i] for i in fresh], timeout_s,
                                       max_response_bytes=max_response_bytes, on_answer=on_answer)
            with self._lock:
                for i, call in zip(fresh, answered):
                    calls[i] = call
                    if call.status == OK:
                        self._answers[keys[i]] = call
                        self._answers.move_to_end(keys[i])
                while len(self._answers) > self.max_entries:
                    self._answers.popitem(last=False)
        # The round's calls run at once: it lasts as long as its slowest call, replayed ones included.
        wait_ms = max((c.latency_ms for c in known.values()), default=0.0)
        if on_answer is not None:  # a replayed answer arrives before the round ends, as the first one did
            for i in sorted(known, key=lambda i: known[i].latency_ms):
                if known[i].latency_ms < wait_ms:
                    on_answer(known[i])
        left = wait_ms / 1000 - (time.monotonic() - t0)
        if left > 0:
            self.sleep(left)
        with self._lock:
            self.asked += len(fresh)
            self.replayed += len(known)
        return [replace(calls[i]) for i in range(len(targets))]
