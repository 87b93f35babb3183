"""Token buckets keyed by verified identity, charged by fan-out.

Why not per request or per IP: one query may ask 32 sites, each of which embeds the question and
searches its graph, so what a client spends is the number of sites it makes work; and an address is
not an identity (a NAT shares one, a botnet has thousands). The gateway charges a bucket only after
it knows who is asking (an API key's name, a site whose signature verified), so nobody can drain
another identity's budget. Buckets live in memory by default: a restart refills them, which is
fine for a limit that exists to keep one client from starving the others. With several worker
processes, pass `shared=` (hansa.core.shared_state.SharedState): the buckets then live in the
service's shared SQLite file, so N workers grant one burst between them, not N.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Callable

from hansa.core.errors import ConfigError, HansaError, InputError
from hansa.core.shared_state import SharedState

MAX_IDENTITIES = 100_000  # verified identities are few; this only bounds memory if that ever changes


class RateLimited(HansaError):
    """The identity spent its budget; `retry_after` (whole seconds) says when the cost fits again."""

    http_status = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.http_headers = {"Retry-After": str(retry_after)}


@dataclass
class _Bucket:
    tokens: float
    stamp: float


class TokenBucketLimiter:
    """`burst` tokens at most, refilled at `refill_per_s`; thread-safe; `clock` is for tests.

    In memory (one process) by default; with `shared`, in a SharedState file every worker process
    charges alike. Shared buckets are stamped with wall-clock time by default (`time.time`): it
    means the same in every process and across a restart, as the file outlives both."""

    def __init__(self, name: str, burst: int, refill_per_s: float, clock: Callable[[], float] | None = None,
                 *, shared: SharedState | None = None) -> None:
        if isinstance(burst, bool) or not isinstance(burst, int) or burst < 1:
            raise ConfigError(f"{name}: the burst must be a positive integer, not {burst!r}")
        if not isinstance(refill_per_s, (int, float)) or not math.isfinite(refill_per_s) or refill_per_s <= 0:
            raise ConfigError(f"{name}: the refill rate must be a positive number of tokens per second, not {refill_per_s!r}")
        self.name = name
        self.burst = burst
        self.refill_per_s = float(refill_per_s)
        self._clock = clock or (time.time if shared is not None else time.monotonic)
        self._shared = shared
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    def _level(self, bucket: _Bucket, now: float) -> float:
        return min(float(self.burst), bucket.tokens + (now - bucket.stamp) * self.refill_per_s)

    def charge(self, identity: str, cost: int) -> float:
        """Take `cost` tokens from `identity`'s bucket or raise RateLimited and take nothing.

        Returns the tokens left. A cost above the burst can never fit, so it is bad input (400),
        not a 429 a client would retry forever."""
        if cost > self.burst:
            raise InputError(f"{self.name}: this request costs {cost} tokens but at most {self.burst} fit "
                             f"in a burst; ask fewer sites at once")
        now = self._clock()
        taken, level = self._take_shared(identity, cost, now) if self._shared else self._take_local(identity, cost, now)
        if not taken:
            wait = math.ceil((cost - level) / self.refill_per_s)
            raise RateLimited(
                f"{self.name}: rate limit reached for {identity!r} (this request costs {cost} "
                f"tokens, {int(level)} left); retry in {wait} s", max(1, wait))
        return level

    def _take_local(self, identity: str, cost: int, now: float) -> tuple[bool, float]:
        with self._lock:
            bucket = self._buckets.get(identity)
            if bucket is None:
                if len(self._buckets) >= MAX_IDENTITIES:
                    self._forget_full(now)
                bucket = self._buckets[identity] = _Bucket(float(self.burst), now)
            level = self._level(bucket, now)
            if level < cost:
                return False, level
            bucket.tokens, bucket.stamp = level - cost, now
            return True, bucket.tokens

    def _take_shared(self, identity: str, cost: int, now: float) -> tuple[bool, float]:
        assert self._shared is not None
        prefix = f"{self.name}\x1f"
        result = self._shared.take_tokens(prefix + identity, cost, self.burst, self.refill_per_s, now)
        if result.created and self._shared.bucket_count(prefix) > MAX_IDENTITIES:
            self._shared.forget_full_buckets(prefix, self.burst, self.refill_per_s, now)
        return result.taken, result.level

    def _forget_full(self, now: float) -> None:
        """A full bucket holds no information: dropping it is the same as starting afresh."""
        for identity in [i for i, b in self._buckets.items() if self._level(b, now) >= self.burst]:
            del self._buckets[identity]
