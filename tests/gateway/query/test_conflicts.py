"""conflicts.resolve: contradictions between sites' statements, found and settled by weight.
Sentences from SQuAD v1.1 (CC BY-SA 4.0), one value changed in the copy another site holds."""
from __future__ import annotations

import json

from hansa.gateway.query.claims import extract_claims
from hansa.gateway.query.conflicts import DOC_SUPPORT, Statement, resolve

# squad:University_of_Notre_Dame#000
LOURDES = ("It is a replica of the grotto at Lourdes, France where the Virgin Mary reputedly appeared to Saint "
           "Bernadette Soubirous in 1858.")
# squad:Napoleon#057
ELBA = ("In the Treaty of Fontainebleau, the Allies exiled him to Elba, an island of 12,000 inhabitants in the "
        "Mediterranean, 20 km (12 mi) off the Tuscan coast.")
# squad:Israel#050
BAHAI = "Bahá'í staff in Israel do not teach their faith to Israelis following strict policy."


def st(key: int, site: str, text: str, weight: float = 0.5, doc: str = "doc") -> Statement:
    return Statement(key, site, doc, text, weight, extract_claims(text))


def test_a_changed_year_is_a_conflict_and_the_majority_wins() -> None:
    liar = LOURDES.replace("1858", "1878")
    res = resolve([st(0, "a", LOURDES), st(1, "b", LOURDES), st(2, "c", liar, weight=0.7)])
    (conflict,) = res.conflicts
    assert conflict.kind == "date"
    assert conflict.winner.value == "1858" and conflict.winner.sites == ("a", "b")
    assert [s.value for s in conflict.sides] == ["1858", "1878"] and not conflict.sides[1].won
    assert conflict.sides[1].sites == ("c",) and conflict.sides[1].documents == (("c", "doc"),)
    assert "2 against 1" in conflict.reason
    assert res.rejected == {2}
    assert res.won == {"a": 1, "b": 1} and res.lost == {"c": 1}
    doc = conflict.to_json()
    assert json.loads(json.dumps(doc)) == doc
    assert doc["winner"] == "1858" and doc["sides"][0]["weight"] == 1.0
    assert "1858" in conflict.summary() and "disagree" in conflict.summary()


def test_weight_decides_between_equally_many_sites() -> None:
    liar = LOURDES.replace("Saint Bernadette Soubirous", "Saint Catherine Laboure")
    res = resolve([st(0, "honest", LOURDES, weight=0.8), st(1, "liar", liar, weight=0.3)])
    (conflict,) = res.conflicts
    assert conflict.kind == "entity" and conflict.winner.sites == ("honest",)
    assert "0.80 against 0.30" in conflict.reason
    res = resolve([st(0, "honest", LOURDES, weight=0.2), st(1, "liar", liar, weight=0.3)])
    assert res.conflicts[0].winner.sites == ("liar",)  # weights, not labels, decide
    assert res.won == {} and res.lost == {}  # one site against one: nothing learned about either


def test_two_cities_census_boilerplate_teaches_no_site_anything() -> None:
    """Seen on SQuAD's 16 sites: two articles' census sentences share a frame, so their areas are read
    as one disputed slot; settled by weight, it must not cost either site reliability."""
    # shortened from the two sentences seen in the run (SQuAD v1.1, CC BY-SA 4.0)
    one = "According to the United States Census Bureau, the city has a total area of 28.70 square miles."
    two = "According to the United States Census Bureau, the city has a total area of 62 square miles."
    res = resolve([st(0, "s07", one, weight=0.19, doc="city-a"), st(1, "s14", two, weight=0.14, doc="city-b")])
    assert res.conflicts and res.won == {} and res.lost == {}
    # a third site stating the winner's value makes it a majority: now the lone site learns it lost
    res = resolve([st(0, "s07", one, weight=0.19, doc="city-a"), st(1, "s02", one, weight=0.1, doc="city-a-copy"),
                   st(2, "s14", two, weight=0.14, doc="city-b")])
    assert res.lost == {"s14": 1} and res.won == {"s02": 1, "s07": 1}


def test_one_site_copying_a_claim_into_many_documents_does_not_outvote_two_sites() -> None:
    liar = ELBA.replace("12,000 inhabitants", "30,000 inhabitants")
    statements = [st(0, "a", ELBA), st(1, "b", ELBA)] + [st(2 + i, "spam", liar, doc=f"d{i}") for i in range(3)]
    (conflict,) = resolve(statements).conflicts
    assert conflict.winner.sites == ("a", "b")
    assert conflict.sides[1].weight == 0.5 + DOC_SUPPORT * 2 * 0.5


def test_only_the_changed_value_is_disputed() -> None:
    """Three numbers in one sentence, one changed: one conflict (km), the others agree."""
    liar = ELBA.replace("20 km", "35 km")
    res = resolve([st(0, "a", ELBA), st(1, "b", liar)])
    (conflict,) = res.conflicts
    assert {s.value for s in conflict.sides} == {"20 km", "35 km"}
    assert res.agreeing_sites == {0: {"b"}, 1: {"a"}}


def test_negation_is_a_contradiction() -> None:
    positive = BAHAI.replace("do not teach", "teach")
    res = resolve([st(0, "a", BAHAI, 0.6), st(1, "b", BAHAI, 0.5), st(2, "c", positive, 0.9)])
    (conflict,) = res.conflicts
    assert conflict.kind == "polarity" and conflict.winner.value == "no" and res.rejected == {2}


def test_unrelated_sentences_and_identical_copies_raise_nothing() -> None:
    res = resolve([st(0, "a", LOURDES), st(1, "b", ELBA), st(2, "c", LOURDES), st(3, "d", BAHAI)])
    assert res.conflicts == () and res.rejected == frozenset()
    assert res.agreeing_sites[0] == {"c"}


def test_related_sentences_about_different_things_are_not_disputes() -> None:
    """Same article, different facts (squad:Napoleon): different years of different events."""
    a = "Napoleon was crowned Emperor of the French in 1804 at Notre-Dame de Paris."
    b = "Napoleon was exiled to the island of Saint Helena in 1815 by the British."
    assert resolve([st(0, "a", a), st(1, "b", b)]).conflicts == ()


def test_one_source_against_one_of_nearly_equal_weight_is_left_unresolved() -> None:
    liar = LOURDES.replace("1858", "1878")
    res = resolve([st(0, "a", LOURDES, weight=0.50), st(1, "b", liar, weight=0.45)])
    (conflict,) = res.conflicts
    assert conflict.unresolved and res.rejected == frozenset()  # both sentences stay
    assert "unresolved" in conflict.reason and "0.50 against 0.45" in conflict.reason
    assert conflict.summary() == "Sources disagree, unresolved: 1858 (a) / 1878 (b)."
    assert conflict.to_json()["winner"] is None and conflict.to_json()["unresolved"] is True
    assert res.won == {} and res.lost == {}
    clear = resolve([st(0, "a", LOURDES, weight=0.50), st(1, "b", liar, weight=0.30)])  # 0.6 of it: kept
    assert not clear.conflicts[0].unresolved and clear.rejected == {1}
