"""query.call.FinishReserve: what a round keeps back of its deadline for the gateway's work after it."""
from __future__ import annotations

import pytest

from hansa.core.config import GatewayConfig
from hansa.core.errors import ConfigError
from hansa.gateway.query.call import FinishReserve


def test_nothing_is_kept_back_until_a_few_questions_were_seen() -> None:
    reserve = FinishReserve(200)
    for _ in range(7):
        reserve.record(50)
    assert reserve.reserve_ms() == 0.0
    reserve.record(50)
    assert reserve.reserve_ms() == 50.0


def test_the_reserve_is_the_95th_percentile_of_recent_finishes_capped() -> None:
    reserve = FinishReserve(200, window=100)
    for ms in range(1, 101):  # 1..100 ms
        reserve.record(ms)
    assert reserve.reserve_ms() == 96.0
    reserve.record(5_000)  # one very slow finish moves the percentile, not to itself
    assert reserve.reserve_ms() == 97.0
    for _ in range(100):
        reserve.record(900)
    assert reserve.reserve_ms() == 200.0  # never more than the cap
    for _ in range(100):  # a slow burst fades once the window has moved past it
        reserve.record(3)
    assert reserve.reserve_ms() == 3.0


def test_a_cap_of_zero_turns_it_off_and_a_negative_one_is_refused() -> None:
    off = FinishReserve(0)
    for _ in range(50):
        off.record(100)
    assert off.reserve_ms() == 0.0
    with pytest.raises(ValueError, match="finish_reserve_max_ms"):
        FinishReserve(-1)


def test_the_engine_refuses_a_negative_cap_in_config() -> None:
    from hansa.gateway.query.engine import QueryEngine

    with pytest.raises(ConfigError, match="finish_reserve_max_ms"):
        QueryEngine(GatewayConfig(finish_reserve_max_ms=-5), embedder=None, index=None, registry=None,  # type: ignore[arg-type]
                    transport=None)  # type: ignore[arg-type]
