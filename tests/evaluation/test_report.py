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
