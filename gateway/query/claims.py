"""Short checkable facts in a sentence, found without a language model: numbers (with units),
dates and years, named entities, and the sentence's polarity (stated or negated).

Why rules and not a model: the gateway must compare what sites say on every query, on two shared
cores, with no LLM configured. A claim here is deliberately shallow — (subject, predicate, value):
the value is the typed thing that can differ between sources; the subject is the sentence's first
named entity (or its first content words); the predicate is the content words around the value.
Two claims are *about the same thing* when their sentences' remaining words (`frame`) and the
words around the value (`context`) match well (gateway/query/conflicts.py decides that); they *agree*
when their values are equal after normalization (numbers within a relative tolerance, dates at the
precision both state, names when one contains the other). No quantity library is used: the ones on
PyPI (quantulum3 and the like) parse units well but bring a model and a large unit table for
what is, here, a comparison between two copies of the same statement.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Union

from hansa.core.entities import chunk_entities

NUMBER, DATE, ENTITY, POLARITY = "number", "date", "entity", "polarity"
NUMERIC_TOLERANCE = 0.01  # relative: 1,000 and 1,005 agree; 1,000 and 1,100 do not
CONTEXT_WORDS = 3  # content words each side of a value that say what it measures

_MONTHS = {m: i for i, m in enumerate(
    "january february march april may june july august september october november december".split(), 1)}
_MONTHS.update({m[:3]: i for m, i in list(_MONTHS.items())})
_MONTHS["sept"] = 9
_MONTH = r"(?P<{}>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_DATE_PATTERNS = [
    re.compile(r"\b(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})\b"),
    re.compile(r"\b" + _MONTH.format("mon") + r"\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<y>\d{4})\b", re.I),
    re.compile(r"\b(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH.format("mon") + r",?\s+(?P<y>\d{4})\b", re.I),
    re.compile(r"\b" + _MONTH.format("mon") + r",?\s+(?P<y>\d{4})\b", re.I),
    re.compile(r"(?<![\d,.$£€])\b(?P<y>1\d{3}|20\d{2})s?\b(?![,.]\d|\s*(?:%|percent|per\s+cent))"),
]
_SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12, "bn": 1e9}
# Unit spellings folded to one name, so "5 km" and "5 kilometres" compare (no conversion between units).
_UNITS = {
    "%": "percent", "percent": "percent", "per cent": "percent", "percentage points": "percentage points",
    "km": "km", "kilometers": "km", "kilometres": "km", "kilometer": "km", "kilometre": "km",
    "mi": "miles", "mile": "miles", "miles": "miles", "m": "m", "meters": "m", "metres": "m", "meter": "m", "metre": "m",
    "ft": "feet", "feet": "feet", "foot": "feet", "cm": "cm", "mm": "mm", "inches": "inches", "inch": "inches",
    "kg": "kg", "kilograms": "kg", "g": "g", "grams": "g", "lb": "pounds", "lbs": "pounds", "pounds": "pounds",
    "tons": "tons", "tonnes": "tons", "acres": "acres", "hectares": "hectares", "sq mi": "sq miles",
    "square miles": "sq miles", "square kilometres": "sq km", "square kilometers": "sq km", "km2": "sq km",
    "years": "years", "year": "years", "months": "months", "month": "months", "weeks": "weeks", "week": "weeks",
    "days": "days", "day": "days", "hours": "hours", "hour": "hours", "minutes": "minutes", "minute": "minutes",
    "seconds": "seconds", "dollars": "usd", "usd": "usd", "euros": "eur", "eur": "eur", "pounds sterling": "gbp",
    "°c": "celsius", "degrees celsius": "celsius", "°f": "fahrenheit", "degrees fahrenheit": "fahrenheit",
    "degrees": "degrees", "people": "people", "inhabitants": "people", "residents": "people", "students": "students",
}
_CURRENCY = {"$": "usd", "£": "gbp", "€": "eur"}
_UNIT_ALT = "|".join(sorted((re.escape(u) for u in _UNITS), key=len, reverse=True))
_SCALE_ALT = "thousand|million|billion|trillion|bn"
_NUMBER = re.compile(
    r"(?<![\w.])(?P<cur>[$£€])?\s?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?P<ord>st|nd|rd|th)?"
    r"(?:\s?(?P<scale>" + _SCALE_ALT + r")\b)?"
    r"(?:\s?(?P<unit>" + _UNIT_ALT + r")(?![\w]))?",
    re.I,
)
_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve".split()) if i >= 2}
_NUMBER_WORD = re.compile(r"\b(?P<num>" + "|".join(_NUMBER_WORDS) + r")\b(?:\s+(?P<scale>" + _SCALE_ALT + r")\b)?(?:\s+(?P<unit>" + _UNIT_ALT + r")\b)?", re.I)
NEGATIONS = frozenset("not no never cannot none nobody nothing neither nor n't".split())
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?")
# Function words say nothing about *what* is measured: they must not make two claims look alike.
# (core.text.STOPWORDS is broader on purpose — it drops verbs like "rose" or "founded"
# that bound entity names — but here those verbs are the predicate.)
_FILLER = frozenset("""
a an the of in on at to for from by with and or but as is are was were be been being it its this
that these those which who whom whose there their they them he she his her him we our you your i me
my has have had do does did will would can could should might must shall than then so such into
onto about also about some any each other which what when where while if
""".split())

Norm = Union[tuple[float, str], tuple[int, int, int], str, bool]


@dataclass(frozen=True)
class Claim:
    """One value a sentence states, with what it is about. `norm` is the comparable value:
    (magnitude, unit) for numbers, (year, month, day) with 0 for unstated parts for dates, the
    folded name for entities, True/False (stated/negated) for polarity."""

    subject: str
    predicate: str
    value: str
    kind: str
    norm: Norm
    frame: frozenset[str]  # the sentence's content words without the value's
    context: frozenset[str]  # content words next to the value: what it measures
    sentence: str

    def to_json(self) -> dict[str, object]:
        return {"subject": self.subject, "predicate": self.predicate, "value": self.value, "kind": self.kind}


def frame_words(text: str) -> list[str]:
    """The words a claim's frame and context are made of, in order: folded words with their
    apostrophes ("n't", "o'brien") without filler, negations kept (polarity is part of the frame)
    and numbers dropped (values are not what a sentence is about). Not core.text.content_words,
    which drops negations as stopwords and loses word order."""
    out = []
    for w in _WORD.findall(text.casefold().replace("n't", " n't")):
        if w == "t" or w[0].isdigit():  # values are not what a sentence is about
            continue
        if w not in _FILLER or w in NEGATIONS:
            out.append(w)
    return out


def _stem(word: str) -> str:
    """Plural and third-person "s" off, so "contains" matches "contain" (no stemmer dependency for
    one suffix)."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _keys(words: list[str]) -> frozenset[str]:
    return frozenset(_stem(w) for w in words)


def _spans_overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _dates(sentence: str) -> list[tuple[tuple[int, int], str, tuple[int, int, int]]]:
    found: list[tuple[tuple[int, int], str, tuple[int, int, int]]] = []
    for pattern in _DATE_PATTERNS:
        for m in pattern.finditer(sentence):
            span = m.span()
            if any(_spans_overlap(span, s) for s, _, _ in found):
                continue
            g = m.groupdict()
            month = int(g["m"]) if g.get("m") else _MONTHS.get((g.get("mon") or "").casefold().rstrip("."), 0)
            day = int(g["d"]) if g.get("d") else 0
            if not (0 <= month <= 12 and 0 <= day <= 31):
                continue
            found.append((span, m.group(0), (int(g["y"]), month, day)))
    return found


def _numbers(sentence: str, taken: list[tuple[int, int]]) -> list[tuple[tuple[int, int], str, tuple[float, str]]]:
    found: list[tuple[tuple[int, int], str, tuple[float, str]]] = []
    for m in _NUMBER.finditer(sentence):
        span = (m.start("num") if not m.group("cur") else m.start(), m.end())
        if any(_spans_overlap(span, t) for t in taken):
            continue
        value = float(m.group("num").replace(",", ""))
        scale = (m.group("scale") or "").casefold()
        value *= _SCALES.get(scale, 1.0)
        unit = _UNITS.get((m.group("unit") or "").casefold(), "") or _CURRENCY.get(m.group("cur") or "", "")
        unit = "ordinal" if m.group("ord") else unit  # "8th" ranks, it does not count
        found.append((span, m.group(0).strip(), (value, unit)))
    for m in _NUMBER_WORD.finditer(sentence):
        span = m.span()
        if any(_spans_overlap(span, t) for t in taken + [s for s, _, _ in found]):
            continue
        unit = _UNITS.get((m.group("unit") or "").casefold(), "")
        value = _NUMBER_WORDS[m.group("num").casefold()] * _SCALES.get((m.group("scale") or "").casefold(), 1.0)
        found.append((span, m.group(0), (float(value), unit)))
    return found


def _entities(sentence: str, taken: list[tuple[int, int]]) -> list[tuple[tuple[int, int], str, str]]:
    found = []
    for key, name, kind, _ in chunk_entities(sentence):
        if kind not in ("proper", "acronym") or any(ch.isdigit() for ch in key) or key in _MONTHS:
            continue
        at = sentence.find(name)
        if at < 0:
            continue
        span = (at, at + len(name))
        if any(_spans_overlap(span, t) for t in taken):
            continue
        found.append((span, name, key))
    return sorted(found)


def _context(sentence: str, span: tuple[int, int]) -> list[str]:
    left = frame_words(sentence[: span[0]])[-CONTEXT_WORDS:]
    right = frame_words(sentence[span[1]:])[:CONTEXT_WORDS]
    return left + right


@lru_cache(maxsize=4096)
def extract_claims(sentence: str) -> tuple[Claim, ...]:
    """Every claim in one sentence: its dates, numbers and named entities, plus one polarity claim
    (is the statement negated?) so that "X is not Y" and "X is Y" can be told apart."""
    sentence = " ".join(sentence.split())
    if not sentence:
        return ()
    dates = _dates(sentence)
    numbers = _numbers(sentence, [s for s, _, _ in dates])
    entities = _entities(sentence, [s for s, _, _ in dates] + [s for s, _, _ in numbers])
    # Quantities are masked out of what the sentence is about: "12 km" must not make "km" part of
    # the frame or of a neighbour's context (entities stay: they say who or what).
    masked = sentence
    for (a, b), _, _ in dates + numbers:
        masked = masked[:a] + " " * (b - a) + masked[b:]
    words = frame_words(masked)
    subject = entities[0][2] if entities else " ".join(w for w in words[:2] if w not in NEGATIONS)
    values: list[tuple[tuple[int, int], str, str, Norm]] = (
        [(s, v, DATE, n) for s, v, n in dates] + [(s, v, NUMBER, n) for s, v, n in numbers]
        + [(s, v, ENTITY, n) for s, v, n in entities])
    claims = []
    all_words = _keys(words)
    for span, value, kind, norm in sorted(values, key=lambda t: t[0]):
        own = _keys(frame_words(value))
        context = _context(masked, span)
        # an entity that is the subject names what the sentence is about: its "value" is itself
        claim_subject = subject if not (kind == ENTITY and norm == subject) else " ".join(context[:2])
        claims.append(Claim(claim_subject, " ".join(context), value, kind, norm, all_words - own,
                            _keys(context), sentence))
    negated = bool(NEGATIONS & all_words)
    claims.append(Claim(subject, " ".join(w for w in words if w not in NEGATIONS)[:80], "no" if negated else "yes",
                        POLARITY, not negated, all_words - NEGATIONS, frozenset(), sentence))
    return tuple(claims)


def _as_number(c: Claim) -> Claim:
    """A bare year-like number is read as a year ("in 1425"), a smaller one as a count ("600 AD"):
    the same slot, so a year-only date compares with a unitless number as a number."""
    if c.kind == DATE and c.norm[1:] == (0, 0):  # type: ignore[index]
        return Claim(c.subject, c.predicate, c.value, NUMBER, (float(c.norm[0]), ""), c.frame, c.context, c.sentence)  # type: ignore[index]
    return c


def _aligned(a: Claim, b: Claim) -> tuple[Claim, Claim]:
    if {a.kind, b.kind} == {DATE, NUMBER}:
        a2, b2 = _as_number(a), _as_number(b)
        if a2.kind == b2.kind == NUMBER and a2.norm[1] == b2.norm[1] == "":  # type: ignore[index]
            return a2, b2
    return a, b


def agree(a: Claim, b: Claim) -> bool:
    """Do two comparable claims state the same value? (Whether they are about the same thing is
    conflicts.py's question.)"""
    a, b = _aligned(a, b)
    if a.kind != b.kind:
        return False
    if a.kind == NUMBER:
        (x, ux), (y, uy) = a.norm, b.norm  # type: ignore[misc]
        return ux == uy and abs(x - y) <= NUMERIC_TOLERANCE * max(abs(x), abs(y))
    if a.kind == DATE:
        return all(p == q or p == 0 or q == 0 for p, q in zip(a.norm, b.norm))  # type: ignore[arg-type]
    if a.kind == ENTITY:
        x, y = f" {a.norm} ", f" {b.norm} "
        return x in y or y in x  # "Sorin" and "Edward Sorin" name one person
    return a.norm == b.norm


def comparable(a: Claim, b: Claim) -> bool:
    """Can the two values be compared at all: same kind (a year and a unitless number count as
    numbers), and for numbers the same unit."""
    a, b = _aligned(a, b)
    if a.kind != b.kind:
        return False
    if a.kind == NUMBER:
        return a.norm[1] == b.norm[1]  # type: ignore[index]
    return True
