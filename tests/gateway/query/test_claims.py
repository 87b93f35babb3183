"""claims.extract_claims / agree on real sentences: SQuAD v1.1 paragraphs (CC BY-SA 4.0, Rajpurkar
et al. 2016; /work/shared/datasets/squad), quoted here so the test runs without the data folder."""
from __future__ import annotations

import pytest

from hansa.gateway.query.claims import DATE, ENTITY, NUMBER, POLARITY, agree, comparable, extract_claims

# squad:Napoleon#057
ELBA = ("In the Treaty of Fontainebleau, the Allies exiled him to Elba, an island of 12,000 inhabitants in the "
        "Mediterranean, 20 km (12 mi) off the Tuscan coast.")
# squad:Beyoncé#055
PEPSI = "In 2012, Beyoncé signed a $50 million deal to endorse Pepsi."
# squad:Bern#015
BERN = "Bern has an area, as of 2009[update], of 51.62 square kilometers (19.93 sq mi)."
# squad:Black_Death#010
PLAGUE = ("In October 2010, the open-access scientific journal PLoS Pathogens published a paper by a multinational "
          "team who undertook a new investigation into the role of Yersinia pestis in the Black Death following the "
          "disputed identification by Drancourt and Raoult in 1998.")
# squad:Israel#050
BAHAI = "Bahá'í staff in Israel do not teach their faith to Israelis following strict policy."


def by_kind(sentence: str, kind: str) -> list:
    return [c for c in extract_claims(sentence) if c.kind == kind]


def test_numbers_keep_their_units_and_scale() -> None:
    values = {c.value: c.norm for c in by_kind(ELBA, NUMBER)}
    assert values == {"12,000 inhabitants": (12000.0, "people"), "20 km": (20.0, "km"), "12 mi": (12.0, "miles")}
    (deal,) = by_kind(PEPSI, NUMBER)
    assert deal.norm == (50_000_000.0, "usd")
    assert {c.norm for c in by_kind(BERN, NUMBER)} == {(51.62, "sq km"), (19.93, "sq miles")}


def test_dates_and_years_at_the_precision_stated() -> None:
    assert [c.norm for c in by_kind(PLAGUE, DATE)] == [(2010, 10, 0), (1998, 0, 0)]
    assert [c.norm for c in by_kind(PEPSI, DATE)] == [(2012, 0, 0)]
    (full,) = by_kind("The treaty was signed on 3 March 1918 at Brest-Litovsk.", DATE)
    assert full.norm == (1918, 3, 3)
    (iso,) = by_kind("The release is dated 2021-07-15.", DATE)
    assert iso.norm == (2021, 7, 15)


def test_named_entities_and_the_subject() -> None:
    names = [c.value for c in by_kind(PLAGUE, ENTITY)]
    assert {"PLoS Pathogens", "Black Death", "Drancourt", "Raoult"} <= set(names)
    assert "October" not in names  # a month is part of a date, not a name
    (pepsi,) = [c for c in by_kind(PEPSI, ENTITY) if c.value == "Pepsi"]
    assert pepsi.subject == "beyoncé"
    assert "endorse" in pepsi.context and "deal" in pepsi.context


def test_polarity_and_negation() -> None:
    (neg,) = by_kind(BAHAI, POLARITY)
    assert neg.value == "no" and neg.norm is False
    (pos,) = by_kind(BAHAI.replace("do not teach", "teach"), POLARITY)
    assert pos.norm is True
    assert neg.frame == pos.frame  # the same statement, negated: the frame ignores the negation
    (contracted,) = by_kind("The museum isn't open on Mondays.", POLARITY)
    assert contracted.norm is False


def test_quantities_stay_out_of_frames_and_contexts() -> None:
    """A changed number must leave the rest of the sentence's claims as they were."""
    original = {(c.kind, c.frame, c.context) for c in extract_claims(ELBA) if c.kind != NUMBER}
    changed = {(c.kind, c.frame, c.context) for c in extract_claims(ELBA.replace("20 km", "35 km")) if c.kind != NUMBER}
    assert original == changed
    assert all("km" not in c.context for c in by_kind(ELBA, ENTITY))


@pytest.mark.parametrize("a, b, same", [
    ("It has 12,000 inhabitants.", "It has 12,050 inhabitants.", True),  # within 1 %
    ("It has 12,000 inhabitants.", "It has 13,000 inhabitants.", False),
    ("It was founded in 1842.", "It was founded in March 1842.", True),  # the precision both state
    ("It was founded in March 1842.", "It was founded in May 1842.", False),
    ("It was founded in 1842.", "It was founded in 1852.", False),
])
def test_agreement_of_values(a: str, b: str, same: bool) -> None:
    kind = NUMBER if "inhabitants" in a else DATE
    (x,), (y,) = by_kind(a, kind), by_kind(b, kind)
    assert comparable(x, y)
    assert agree(x, y) is same


def test_names_agree_when_one_contains_the_other_and_units_must_match() -> None:
    (full,) = [c for c in by_kind("The school was founded by Edward Sorin.", ENTITY) if "Sorin" in c.value]
    (short,) = [c for c in by_kind("The school was founded by Sorin.", ENTITY) if "Sorin" in c.value]
    (other,) = [c for c in by_kind("The school was founded by John Carroll.", ENTITY) if "Carroll" in c.value]
    assert agree(full, short) and not agree(full, other)
    km, mi = by_kind("It lies 20 km off the coast.", NUMBER)[0], by_kind("It lies 20 mi off the coast.", NUMBER)[0]
    assert not comparable(km, mi)


def test_empty_and_value_free_sentences() -> None:
    assert extract_claims("   ") == ()
    (only,) = extract_claims("A quarter of farmland is used to grow consumable crops.")
    assert only.kind == POLARITY and only.norm is True


def test_a_year_and_a_unitless_number_compare_as_numbers() -> None:
    """MTRAG (govt): "earlier than 600 AD" changed to "earlier than 1425 AD" reads 1425 as a year."""
    (count,) = by_kind("Welsh may have been around even earlier than 600 AD.", NUMBER)
    (year,) = by_kind("Welsh may have been around even earlier than 1425 AD.", DATE)
    assert comparable(count, year) and not agree(count, year)
    (same,) = by_kind("Welsh may have been around even earlier than 1425 AD.", DATE)
    assert agree(year, same)
