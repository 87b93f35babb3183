"""Escalation round by round (query.escalate) on the fast tier: the Gateway service over the real
sites of the `federation` fixture (clapnq, govt) through InProcessSiteTransport (signed and
verified). Models are hand-set with a stated rule (the mechanism), or fit on rows collected from
these sites (the fit); the replay is checked on rows whose outcome is known by construction."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from hansa.core.errors import InputError
from hansa.gateway.query import calibrate as fitting
from hansa.gateway.trust.apikeys import API_KEYS_FILE, ApiKeyStore
from hansa.gateway.query.request import Budget, QueryRequest
from hansa.gateway.query.calibration import Calibration, LogisticModel, load_calibration
from hansa.gateway.query.refine import OneRound
from hansa.gateway.query.policy import QueryPolicy
from hansa.gateway.query.calibration import Example
from hansa.gateway.query.escalate import check_schedule
from hansa.gateway.query.policy import escalation_policy
from hansa.gateway.service import Gateway

GOVT_Q = "What does FEMA do after a disaster?"
RIVER_Q = "Where does the Penobscot River flow?"


def relevance_rule(cut: float) -> LogisticModel:
    """Hand-set: P = sigmoid(best_relevance - cut), threshold 0.5 — 'confident once the best
    passage's relevance reaches `cut`' (cut > 1: never; cut < -1: always)."""
    return LogisticModel(("best_relevance",), (0.0,), (1.0,), (1.0,), -cut, 0.5)


def calibration(cut: float, schedule: tuple[int, ...] = (1, 2)) -> Calibration:
    return Calibration(escalate=relevance_rule(cut), escalate_schedule=schedule)


@pytest.fixture(scope="module")
def gw(in_process_gateway, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    keys = ApiKeyStore(tmp_path_factory.mktemp("escalate-keys") / API_KEYS_FILE)
    missing = tmp_path_factory.mktemp("no-calibration") / "absent.json"
    service = in_process_gateway(keys, calibration_file=str(missing), top_k_sites=4)
    yield service
    service.close()


def ask(gw: Gateway, cal: Calibration, question: str = GOVT_Q, **kw: Any) -> Any:
    policy = escalation_policy(cal, gw.cfg.site_margin, gw.cfg.lexical_weight)
    return gw.query(QueryRequest(question=question, **kw), client="escalate", policy=policy)


def rounds(result: Any) -> list[tuple[str, list[str]]]:
    return [(r.kind, list(r.sites)) for r in result.trace.rounds]


def test_confident_evidence_from_the_leader_stops_after_one_call(gw: Gateway) -> None:
    result = ask(gw, calibration(cut=-2.0))
    assert rounds(result) == [("routed", ["govt"])]
    assert result.trace.stop_reason.startswith("evidence confident")
    assert result.citations and all(c["site_id"] == "govt" for c in result.citations)


def test_weak_evidence_escalates_to_the_next_ranked_site_and_keeps_the_best_answer(gw: Gateway) -> None:
    result = ask(gw, calibration(cut=2.0))
    assert rounds(result) == [("routed", ["govt"]), ("escalate", ["clapnq"])]
    assert result.trace.stop_reason.startswith(("escalation schedule done", "no ranked site left"))
    assert result.citations[0]["site_id"] == "govt"  # the second round's site does not push out the evidence
    assert result.trace.budget.spent.sites == 2


def test_the_ranking_decides_who_is_asked_first(gw: Gateway) -> None:
    result = ask(gw, calibration(cut=-2.0), RIVER_Q)
    assert rounds(result) == [("routed", ["clapnq"])]


def test_a_request_that_names_its_sites_is_never_escalated_past_them(gw: Gateway) -> None:
    result = ask(gw, calibration(cut=2.0), sites=["clapnq"])
    assert rounds(result) == [("routed", ["clapnq"])] and result.trace.stop_reason == "the request named its sites"


def test_the_sites_budget_caps_escalation(gw: Gateway) -> None:
    result = ask(gw, calibration(cut=2.0), budget=Budget(sites=1))
    assert rounds(result) == [("routed", ["govt"])] and result.trace.stop_reason == "budget"
    assert result.sites["skipped"] == 1  # clapnq was chosen, then not called


def test_a_calibration_with_an_escalation_model_becomes_the_gateways_routing(in_process_gateway, tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    calibration(cut=2.0).save(path)
    assert json.loads(path.read_text())["escalate_schedule"] == [1, 2]
    keys = ApiKeyStore(tmp_path / API_KEYS_FILE)
    with in_process_gateway(keys, calibration_file=str(path), top_k_sites=4) as service:
        assert service.calibration.escalate is not None
        result = service.query(QueryRequest(question=GOVT_Q), client="escalate")
        assert rounds(result) == [("routed", ["govt"]), ("escalate", ["clapnq"])]
        assert result.trace.policy["refiner"] == "escalation"
        # a policy naming its own refiner keeps it
        one = service.query(QueryRequest(question=GOVT_Q), client="escalate",
                            policy=QueryPolicy(name="one", refiner=OneRound()))
        assert len(one.trace.rounds) == 1


def test_the_escalate_strategy_without_an_escalation_model_is_refused_clearly() -> None:
    with pytest.raises(InputError, match="escalate"):
        escalation_policy(Calibration(), 0.4, 0.3)


@pytest.mark.parametrize("bad", [[], [0, 1], [2, 2], [3, 1], [1, 2, 3, 4, 5, 6, 7, 8, 9], [1, True], ["1"]])
def test_a_bad_schedule_is_refused_and_a_file_holding_one_falls_back_to_defaults(bad: list[Any], tmp_path: Path) -> None:
    with pytest.raises(InputError):
        check_schedule(bad)
    obj = {**calibration(cut=0.5).to_json(), "escalate_schedule": bad}
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(obj))
    assert load_calibration(path).escalate is None  # unusable file: the safe defaults, one round


# -- fitting ------------------------------------------------------------------------------------------

def rows_of(question: str, steps: list[tuple[float, bool]]) -> list[fitting.Row]:
    """Escalate rows whose best_relevance is the given confidence signal, step 1.. in order."""
    return [fitting.Row("escalate", Example({"best_relevance": rel, "passages": 1.0}, label, question), step=n)
            for n, (rel, label) in enumerate(steps, 1)]


def test_replay_stops_at_the_first_confident_round_and_counts_sites_and_recall() -> None:
    rows = (rows_of("a", [(0.9, True), (0.9, True), (0.9, True), (0.9, True)])  # confident at once: 1 site
            + rows_of("b", [(0.1, False), (0.2, False), (0.8, True), (0.8, True)])  # confident at 3
            + rows_of("c", [(0.1, False), (0.1, False), (0.1, False), (0.1, True)]))  # never: the last (4)
    scored = fitting.scored_steps(rows, relevance_rule(0.5))
    got = fitting.replay(scored, 0.5, (1, 2, 3, 4))
    assert got == {"recall": 1.0, "sites": (1 + 3 + 4) / 3, "questions": 3}
    coarse = fitting.replay(scored, 0.5, (2, 4))  # the schedule's rounds only: b stops at 4, not 3
    assert coarse["sites"] == (2 + 4 + 4) / 3
    eager = fitting.replay(scored, 0.0, (1, 2, 3, 4))  # any evidence suffices: one site each
    assert eager == {"recall": 1 / 3, "sites": 1.0, "questions": 3}


def test_fit_escalation_meets_its_recall_on_the_fit_rows_with_fewer_sites_than_asking_all() -> None:
    rows: list[fitting.Row] = []
    for i in range(60):  # the gold site is ranked (i % 4) + 1; its evidence is clearly better
        gold_at = i % 4 + 1
        rows += rows_of(f"q{i}", [(0.8 if n >= gold_at else 0.2 + 0.01 * (i % 7), n >= gold_at) for n in range(1, 5)])
    model, schedule = fitting.fit_escalation(rows, min_recall=0.95, schedules=((1, 2, 3, 4), (2, 4)))
    assert model.fit["replayed_recall"] >= 0.95 and model.fit["replayed_sites"] < 4
    got = fitting.replay(fitting.scored_steps(rows, model), model.threshold, schedule)
    assert got["recall"] >= 0.95 and got["sites"] == pytest.approx(model.fit["replayed_sites"], abs=1e-3)


def test_escalate_rows_from_real_sites_assess_every_prefix_of_the_ranking(gw: Gateway, tmp_path: Path) -> None:
    questions = [fitting.LabelledQuestion("g", GOVT_Q, ("govt",)), fitting.LabelledQuestion("r", RIVER_Q, ("clapnq",))]
    rows = fitting.escalate_rows(gw, questions, max_sites=2)
    assert [(r.example.question_id, r.step, r.example.label) for r in rows] == [
        ("g", 1, True), ("g", 2, True), ("r", 1, True), ("r", 2, True)]
    assert all(r.example.features["passages"] > 0 and "routing_gap" in r.example.features for r in rows)
    assert rows[1].example.features["sites_answered"] == 2  # the prefix of two holds both sites' evidence
    # what the second-ranked site added is measured against the first's evidence alone
    first, second = rows[0].example.features, rows[1].example.features
    assert first["relevance_gain"] == first["best_relevance"] and first["sites_since_best"] == 0
    assert second["relevance_gain"] == pytest.approx(second["best_relevance"] - first["best_relevance"])
    assert second["sites_since_best"] == (0 if second["relevance_gain"] > 0 else 1)
    path = tmp_path / "rows.jsonl"
    fitting.write_rows(path, rows)
    assert fitting.read_rows(path) == rows  # the step survives the round trip
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**fitting.RowRecord.of(rows[0]).to_json(), "step": 0}) + "\n")
    with pytest.raises(InputError, match="step"):
        fitting.read_rows(bad)


def test_an_origin_the_gate_escalated_is_followed_by_the_ranking_even_if_escalation_would_stop(gw: Gateway) -> None:
    """The gate (always escalate: no gate model) sends the question past its origin; escalation's
    own confidence (always confident) must not undo that with nobody else asked."""
    result = ask(gw, calibration(cut=-2.0), origin="govt")
    assert result.trace.gate is not None and result.trace.gate.decision == "escalate"
    assert [c.site_id for c in result.trace.per_site] == ["govt", "clapnq"]
    assert result.trace.stop_reason.startswith("evidence confident")


def test_fit_escalation_under_a_sites_budget_takes_the_best_recall_within_it() -> None:
    rows: list[fitting.Row] = []
    for i in range(40):  # the gold site is ranked (i % 4) + 1; evidence only weakly tells
        gold_at = i % 4 + 1
        rows += rows_of(f"q{i}", [(0.6 if n >= gold_at else 0.3 + 0.05 * (i % 5), n >= gold_at) for n in range(1, 5)])
    model, schedule = fitting.fit_escalation(rows, max_sites=2.0, schedules=((1, 2, 3, 4),))
    assert model.fit["replayed_sites"] <= 2.0 and model.fit["max_sites"] == 2.0 and model.fit["min_recall"] is None
    wider, _ = fitting.fit_escalation(rows, max_sites=3.0, schedules=((1, 2, 3, 4),))
    assert wider.fit["replayed_recall"] >= model.fit["replayed_recall"]


def test_a_requests_own_top_k_sites_bounds_escalation(gw: Gateway) -> None:
    """DGRAG's top-1 (a client asking for one site) stays one site under escalation."""
    result = ask(gw, calibration(cut=2.0), top_k_sites=1)
    assert rounds(result) == [("routed", ["govt"])] and "top_k_sites" in result.trace.stop_reason


def test_the_calibrate_command_fits_escalation_within_a_sites_budget(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from hansa.cli import main

    rows: list[fitting.Row] = []
    for i in range(40):
        gold_at = i % 4 + 1
        rows += rows_of(f"q{i}", [(0.8 if n >= gold_at else 0.2 + 0.01 * (i % 7), n >= gold_at) for n in range(1, 5)])
    data, out = tmp_path / "rows.jsonl", tmp_path / "cal.json"
    fitting.write_rows(data, rows)
    result = CliRunner().invoke(main, ["--home", str(tmp_path / "home"), "gateway", "calibrate", "--data", str(data),
                                       "--out", str(out), "--max-sites", "2.5", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["fit_rates"]["escalation_sites_per_question"] <= 2.5 and report["escalate"]["max_sites"] == 2.5
    loaded = load_calibration(out)
    assert loaded.escalate is not None and loaded.escalate_schedule == tuple(json.loads(out.read_text())["escalate_schedule"])
    bad = CliRunner().invoke(main, ["--home", str(tmp_path / "home"), "gateway", "calibrate", "--data", str(data),
                                    "--out", str(out), "--max-sites", "0.5"])
    assert bad.exit_code == 2 and "max-sites" in bad.output
