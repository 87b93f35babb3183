"""Metrics against values worked out by hand (SQuAD's official normalization and F1 definition)."""
from __future__ import annotations

import pytest

from hansa.evaluation import metrics as m


def test_normalization_drops_case_punctuation_articles_and_extra_space() -> None:
    assert m.normalize_answer("The  Denver Broncos!") == "denver broncos"
    assert m.normalize_answer("an apple, a day") == "apple day"


def test_squad_token_f1_and_exact_match_known_values() -> None:
    # SQuAD dev question 56be4db0acb8001400a502ec: references "Denver Broncos" (x3)
    refs = ["Denver Broncos", "Denver Broncos", "Denver Broncos"]
    assert m.token_f1("the Denver Broncos", refs) == 1.0
    assert m.exact_match("the Denver Broncos", refs) == 1.0
    # 2 shared tokens, precision 2/3, recall 1 -> F1 = 0.8
    assert m.token_f1("Denver Broncos won", refs) == pytest.approx(0.8)
    assert m.exact_match("Denver Broncos won", refs) == 0.0
    # best over references: "Santa Clara, California" vs "Levi's Stadium" for "Levi's Stadium in Santa Clara"
    # pred tokens: levis stadium in santa clara (5); vs "santa clara california" (3): 2 shared -> P 2/5, R 2/3
    assert m.token_f1("Levi's Stadium in Santa Clara", ["Santa Clara, California"]) == pytest.approx(0.5)
    assert m.token_f1("Levi's Stadium in Santa Clara", ["Santa Clara, California", "Levi's Stadium"]) == pytest.approx(4 / 7)
    assert m.token_f1("anything", []) == 0.0 and m.token_f1("", ["x"]) == 0.0


def test_contains_answer_needs_whole_tokens() -> None:
    answer = "Super Bowl 50 was won by the Denver Broncos [1], who beat Carolina."
    text = m.answer_text(answer)
    assert "[1]" not in text
    assert m.contains_answer(text, ["Denver Broncos"]) == 1.0
    assert m.contains_answer(text, ["Broncos Carolina"]) == 0.0
    assert m.contains_answer("Denverite", ["Denver"]) == 0.0
    assert m.contains_answer(text, [""]) == 0.0


def test_rouge_l_is_the_best_over_references_and_zero_without() -> None:
    # LCS("a cat sat down", "the cat sat") = "cat sat": P 2/4, R 2/3 -> F = 4/7
    assert m.rouge_l("a cat sat down", ["the cat sat"]) == pytest.approx(4 / 7)
    assert m.rouge_l("a cat sat down", ["dogs bark", "a cat sat down"]) == pytest.approx(1.0)
    assert m.rouge_l("a cat sat down", []) == 0.0


@pytest.mark.parametrize("response, expected", [
    ({"answer": "No answer: the sites that answered found nothing relevant.", "citations": [{"score": 0.3}]}, True),
    ({"answer": "Paris is the capital [1].", "citations": []}, True),
    ({"answer": "", "citations": [{"score": 0.9}]}, True),
    ({"answer": "Paris is the capital [1].", "citations": [{"score": 0.9}]}, False),
    ({"answer": "Paris [1].", "citations": [{"score": 0.9}], "abstained": True}, True),
    ({"answer": "No answer: nothing.", "citations": [], "abstained": False}, False),
])
def test_abstention_prefers_the_explicit_flag(response: dict, expected: bool) -> None:
    assert m.abstained(response) is expected


def test_confidence_is_explicit_or_the_best_citation_score() -> None:
    assert m.confidence({"citations": [{"score": 0.2}, {"score": 0.7}]}) == 0.7
    assert m.confidence({"confidence": 0.1, "citations": [{"score": 0.7}]}) == 0.1
    assert m.confidence({"citations": []}) == 0.0


def test_routing_and_evidence_metrics() -> None:
    assert m.gold_site_recall(["a", "b"], ["b", "c"]) == 0.5
    assert m.all_gold_sites_called(["a", "b"], ["b", "c"]) == 0.0
    assert m.all_gold_sites_called(["a", "b", "c"], ["b", "c"]) == 1.0
    assert m.all_gold_sites_called(["a"], []) == 0.0
    docs = [f"d{i}" for i in range(12)]
    assert m.evidence_recall_at(docs, ["d3", "d11"], 10) == 0.5
    assert m.reciprocal_rank(docs, ["d3", "d11"]) == 0.25
    assert m.reciprocal_rank(docs, ["zz"]) == 0.0
    assert m.recall_at_k_curve(["x", "b", "a"], ["a", "b"], 3) == [0.0, 0.5, 1.0]


def test_risk_coverage_and_aurc() -> None:
    # confidences rank two right answers above two wrong ones
    rc = m.risk_coverage([0.9, 0.8, 0.2, 0.1], [True, True, False, False], points=4)
    assert rc["coverage"] == [0.25, 0.5, 0.75, 1.0]
    assert rc["risk"] == [0.0, 0.0, pytest.approx(1 / 3, abs=1e-4), 0.5]
    assert rc["aurc"] == pytest.approx((0 + 0 + 1 / 3 + 0.5) / 4, abs=1e-4)
    worst = m.risk_coverage([0.1, 0.2, 0.8, 0.9], [True, True, False, False], points=4)
    assert worst["aurc"] > rc["aurc"]
    assert m.risk_coverage([], [])["aurc"] is None


def test_auroc_separates_answerable_from_unanswerable() -> None:
    assert m.auroc([0.9, 0.8, 0.2, 0.1], [True, True, False, False]) == 1.0
    assert m.auroc([0.1, 0.2, 0.8, 0.9], [True, True, False, False]) == 0.0
    assert m.auroc([0.5, 0.5], [True, True]) is None
    assert m.auroc([0.5, 0.5, 0.7, 0.1], [True, False, True, False]) == 0.875  # a tie counts half


def test_auroc_is_scikit_learns_on_random_scores_with_ties() -> None:
    """hansa computes AUROC in numpy (no scikit-learn in the default install); scikit-learn, a test
    dependency, is the reference."""
    import numpy as np
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(3)
    for n in (3, 40, 400):
        for _ in range(20):
            scores = np.round(rng.random(n), 1)  # coarse: many ties
            labels = rng.random(n) < 0.3
            if labels.all() or not labels.any():
                continue
            assert m.auroc(scores, labels) == round(float(roc_auc_score(labels, scores)), 4)
