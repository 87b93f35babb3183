"""CORI over published term statistics (gateway.query.route): which site a question's words point at."""
from __future__ import annotations

import numpy as np
import pytest

from hansa.gateway.query.route import AnswerCoverage, QuestionWords, lexical_scores
from hansa.sync.terms import TermSketch, term_keys


def site(*docs: str, min_documents: int = 1) -> TermSketch:
    return TermSketch.from_documents([(f"d{i}", t) for i, t in enumerate(docs)], min_documents)


SITES = {
    "history": site("The Normans conquered England in 1066.", "Normandy and the Normans.", "The battle of Hastings."),
    "music": site("Beyoncé released Dangerously in Love.", "Destiny's Child sold records.", "England tour dates."),
    "empty": site(),
}


def test_the_site_using_the_rare_words_ranks_first() -> None:
    scores = lexical_scores(term_keys("When did the Normans win at Hastings?"), SITES)
    assert scores["history"] > scores["music"] == 0.0
    scores = lexical_scores(term_keys("Which album did Beyoncé release?"), SITES)
    assert scores["music"] > scores["history"]


def test_a_word_every_site_uses_weighs_less_than_one_only_one_uses() -> None:
    shared = lexical_scores(term_keys("england"), SITES)
    rare = lexical_scores(term_keys("hastings"), SITES)
    assert 0 < shared["history"] < rare["history"]


def test_words_no_site_uses_and_empty_inputs_say_nothing() -> None:
    assert lexical_scores(term_keys("zzzyx qqqwert"), SITES) == {"history": 0.0, "music": 0.0}
    assert lexical_scores(np.zeros(0, dtype=np.uint32), SITES) == {}
    assert lexical_scores(term_keys("normans"), {}) == {}
    assert "empty" not in lexical_scores(term_keys("normans"), SITES)


def test_a_bigger_site_needs_more_documents_to_score_the_same() -> None:
    small = site("normans", "other words")
    big = site("normans", *[f"filler{i} words{i}" for i in range(200)])
    scores = lexical_scores(term_keys("normans"), {"small": small, "big": big})
    assert scores["small"] > scores["big"] > 0


# -- AnswerCoverage: how much of the question a site's answer uses --------------------------------

def test_an_answer_using_the_rare_words_covers_more_than_one_using_the_common_ones() -> None:
    cover = AnswerCoverage.weighing(QuestionWords.of("Was Hastings in England?", SITES), 0.5)
    assert cover is not None
    rare = cover.words.share(["The battle of Hastings."])  # one document of the federation uses "hastings"
    common = cover.words.share(["England tour dates."])  # two use "england"
    assert 0.0 < common < rare < 1.0 and rare + common == pytest.approx(1.0)
    assert cover.words.share(["Hastings, England."]) == 1.0 and cover.words.share(["Nothing relevant here."]) == 0.0
    assert cover.factor(["Nothing relevant here."]) == 0.5 and cover.factor(["Hastings, England."]) == 1.0


def test_without_term_statistics_every_word_weighs_the_same_and_weight_0_is_no_coverage() -> None:
    cover = AnswerCoverage.weighing(QuestionWords.of("normans hastings", {}), 1.0)
    assert cover is not None and cover.words.share(["The Normans."]) == 0.5
    assert AnswerCoverage.weighing(QuestionWords.of("normans", SITES), 0.0) is None
    assert AnswerCoverage.weighing(QuestionWords.of("what is it?", SITES), 0.5) is None  # no word worth looking for
