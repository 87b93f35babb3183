"""SiteReliability: a decayed Beta posterior per site, persisted in SQLite beside the registry."""
from __future__ import annotations

from pathlib import Path

import pytest

from hansa.gateway.query.reliability import FILE_NAME, PRIOR_ALPHA, PRIOR_BETA, Observation, SiteReliability


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_unknown_sites_sit_at_the_prior_and_evidence_moves_them() -> None:
    rel = SiteReliability(None)
    prior = PRIOR_ALPHA / (PRIOR_ALPHA + PRIOR_BETA)
    assert rel.weights(["new"]) == {"new": pytest.approx(prior)}
    rel.observe({"good": Observation(successes=3), "bad": Observation(failures=3)})
    w = rel.weights(["good", "bad", "new"])
    assert w["good"] > prior > w["bad"]
    assert w["bad"] == pytest.approx(PRIOR_ALPHA / (PRIOR_ALPHA + PRIOR_BETA + 3))


def test_persisted_across_reopening(tmp_path: Path) -> None:
    clock = Clock()
    rel = SiteReliability.open(tmp_path, clock=clock)
    rel.observe({"a": Observation(successes=2, failures=5)})
    before = rel.record("a")
    rel.close()
    assert (tmp_path / FILE_NAME).is_file()
    again = SiteReliability.open(tmp_path, clock=clock)
    after = again.record("a")
    assert (after.alpha, after.beta, after.successes, after.failures) == (before.alpha, before.beta, 2, 5)
    assert again.view()[0]["site_id"] == "a" and again.view()[0]["reliability"] == round(after.reliability, 4)


def test_evidence_decays_toward_the_prior_with_the_half_life() -> None:
    clock = Clock()
    rel = SiteReliability(None, half_life_s=100.0, clock=clock)
    rel.observe({"a": Observation(failures=8)})
    fresh = rel.record("a").beta
    clock.now += 100.0
    assert rel.record("a").beta == pytest.approx(PRIOR_BETA + (fresh - PRIOR_BETA) / 2)
    clock.now += 10_000.0
    assert rel.record("a").reliability == pytest.approx(PRIOR_ALPHA / (PRIOR_ALPHA + PRIOR_BETA), abs=1e-6)


def test_bad_input_is_refused() -> None:
    rel = SiteReliability(None)
    with pytest.raises(ValueError):
        rel.observe({"a": Observation(successes=-1)})
    with pytest.raises(ValueError):
        SiteReliability(None, half_life_s=0)
    rel.observe({"a": Observation(successes=1)})
    rel.forget("a")
    assert rel.view() == []


def test_opened_as_configured(tmp_path: Path) -> None:
    from hansa.core.config import load_config

    cfg = load_config(env={"HANSA_HOME": str(tmp_path), "HANSA_GATEWAY_RELIABILITY_HALF_LIFE_HOURS": "2"})
    rel = SiteReliability.for_gateway(cfg, tmp_path / "gateway")
    assert rel.half_life_s == 7200.0 and rel.path == tmp_path / "gateway" / FILE_NAME
