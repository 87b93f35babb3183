"""`[gateway] strategy`: every engine strategy `hansa eval` reports is one an operator can serve
(fast tier: scripted sites, tests/fakes.py)."""
from __future__ import annotations

import pytest

from hansa.core.errors import ConfigError
from hansa.gateway.query.policy import STRATEGIES
from hansa.evaluation.runner import ENGINE_STRATEGIES
from tests.gateway.test_fast_gateway import ANSWERS, RIVER_Q, open_gateway


def test_every_evaluated_strategy_can_be_served() -> None:
    assert set(ENGINE_STRATEGIES) <= set(STRATEGIES)


@pytest.mark.parametrize("strategy", ["one_round", "tiers", "refine", "gated"])
def test_http_queries_run_with_the_configured_strategy(tmp_path, strategy: str) -> None:
    fed = open_gateway(tmp_path, ANSWERS, strategy=strategy)
    body = fed.query({"question": RIVER_Q}).get_json()
    assert body["trace"]["policy"]["name"] == strategy
    assert "Rhone" in body["answer"]
    fed.service.close()


def test_the_default_strategy_is_the_engines_own(tmp_path) -> None:
    fed = open_gateway(tmp_path, ANSWERS)
    assert fed.service.policy is None
    assert fed.query({"question": RIVER_Q}).get_json()["trace"]["policy"]["name"] == "hansa"
    fed.service.close()


def test_an_unknown_strategy_or_one_without_its_model_is_refused_at_open(tmp_path) -> None:
    with pytest.raises(ConfigError, match="strategy 'everything' is not one of"):
        open_gateway(tmp_path / "a", ANSWERS, strategy="everything")
    with pytest.raises(Exception, match="escalate strategy needs a calibration"):
        open_gateway(tmp_path / "b", ANSWERS, strategy="escalate")
