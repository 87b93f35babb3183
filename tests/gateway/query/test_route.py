"""gateway.query.route as pure functions: score_sites + select_sites (DGRAG summary matching turned
into a ranked list of sites), and CORI over published term statistics (which site a question's words
point at)."""
from __future__ import annotations

import numpy as np
import pytest

from hansa.core.errors import InputError
from hansa.gateway.index.summaries import SummaryHit
from hansa.gateway.query.route import (DEFAULT_MARGIN, SECOND_HIT_BONUS, AnswerCoverage, QuestionWords, SiteScore,
                                       accompanied, lexical_scores, score_sites, select_sites)
from hansa.sync.terms import TermSketch, term_keys


def route(hits: list[SummaryHit], top_k: int, active_sites: set[str], min_score: float = 0.0,
          margin: float = DEFAULT_MARGIN) -> list[SiteScore]:
    """The sites to ask, best first: DGRAG's top-k, pruned of clearly weaker sites."""
    return select_sites(score_sites(hits, active_sites, min_score), top_k, margin)


def hit(site: str, summary: str, score: float, richness: int = 1) -> SummaryHit:
    return SummaryHit(site, summary, score, richness)


def test_best_hit_decides_and_second_hit_adds_a_small_bonus() -> None:
    hits = [hit("a", "a1", 0.80), hit("b", "b1", 0.70), hit("b", "b2", 0.65), hit("a", "a2", 0.10)]
    ranked = route(hits, top_k=2, active_sites={"a", "b"})
    assert [s.site_id for s in ranked] == ["a", "b"]
    assert ranked[0].score == pytest.approx(0.80 + SECOND_HIT_BONUS * 0.10)
    assert ranked[1].score == pytest.approx(0.70 + SECOND_HIT_BONUS * 0.65)
    assert ranked[0].summaries == ("a1", "a2") and ranked[1].summaries == ("b1", "b2")


def test_second_hit_breaks_a_near_tie() -> None:
    hits = [hit("a", "a1", 0.70), hit("b", "b1", 0.69), hit("b", "b2", 0.60)]
    assert [s.site_id for s in route(hits, 2, {"a", "b"})] == ["b", "a"]


def test_many_weak_hits_do_not_beat_one_clearly_better_summary() -> None:
    hits = [hit("a", "a1", 0.9)] + [hit("b", f"b{i}", 0.7) for i in range(20)]
    assert route(hits, 1, {"a", "b"})[0].site_id == "a"


def test_inactive_sites_are_ignored_and_top_k_cuts() -> None:
    hits = [hit("revoked", "r1", 0.99), hit("a", "a1", 0.5), hit("b", "b1", 0.4), hit("c", "c1", 0.3)]
    ranked = route(hits, 2, {"a", "b", "c"})
    assert [s.site_id for s in ranked] == ["a", "b"]
    assert [s.site_id for s in score_sites(hits, {"a", "b", "c"})] == ["a", "b", "c"]


def test_sites_with_no_positive_similarity_are_not_routed() -> None:
    hits = [hit("a", "a1", 0.0), hit("b", "b1", -0.3), hit("c", "c1", 0.05)]
    assert [s.site_id for s in route(hits, 3, {"a", "b", "c"})] == ["c"]
    assert route([], 3, {"a"}) == []


def test_ties_break_on_richness_then_id_deterministically() -> None:
    hits = [hit("b", "b1", 0.5, richness=3), hit("a", "a1", 0.5, richness=3), hit("c", "c1", 0.5, richness=9)]
    assert [s.site_id for s in route(hits, 3, {"a", "b", "c"})] == ["c", "a", "b"]
    assert route(list(reversed(hits)), 3, {"a", "b", "c"}) == route(hits, 3, {"a", "b", "c"})


@pytest.mark.parametrize("top_k", [0, -1, True, 1.5])
def test_bad_top_k_is_refused(top_k) -> None:
    with pytest.raises(InputError):
        route([hit("a", "a1", 0.5)], top_k, {"a"})


def test_to_json_carries_the_evidence() -> None:
    (site,) = route([hit("a", "a1", 0.5), hit("a", "a2", 0.4)], 1, {"a"})
    assert site.to_json() == {"site_id": "a", "score": pytest.approx(0.54), "summaries": ["a1", "a2"]}


def test_clearly_weaker_sites_are_not_called_even_within_top_k() -> None:
    hits = [hit("gold", "g1", 0.60), hit("near", "n1", 0.50), hit("far", "f1", 0.15)]
    assert [s.site_id for s in route(hits, 3, {"gold", "near", "far"})] == ["gold", "near"]
    assert [s.site_id for s in route(hits, 3, {"gold", "near", "far"}, margin=1.0)] == ["gold", "near", "far"]
    edge = [hit("gold", "g1", 0.60), hit("edge", "e1", 0.60 - DEFAULT_MARGIN), hit("out", "o1", 0.60 - DEFAULT_MARGIN - 0.01)]
    assert [s.site_id for s in route(edge, 3, {"gold", "edge", "out"})] == ["gold", "edge"]
    assert select_sites([], 3) == []


def test_term_scores_add_to_the_summary_score_and_can_bring_in_a_site_without_hits() -> None:
    hits = [hit("a", "a1", 0.60), hit("b", "b1", 0.55)]
    lexical = {"a": 0.0, "b": 0.02, "c": 0.05, "revoked": 0.9}
    ranked = score_sites(hits, {"a", "b", "c"}, lexical=lexical, lexical_weight=0.3)
    # each site's term score counts as its share of the best routable site's (c's 0.05; revoked is no site)
    assert [s.site_id for s in ranked] == ["b", "a", "c"]
    assert ranked[0].score == pytest.approx(0.55 + SECOND_HIT_BONUS * 0 + 0.3 * 0.02 / 0.05) and ranked[0].lexical == 0.02
    assert ranked[2].score == pytest.approx(0.3) and ranked[2].summaries == ()
    assert ranked[0].to_json()["lexical"] == 0.02
    # the same shares whatever the scale of the question's CORI scores
    scaled = score_sites(hits, {"a", "b", "c"}, lexical={k: 7 * v for k, v in lexical.items()}, lexical_weight=0.3)
    assert [(s.site_id, round(s.score, 9)) for s in scaled] == [(s.site_id, round(s.score, 9)) for s in ranked]
    # weight 0: the summaries alone, as before term statistics existed
    alone = score_sites(hits, {"a", "b", "c"}, lexical=lexical, lexical_weight=0.0)
    assert [s.site_id for s in alone] == ["a", "b"] and "lexical" not in alone[0].to_json()
    # no site uses any of the question's words: nothing changes
    none = score_sites(hits, {"a", "b", "c"}, lexical={"a": 0.0, "b": 0.0}, lexical_weight=0.3)
    assert [(s.site_id, s.score) for s in none] == [(s.site_id, s.score) for s in alone]


def test_the_site_prior_is_each_called_sites_routing_share() -> None:
    """Routing.site_prior: 1 - w + w x score / best called score; unscored called sites get the floor."""
    import numpy as np

    from hansa.gateway.query.route import Routing

    considered = [SiteScore("a", 0.8, ("s1",), 1), SiteScore("b", 0.4, ("s2",), 1), SiteScore("c", -0.1, (), 0)]
    routing = Routing(np.zeros(4, np.float32), [], considered, ["a", "b"], [], "explicit", 0.0, 0.0)
    assert routing.site_prior(["a", "b", "c", "d"], 0.5) == {"a": 1.0, "b": 0.75, "c": 0.5, "d": 0.5}
    assert routing.site_prior(["b"], 0.5) == {"b": 1.0}  # the best *called* site is the reference
    assert routing.site_prior(["a", "b"], 0.0) is None
    assert routing.site_prior(["c", "d"], 0.5) is None  # nothing called scored above 0: no prior


def test_the_deficit_says_how_far_the_asked_trail_the_leader_where_the_gap_cannot() -> None:
    """Routing.behind_leader among the asked (the deficit) and outside them (the trailing gap), for
    an origin asked alone: a close second and a distant last both leave the leader unasked (gap 0);
    only the deficit tells them apart."""
    import numpy as np

    from hansa.gateway.query.route import Routing

    considered = [SiteScore("a", 0.8, ("s1",), 1), SiteScore("b", 0.75, ("s2",), 1), SiteScore("c", 0.2, (), 0)]
    routing = Routing(np.zeros(4, np.float32), [], considered, ["b"], [], "explicit", 0.0, 0.0)
    assert routing.behind_leader({"b"}, among=False) == routing.behind_leader({"c"}, among=False) == 0.0
    assert routing.behind_leader({"b"}, among=True) == pytest.approx(0.05)
    assert routing.behind_leader({"c"}, among=True) == pytest.approx(0.6)
    # the leader asked
    assert routing.behind_leader({"a"}, among=True) == 0.0 and routing.behind_leader({"b", "a"}, among=True) == 0.0
    assert routing.behind_leader({"unranked"}, among=True) == 0.8  # routing ranked none asked: the leader's whole score
    empty = Routing(np.zeros(4, np.float32), [], [], [], [], "routed", 0.0, 0.0)
    assert empty.behind_leader({"a"}, among=True) == 0.0


# -- CORI over published term statistics ----------------------------------------------------

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


def hog_sketch(words: str, df: int, extra_words: int) -> TermSketch:
    """A hand-made sketch (what a routing hog signs): every question word at `df` documents, padded with
    `extra_words` more words to inflate its collection word count."""
    keys = np.unique(np.concatenate([term_keys(words), np.arange(1, extra_words + 1, dtype=np.uint32) * 7919]))
    return TermSketch(documents=df, min_documents=1, keys=keys, dfs=np.full(len(keys), df, dtype=np.uint16))


def test_one_sites_claimed_size_cannot_move_any_other_sites_score() -> None:
    """CORI normalises each site by the *median* collection size (issue 32): a hog inflating its own
    word count changes its own score, never the honest sites' (with the mean, its claim would raise
    or lower every other site's)."""
    question = term_keys("When did the Normans win at Hastings in 1066?")
    honest = {**{k: v for k, v in SITES.items() if k != "empty"}, "science": site("Oxygen was isolated in 1774.",
                                                                                   "Priestley and Scheele.")}
    small = lexical_scores(question, {**honest, "hog": hog_sketch("normans hastings 1066 win", 4000, 100)})
    huge = lexical_scores(question, {**honest, "hog": hog_sketch("normans hastings 1066 win", 4000, 50_000)})
    for name in honest:
        assert small[name] == pytest.approx(huge[name]), name
    assert small["history"] > 0 and huge["hog"] != small["hog"]


def test_a_leader_without_standing_is_asked_beside_the_best_ranked_site_with_standing() -> None:
    ranked = [SiteScore(s, 1.0 - i / 10, (), 0) for i, s in enumerate(["new", "other-new", "a", "b"])]
    assert accompanied(["new"], ranked, 5, {"new", "other-new"}) == ["new", "a"]
    assert accompanied(["new", "other-new"], ranked, 5, {"new", "other-new"}) == ["new", "other-new", "a"]
    assert accompanied(["new"], ranked, 5, {"new", "other-new", "a", "b"}) == ["new", "other-new"]  # none has it
    assert accompanied(["new", "other-new"], ranked, 5, {"new", "other-new", "a", "b"}) == ["new", "other-new"]
    assert accompanied(["new", "a"], ranked, 5, {"new"}) == ["new", "a"]  # one with standing is asked
    assert accompanied(["a"], ranked, 5, {"new"}) == ["a"]
    assert accompanied(["new"], ranked, 1, {"new"}) == ["new"]  # a client's top_k_sites holds
    assert accompanied(["new"], ranked, 5, None) == ["new"] and accompanied([], ranked, 5, {"new"}) == []
