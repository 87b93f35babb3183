"""The report's per-strategy record, on outcomes written by hand (no federation needed)."""
from __future__ import annotations

from hansa.evaluation.datasets import Question
from hansa.evaluation.report import summarize
from hansa.evaluation.runner import Outcome


def _asked(qid: str, gold_sites: list[str], asked: list[str], kind: str = "", escalated: bool | None = None) -> Outcome:
    q = Question(qid, f"question {qid}?", gold=tuple(f"{s}-doc" for s in gold_sites))
    return Outcome(strategy="gated", question=q, gold_sites=gold_sites, asked_sites=asked,
                   ranked_docs=[f"{s}-doc" for s in asked], answer="an answer [1]", abstained=False,
                   confidence=0.5, bytes=100, gateway_ms=1.0, e2e_ms=2.0, origin_kind=kind, escalated=escalated)


def test_spanning_questions_and_in_domain_escalation_are_reported_by_where_the_evidence_lies() -> None:
    outcomes = [
        # one gold site, answered at the origin: no escalation needed
        _asked("1", ["a"], ["a"], "in", escalated=False),
        # one gold site, escalated: a cost
        _asked("2", ["b"], ["b", "c"], "in", escalated=True),
        # evidence at two sites: escalated and both asked
        _asked("3", ["a", "b"], ["a", "b"], "in", escalated=True),
        # evidence at two sites: kept at the origin, one gold site never asked
        _asked("4", ["c", "d"], ["c"], "in", escalated=False),
        # out-of-domain asks count only for escalation_out_of_domain
        _asked("1", ["a"], ["d", "a"], "out", escalated=True),
        _asked("3", ["a", "b"], ["c"], "out", escalated=False),
    ]
    record = summarize("mtrag", "report", 4, outcomes, passages_total=8)
    assert record["spanning_questions"] == 2
    assert record["all_gold_sites_called_spanning"] == 0.5
    assert record["all_gold_sites_called"] == 0.75
    assert record["escalation_in_domain"] == 0.5
    assert record["escalation_in_domain_one_site"] == 0.5
    assert record["escalation_in_domain_spanning"] == 0.5
    assert record["escalation_out_of_domain"] == 0.5


def test_without_spanning_questions_the_spanning_figures_are_absent_not_zero() -> None:
    record = summarize("squad", "report", 4, [_asked("1", ["a"], ["a"]), _asked("2", ["b"], ["a"])], passages_total=4)
    assert record["spanning_questions"] == 0
    assert record["all_gold_sites_called_spanning"] is None
    assert record["escalation_in_domain_spanning"] is None and record["escalation_in_domain_one_site"] is None


def test_the_budget_curve_orders_refines_budget_points_cheapest_first_and_ends_without_a_budget() -> None:
    from dataclasses import replace

    from hansa.evaluation.report import budget_curve, records_of
    from hansa.evaluation.runner import FederationRun

    def asked(strategy: str, budget: dict[str, int], qid: str, gold: list[str], sites: list[str]) -> Outcome:
        return replace(_asked(qid, gold, sites), strategy=strategy, budget=budget, router="TieredRouter")

    outcomes = [
        # two sites allowed: one of q2's two gold sites asked
        asked("refine[sites=2]", {"sites": 2}, "1", ["a"], ["a", "b"]),
        asked("refine[sites=2]", {"sites": 2}, "2", ["a", "c"], ["a", "b"]),
        # one site allowed
        asked("refine[sites=1]", {"sites": 1}, "1", ["a"], ["a"]),
        asked("refine[sites=1]", {"sites": 1}, "2", ["a", "c"], ["b"]),
        # no budget: everything gold asked, at the most sites
        asked("refine", {}, "1", ["a"], ["a", "b", "c"]),
        asked("refine", {}, "2", ["a", "c"], ["a", "b", "c"]),
        asked("hansa", {}, "1", ["a"], ["a"]),
    ]
    run = FederationRun(4, outcomes, {"passages_total": 8})
    records = records_of("mtrag", "report", [run])
    by_strategy = {r["strategy"]: r for r in records}
    assert by_strategy["refine[sites=1]"]["budget"] == {"sites": 1} and by_strategy["refine"]["budget"] is None
    assert by_strategy["refine"]["router"] == "TieredRouter"
    curve = budget_curve(records)
    assert list(curve) == ["fed4:sites"]
    points = curve["fed4:sites"]
    assert [p["budget"] for p in points] == [{"sites": 1}, {"sites": 2}, None]
    assert [p["sites_called_per_query"] for p in points] == [1.0, 2.0, 3.0]
    assert [p["all_gold_sites_called_spanning"] for p in points] == [0.0, 0.0, 1.0]
    assert [p["gold_site_recall"] for p in points] == [0.5, 0.75, 1.0]
    assert budget_curve([by_strategy["hansa"], by_strategy["refine"]]) == {}  # no budget point: no curve


def test_budget_points_become_refine_strategies_and_bad_ones_are_refused_before_any_build() -> None:
    import pytest

    from hansa.core.errors import InputError
    from hansa.evaluation.runner import budget_strategies

    assert budget_strategies([("sites", 2), ("time_ms", 500)]) == {"refine[sites=2]": {"sites": 2},
                                                                   "refine[time_ms=500]": {"time_ms": 500}}
    for bad in ([("sites", 0)], [("coins", 3)], [("sites", 10**9)]):
        with pytest.raises(InputError, match="budget"):
            budget_strategies(bad)


def test_a_site_asked_again_counts_once_as_a_site_called_and_twice_as_a_call() -> None:
    """A Depth round re-asks a HIGH site: the sites-called figure (the routing targets' "calling at
    most N% of sites") counts distinct sites, site_calls_per_query every call."""
    from hansa.evaluation.report import records_of
    from hansa.evaluation.runner import FederationRun, outcome_of

    q = Question("1", "question 1?", gold=("a-doc",))
    response = {"answer": "x", "citations": [{"doc_id": "a-doc"}],
                "trace": {"per_site": [{"site_id": "a", "status": "ok"}, {"site_id": "b", "status": "ok"},
                                       {"site_id": "a", "status": "ok"}],
                          "budget": {"given": {"sites": 2}}, "router": {"name": "TieredRouter"}}}
    o = outcome_of("refine[sites=2]", q, ["a"], response, 5.0)
    assert o.asked_sites == ["a", "b"] and o.site_calls == 3 and o.budget == {"sites": 2}
    record = records_of("mtrag", "report", [FederationRun(4, [o], {"passages_total": 8})])[0]
    assert record["sites_called_per_query"] == 2 and record["site_calls_per_query"] == 3
