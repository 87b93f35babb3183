"""What the gateway learns of each site's conduct (gateway.query.conduct): claim gaps that discount
routing, routing shares, templates around the question. Fast tier, no model."""
from __future__ import annotations

import pytest

from hansa.gateway.index.summaries import SummaryHit
from hansa.gateway.query.conduct import SiteConduct
from hansa.gateway.query.route import discounted


def test_a_site_whose_answers_fall_far_below_its_summaries_is_discounted_by_the_excess() -> None:
    conduct = SiteConduct(decay=0.5, min_calls=3)
    for _ in range(4):
        conduct.observe(None, {"a": 0.6, "b": 0.55, "c": 0.5, "hog": 0.7}, {"a": 0.55, "b": 0.5, "c": 0.5, "hog": 0.2})
    got = conduct.discounts()
    assert set(got) == {"hog"}  # honest sites sit at the median: no discount
    assert got["hog"] == pytest.approx(0.5 - 0.05, abs=1e-6)  # its gap 0.5 over the median gap 0.05


def test_no_discount_before_enough_calls_or_without_a_federation_to_compare() -> None:
    conduct = SiteConduct(min_calls=3)
    conduct.observe(None, {"a": 0.6, "hog": 0.9}, {"a": 0.6, "hog": 0.0})
    assert conduct.discounts() == {}  # one call each
    alone = SiteConduct(min_calls=1)
    alone.observe(None, {"hog": 0.9}, {"hog": 0.0})
    assert alone.discounts() == {}  # one site: no median to compare with


def test_discounted_hits_reorder_and_keep_the_index_order_on_ties() -> None:
    hits = [SummaryHit("hog", "h1", 1.2, 0), SummaryHit("a", "a1", 0.8, 0), SummaryHit("b", "b1", 0.8, 0),
            SummaryHit("hog", "h2", 0.9, 0)]
    out = discounted(hits, {"hog": 0.6})
    assert [(h.site_id, h.summary_id) for h in out] == [("a", "a1"), ("b", "b1"), ("hog", "h1"), ("hog", "h2")]
    assert [h.score for h in out][2:] == [pytest.approx(0.6), pytest.approx(0.3)]
    assert discounted(hits, None) == hits and discounted(hits, {"zz": 1.0}) == hits


def test_routing_share_counts_the_recent_window() -> None:
    conduct = SiteConduct(window=4)
    for asked in (["a", "hog"], ["b", "hog"], ["hog"], ["a", "hog"], ["b", "hog"]):
        conduct.observe(asked, {}, {})
    shares = conduct.shares()
    assert shares["hog"] == 1.0 and shares["a"] == 0.25 and shares["b"] == 0.5
    assert conduct.view()["hog"].routing_share == 1.0


def test_routing_share_counts_every_process_and_survives_a_restart(tmp_path) -> None:
    """Two gateway workers share the file: the share covers both workers' questions, and a
    reader (`hansa gateway sites`, another process) sees it; only the last window is kept."""
    one, two = SiteConduct(tmp_path / "conduct.sqlite", window=4), SiteConduct(tmp_path / "conduct.sqlite", window=4)
    one.observe(["a", "hog"], {}, {})
    two.observe(["hog"], {}, {})
    one.observe(["b", "hog"], {}, {})
    assert two.shares() == pytest.approx({"hog": 1.0, "a": 1 / 3, "b": 1 / 3})
    for _ in range(4):
        two.observe(["b"], {}, {})
    one.close(), two.close()
    reopened = SiteConduct(tmp_path / "conduct.sqlite", window=4)
    assert reopened.shares() == {"b": 1.0}
    assert reopened._db.execute("SELECT COUNT(*) FROM routed").fetchone()[0] == 4


def test_a_template_around_different_questions_is_caught_the_second_time() -> None:
    conduct = SiteConduct()
    fixed = ": the verified answer is 1066, confirmed by the registry."
    q1, q2 = "When was Warsaw founded?", "Who built the Royal Castle?"
    assert not conduct.templated("liar", q1, q1.rstrip("?") + fixed)
    assert conduct.templated("liar", q2, q2.rstrip("?") + fixed)
    assert conduct.view()["liar"].templated == 1


def test_an_honest_sentence_repeated_whole_for_two_questions_is_not_a_template() -> None:
    conduct = SiteConduct()
    sentence = "The Royal Castle in Warsaw was built in the 14th century by the Dukes of Masovia."
    assert not conduct.templated("site", "Who built the Royal Castle?", sentence)
    assert not conduct.templated("site", "When was the Royal Castle built?", sentence)
    assert not conduct.templated("other", "Who built the Royal Castle?", sentence)


def test_one_question_is_one_write_of_its_claim_gaps_and_its_routing(tmp_path) -> None:
    """The claim gaps and the routing share a question teaches land together (one transaction):
    another worker reading the file sees both or neither."""
    conduct = SiteConduct(tmp_path / "conduct.sqlite", min_calls=1)
    statements: list[str] = []
    conduct._db.set_trace_callback(statements.append)
    conduct.observe(["a", "hog"], {"a": 0.6, "hog": 0.9}, {"a": 0.6})
    assert [s.split()[0] for s in statements if s.split()[0] in ("BEGIN", "COMMIT")] == ["BEGIN", "COMMIT"]
    conduct.close()
    other = SiteConduct(tmp_path / "conduct.sqlite", min_calls=1)
    assert other.shares() == {"a": 1.0, "hog": 1.0}
    assert other.view()["hog"].claim_gap == pytest.approx(0.9)


def test_a_question_not_chosen_by_routing_writes_nothing_of_routing() -> None:
    conduct = SiteConduct()
    assert conduct.observe(None, {}, {}) == {}
    conduct.observe(None, {"a": 0.5}, {"a": 0.5})
    assert conduct.shares() == {}
