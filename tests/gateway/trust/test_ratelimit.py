"""The token bucket on its own, with a clock the test moves: exact refill, Retry-After, isolation
between identities, refusals that take nothing, and no lost or double-spent tokens under threads."""
from __future__ import annotations

import math
import threading

import pytest

from hansa.core.errors import ConfigError, InputError
from hansa.gateway.trust.ratelimit import RateLimited, TokenBucketLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_cost_is_taken_refilled_and_refused_without_taking_anything() -> None:
    clock = Clock()
    limiter = TokenBucketLimiter("query", burst=5, refill_per_s=1.0, clock=clock)
    assert limiter.charge("alice", 3) == 2
    with pytest.raises(RateLimited) as refused:
        limiter.charge("alice", 3)
    assert refused.value.http_status == 429
    assert refused.value.retry_after == 1 and refused.value.http_headers == {"Retry-After": "1"}
    assert "alice" in str(refused.value) and "costs 3" in str(refused.value)
    assert limiter.charge("alice", 2) == 0  # the refused charge took nothing
    clock.now += 2.5
    assert limiter.charge("alice", 2) == pytest.approx(0.5)
    clock.now += 3600
    assert limiter.charge("alice", 1) == 4  # never above the burst, however long the pause


def test_identities_have_separate_buckets() -> None:
    limiter = TokenBucketLimiter("query", burst=4, refill_per_s=0.001, clock=Clock())
    limiter.charge("alice", 4)
    with pytest.raises(RateLimited):
        limiter.charge("alice", 1)
    assert limiter.charge("bob", 4) == 0


def test_retry_after_rounds_up_to_when_the_cost_fits() -> None:
    limiter = TokenBucketLimiter("query", burst=10, refill_per_s=0.5, clock=Clock())
    limiter.charge("alice", 10)
    with pytest.raises(RateLimited) as refused:
        limiter.charge("alice", 3)
    assert refused.value.retry_after == math.ceil(3 / 0.5)


def test_a_cost_above_the_burst_is_bad_input_not_a_retry_loop() -> None:
    limiter = TokenBucketLimiter("query", burst=8, refill_per_s=1.0, clock=Clock())
    with pytest.raises(InputError, match="at most 8"):
        limiter.charge("alice", 9)
    assert limiter.charge("alice", 8) == 0  # nothing was taken


@pytest.mark.parametrize("burst, rate", [(0, 1.0), (-1, 1.0), (True, 1.0), (1.5, 1.0), (5, 0), (5, -1.0),
                                         (5, float("nan")), (5, float("inf"))])
def test_nonsense_limits_are_a_config_error(burst, rate) -> None:
    with pytest.raises(ConfigError):
        TokenBucketLimiter("query", burst=burst, refill_per_s=rate)


def test_concurrent_charges_never_overspend() -> None:
    limiter = TokenBucketLimiter("query", burst=500, refill_per_s=1e-9, clock=Clock())
    granted: list[int] = []
    lock = threading.Lock()

    def spend() -> None:
        mine = 0
        for _ in range(100):
            try:
                limiter.charge("shared", 1)
                mine += 1
            except RateLimited:
                pass
        with lock:
            granted.append(mine)

    threads = [threading.Thread(target=spend) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(granted) == 500
