"""Tier cut-offs fit on the fit split (issue 8: "cut-offs calibrated"): the rows the tiered router's
ranking gives (real sites of the `federation` fixture, no site called), the quantile fit, the
calibration file that carries the cut-offs, and the policies that read them."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

import pytest
from click.testing import CliRunner

from hansa.core.errors import InputError
from hansa.gateway.query import calibrate as fitting
from hansa.gateway.trust.apikeys import API_KEYS_FILE, ApiKeyStore
from hansa.gateway.query.calibration import Calibration
from hansa.gateway.query.tiers import TierCutoffs
from hansa.gateway.query.policy import refine_policy, tiers_policy
from hansa.gateway.query.calibration import load_calibration, read_calibration
from hansa.gateway.query.tiers import cutoffs_from_gaps
from hansa.gateway.service import Gateway

GOVT_Q = "What does FEMA do after a disaster?"


def tier_row(question: str, site: str, gap: float | None, gold: bool) -> fitting.Row:
    features = {"ranked": 0.0} if gap is None else {"ranked": 1.0, "gap": gap, "score": 1.0 - gap, "lexical_weight": 0.3}
    return fitting.Row("tiers", fitting.Example(features, gold, question), site=site)


# Two questions: q1's gold sites at gaps 0.0 and 0.1 (two others ranked at 0.3 and 0.6), q2's at 0.0
# and 0.2 plus one gold site the ranking missed (no gap reaches it).
ROWS = [tier_row("q1", "a", 0.0, True), tier_row("q1", "b", 0.1, True), tier_row("q1", "c", 0.3, False),
        tier_row("q1", "d", 0.6, False), tier_row("q2", "a", 0.0, True), tier_row("q2", "c", 0.2, True),
        tier_row("q2", "b", 0.5, False), tier_row("q2", "e", None, True)]


@pytest.fixture(scope="module")
def gw(in_process_gateway, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    keys = ApiKeyStore(tmp_path_factory.mktemp("tier-keys") / API_KEYS_FILE)
    service = in_process_gateway(keys, calibration_file=str(tmp_path_factory.mktemp("no-cal") / "absent.json"))
    yield service
    service.close()


def test_cut_offs_are_quantiles_of_the_ranked_gold_sites_gaps_and_say_what_they_were_fit_on() -> None:
    fitted = fitting.fit_tiers(ROWS, quantiles=(0.5, 0.75, 1.0), note="test")
    assert fitted is not None
    cutoffs, fit = fitted
    # gold gaps 0.0, 0.0, 0.1, 0.2 (the missed gold site has none): quantiles 0.05, 0.125, 0.2
    assert (cutoffs.high_gap, cutoffs.moderate_gap, cutoffs.potential_gap) == (0.05, 0.125, 0.2)
    assert fit["gold_sites"] == 5 and fit["gold_sites_unranked"] == 1 and fit["questions"] == 2
    assert fit["lexical_weight"] == 0.3 and fit["quantiles"] == [0.5, 0.75, 1.0] and fit["digest"].startswith("sha256:")
    assert fitting.fit_tiers([r for r in ROWS if not r.example.label]) is None  # no gold gap: nothing to fit
    assert cutoffs_from_gaps([]) == TierCutoffs()
    with pytest.raises(ValueError, match="increasing"):
        cutoffs_from_gaps([0.1], quantiles=(0.9, 0.5, 0.99))


def test_tier_rates_count_gold_sites_and_sites_within_each_gap() -> None:
    rates = fitting.tier_rates(TierCutoffs(0.05, 0.125, 0.2), ROWS)
    assert rates["tier_questions"] == 2
    # within 0.125: q1's a, b (gold) and q2's a (gold); 3 of 5 gold sites, q1 alone has all its gold
    assert rates["tier_gold_sites_within_moderate"] == 0.6 and rates["tier_all_gold_within_moderate"] == 0.5
    assert rates["tier_sites_within_moderate"] == 1.5
    # within 0.2: q2's c joins; the missed gold site never counts
    assert rates["tier_gold_sites_within_potential"] == 0.8 and rates["tier_all_gold_within_potential"] == 0.5
    assert rates["tier_sites_within_potential"] == 2.0


def test_a_calibration_carries_its_cut_offs_and_refuses_broken_ones(tmp_path: Path) -> None:
    cal = Calibration(tiers=TierCutoffs(0.02, 0.3, 0.5), tiers_fit={"questions": 2})
    path = tmp_path / "cal.json"
    cal.save(path)
    again = read_calibration(path)
    assert again.tiers == cal.tiers and again.tiers_fit == {"questions": 2}
    for broken in ({"high_gap": 0.4, "moderate_gap": 0.3, "potential_gap": 0.5},  # not increasing
                   {"high_gap": 0.1, "moderate_gap": 0.3},  # one missing
                   {"high_gap": 0.1, "moderate_gap": "wide", "potential_gap": 0.5}, "0.3"):
        path.write_text(json.dumps({"version": 1, "tiers": broken}), encoding="utf-8")
        with pytest.raises(InputError, match="tiers|tier cut-offs"):
            read_calibration(path)
        assert load_calibration(path).tiers is None  # a gateway keeps serving on its defaults


def test_calibrating_onto_a_calibration_keeps_its_models_and_adds_the_cut_offs() -> None:
    abstain = [fitting.Row("abstain", fitting.Example({"best_relevance": 0.2 + i / 50, "passages": 3}, i >= 10, f"q{i}"))
               for i in range(30)]
    with_abstain = fitting.calibrate(abstain)
    assert with_abstain.tiers is None and with_abstain.abstain is not None
    both = fitting.calibrate(ROWS, onto=with_abstain, tier_quantiles=(0.5, 0.75, 1.0))
    assert both.abstain == with_abstain.abstain and both.tiers == TierCutoffs(0.05, 0.125, 0.2)
    assert fitting.calibrate(ROWS).abstain is None  # without `onto`: only what the rows fit
    with pytest.raises(InputError, match="ranked gold site"):
        fitting.calibrate([r for r in ROWS if not r.example.label])


def test_the_tiered_policies_use_the_calibrations_cut_offs_else_their_gaps_around_the_margin() -> None:
    fitted = TierCutoffs(0.01, 0.2, 0.3)
    gateway = SimpleNamespace(cfg=SimpleNamespace(site_margin=0.48, lexical_weight=0.3), index=None, history=None,
                              calibration=Calibration(tiers=fitted))
    assert tiers_policy(gateway).router.cutoffs == fitted  # type: ignore[union-attr]
    gateway.calibration = Calibration()
    assert refine_policy(gateway).router.cutoffs == TierCutoffs.around(0.48)  # type: ignore[union-attr]
    given = TierCutoffs(0.0, 0.1, 0.1)
    assert tiers_policy(gateway, given).router.cutoffs == given  # type: ignore[union-attr]


def test_tier_rows_record_the_tiered_rankings_gaps_without_calling_a_site(gw: Gateway,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def no_call(*args: object, **kwargs: object) -> None:
        raise AssertionError("collecting tier rows called a site")

    monkeypatch.setattr(gw.engine.transport, "call", no_call)
    questions = [fitting.LabelledQuestion("q-govt", GOVT_Q, ("govt", "nowhere")),
                 fitting.LabelledQuestion("q-none", "hi", (), answerable=False)]
    rows = fitting.tier_rows(gw, questions)
    assert rows and {r.example.question_id for r in rows} == {"q-govt"}  # unanswerable: no gold to place
    ranked = [r for r in rows if r.example.features["ranked"] > 0]
    assert min(r.example.features["gap"] for r in ranked) == 0.0 and all(r.example.features["gap"] >= 0 for r in ranked)
    by_site = {r.site: r for r in rows}
    assert by_site["govt"].example.label and by_site["govt"].example.features["ranked"] == 1.0
    assert by_site["nowhere"].example.label and by_site["nowhere"].example.features == {"ranked": 0.0}
    assert all(not r.example.label for r in ranked if r.site != "govt")
    again = [fitting.RowRecord.from_json(json.loads(json.dumps(fitting.RowRecord.of(r).to_json()))).row() for r in rows]
    assert again == rows  # the rows file round-trips, site included
    with pytest.raises(InputError, match="gap"):
        fitting.RowRecord.from_json({"model": "tiers", "label": True, "features": {"ranked": 1.0}})


def test_the_calibrate_command_adds_cut_offs_onto_a_calibration_and_refuses_bad_quantiles(tmp_path: Path) -> None:
    from hansa.cli import main

    base = tmp_path / "base.json"
    Calibration().save(base)
    data = tmp_path / "tiers.jsonl"
    fitting.write_rows(data, ROWS)
    out = tmp_path / "cal.json"
    env = {"HANSA_HOME": str(tmp_path / "home")}
    args = ["gateway", "calibrate", "--data", str(data), "--onto", str(base), "--out", str(out)]
    res = CliRunner().invoke(main, [*args, "--tier-quantiles", "0.5,0.75,1", "--json"], env=env)
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["tiers"]["gold_sites"] == 5 and "--onto base.json" in report["tiers"]["note"]
    assert report["fit_rates"]["tier_gold_sites_within_moderate"] == 0.6
    assert read_calibration(out).tiers == TierCutoffs(0.05, 0.125, 0.2)
    for bad in ("0.5,0.96", "0.9,0.5,0.99", "0.5,0.9,1.5"):
        res = CliRunner().invoke(main, [*args, "--tier-quantiles", bad], env=env)
        assert res.exit_code == 2 and "--tier-quantiles" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("rows, onto, shipped", [
    ("mtrag16_fit_tiers.jsonl", "calibration-mtrag16-escalation-noabstain.json", "calibration-mtrag16-tiers.json"),
    ("squad16_fit_tiers.jsonl", "calibration-squad16-escalation-noabstain.json", "calibration-squad16-tiers.json"),
])
def test_the_shipped_tier_calibrations_are_what_the_committed_rows_fit(tmp_path: Path, rows: str, onto: str,
                                                                       shipped: str) -> None:
    """benchmarks/README.md's fitted gaps come from the committed fit rows by the documented
    command, and adding them leaves the calibration's other models as they were."""
    from hansa.cli import main

    bench = Path(__file__).resolve().parents[3] / "benchmarks"
    out = tmp_path / "cal.json"
    res = CliRunner().invoke(main, ["gateway", "calibrate", "--data", str(bench / "calibration-rows" / rows),
                                    "--onto", str(bench / onto), "--out", str(out)],
                             env={"HANSA_HOME": str(tmp_path / "home")})
    assert res.exit_code == 0, res.output
    got, want, base = (json.loads(p.read_text()) for p in (out, bench / shipped, bench / onto))
    assert got == want
    assert {k: v for k, v in got.items() if k != "tiers"} == base
