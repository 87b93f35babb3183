"""Entities in text without a language model (GraphRAG's "fast" mode): who and what a text names.

Why no model: LLM extraction is what makes Graph-RAG indexing expensive, and a site must be able to
build its graph offline on two cores. Three cheap signals find most of what matters in expository
text: proper-noun runs ("Federal Reserve", "Bank of America"), acronyms ("IRA", "VPC") and key noun
phrases (runs of 1-3 content words between stopwords, "interest rate", "load balancer").

Why in core: a site builds its knowledge graph from these entities (plugin.extraction), and the
gateway compares the entities of the claims sites make (gateway.query.claims); both must spot the same
entities the same way, and the gateway must not import the site adapter to do it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from hansa.core.text import STOPWORDS, fold

MAX_ENTITIES_PER_CHUNK = 15
MAX_PHRASE_TOKENS = 3
MIN_ENTITY_CHARS = 3
MAX_ENTITY_CHARS = 100
EXTRACTOR_VERSION = "nlp-1"  # part of the ingest fingerprint: a new extractor re-indexes documents

PROPER, ACRONYM, CONCEPT = "proper", "acronym", "concept"
KIND_RANK = {PROPER: 3, ACRONYM: 2, CONCEPT: 1}  # which kind wins when two spellings meet (also plugin.extraction)
# Salience weights: names and acronyms carry more identity than a generic phrase; a multi-word
# phrase ("interest rate") more than a single word ("rate").
_WEIGHT = {PROPER: 2.0, ACRONYM: 1.75, CONCEPT: 1.0}
_MULTIWORD_BONUS = 0.5

# Lower-case words that may sit inside a proper name: "Bank of America", "Ludwig van Beethoven".
_NAME_CONNECTORS = frozenset("of the for de la le du da del der van von".split())

# Words: letters/digits with inner hyphens, apostrophes and dots ("U.S.", "Node.js", "O'Brien"),
# then sentence ends, then anything else that is not a space (punctuation, symbols) as a break.
_TOKEN = re.compile(r"(?P<word>[^\W_](?:[\w'’.\-]*[^\W_])?\.?)|(?P<stop>[.!?]+)|(?P<brk>\n|[^\s])")
# URLs, e-mail addresses, HTML tags and entities are markup, not language: blanked before tokenizing.
_MARKUP = re.compile(r"(?:https?://|www\.)\S+|\S+@\S+\.\w+|<[^<>\n]{0,200}>|&[#\w]{1,10};", re.IGNORECASE)
# A newline after a long line is a soft wrap inside a paragraph ("Engineer Margaret\nEllison");
# after a short line (a title, heading or list item) it ends the line's phrase.
_SOFT_WRAP = re.compile(r"(?<=[^\n]{60})\n(?=[^\n])")
_DIGIT = re.compile(r"\d")
_POSSESSIVE_ENDINGS = ("'s", "’s", "'S", "’S")


@lru_cache(maxsize=1 << 16)
def normalize(name: str) -> str:
    """The entity key: the folded name, bounded in length.

    "Bank of America", "bank  of america" and "BANK OF AMERICA." all become "bank of america", so
    the same thing mentioned in different documents (or sites) is one node."""
    return fold(name)[:MAX_ENTITY_CHARS].rstrip()


class _Features(NamedTuple):
    capital: bool  # starts upper-case, or has inner capitals ("iPhone", "macOS")
    mixed: bool  # inner capitals: a name even at a sentence start
    acronym: bool  # "IRA", "VPC", "S3"
    stop: bool  # bounds phrases and names
    connector: bool  # may sit inside a name


@lru_cache(maxsize=1 << 16)
def _features(word: str) -> _Features:
    """Per-word facts, cached: the same few thousand words recur in every chunk."""
    folded = word.casefold()
    tail = word[1:]
    mixed = tail != tail.lower() and word != word.upper()
    letters = sum(c.isalpha() for c in word) if len(word) <= 10 else 0
    acronym = 2 <= letters <= 8 and word.isupper()
    # Lower-case past-tense forms ("raised", "noticed") are the commonest verbs that would glue
    # themselves to noun phrases without a tagger, so they bound phrases like stopwords
    # (capitalized ones start names: "United States").
    past = word.islower() and len(word) >= 5 and folded.endswith("ed") and not folded.endswith("eed")
    stop = folded in STOPWORDS or past
    return _Features(word[:1].isupper() or mixed, mixed, acronym, stop, folded in _NAME_CONNECTORS)


class _Word(NamedTuple):
    text: str  # without a possessive "'s" or a sentence-final period
    position: int  # token index: ties in salience go to the earlier mention
    sentence_start: bool
    possessive: bool  # "Apple's iPhone": a name or phrase ends here
    f: _Features


def _words(text: str) -> list[_Word | None]:
    """Words in order, with None wherever punctuation, markup or a sentence end breaks a phrase."""
    out: list[_Word | None] = []
    at_start = True
    text = _SOFT_WRAP.sub(" ", _MARKUP.sub(" | ", text))
    for index, (word, stop, brk) in enumerate(_TOKEN.findall(text)):
        if not word:
            if out and out[-1] is not None:
                out.append(None)
            if stop or brk == "\n":
                at_start = True
            continue
        ends_sentence = word[-1] == "." and word.count(".") < 2  # "bank." yes, "U.S." no
        if ends_sentence:
            word = word[:-1]
        possessive = word.endswith(_POSSESSIVE_ENDINGS) and len(word) > 2
        if possessive:
            word = word[:-2]
        out.append(_Word(word, index, at_start, possessive, _features(word)))
        at_start = False
        if ends_sentence:
            out.append(None)
            at_start = True
    return out


@dataclass(slots=True)
class _Candidate:
    name: str
    kind: str
    count: int
    first: int


class _Collector:
    """Turns runs of words into candidate entities and counts them per chunk."""

    def __init__(self) -> None:
        self.found: dict[str, _Candidate] = {}

    def add(self, name: str, kind: str, position: int) -> None:
        key = normalize(name)
        if len(key) < (2 if kind == ACRONYM else MIN_ENTITY_CHARS) or key.replace(" ", "").isdigit():
            return
        if kind != ACRONYM and key in STOPWORDS:
            return
        current = self.found.get(key)
        if current is None:
            self.found[key] = _Candidate(name, kind, 1, position)
            return
        current.count += 1
        if KIND_RANK[kind] > KIND_RANK[current.kind]:
            current.kind, current.name = kind, name

    def name(self, run: list[_Word]) -> list[_Word]:
        """Emit a run of capitalized words as a proper name (or acronym), trimming connectors.

        Returns the word back when it was capitalized by position only ("Mortgage rates rose"):
        the caller continues it as an ordinary phrase ("mortgage rates")."""
        start, end = 0, len(run)
        if end > 1 and run[0].sentence_start and run[1].f.connector and not run[0].f.mixed:
            start = 1  # "Today the Lindenfeld Orchestra": the first capital is positional only
        while end > start and (run[end - 1].f.stop or run[end - 1].f.connector):
            end -= 1
        while start < end and (run[start].f.stop or run[start].f.connector):
            start += 1
        if start >= end:
            return []
        if end - start == 1:
            word = run[start]
            if word.f.acronym:
                self.add(word.text, ACRONYM, word.position)
                return []
            if word.sentence_start and not word.f.mixed:
                return [word]
        self.add(" ".join(w.text for w in run[start:end]), PROPER, run[start].position)
        return []

    def phrase(self, run: list[_Word]) -> None:
        """A run of content words becomes phrases of at most 3 words, keeping the last (head) ones."""
        for end in range(len(run), 0, -MAX_PHRASE_TOKENS):
            piece = run[max(0, end - MAX_PHRASE_TOKENS):end]
            if len(piece) == 1:
                word = piece[0].text
                if len(word) < 4 or word.endswith("ly") or _DIGIT.search(word):
                    continue
            self.add(" ".join(w.text.lower() for w in piece), CONCEPT, piece[0].position)


def _continues_name(words: list[_Word | None], index: int) -> bool:
    """"of" joins a name only when a capitalized word follows: "Bank of America", not "Bank of the"."""
    following = words[index + 1] if index + 1 < len(words) else None
    return following is not None and following.f.capital and not following.f.stop


def chunk_entities(text: str, limit: int = MAX_ENTITIES_PER_CHUNK) -> list[tuple[str, str, str, int]]:
    """The `limit` most salient (entity id, display name, kind, count) in one chunk of text."""
    collect = _Collector()
    words = _words(text)
    name_run: list[_Word] = []
    phrase: list[_Word] = []
    for index, word in enumerate(words):
        if word is None:
            phrase.extend(collect.name(name_run))
            name_run = []
            collect.phrase(phrase)
            phrase = []
            continue
        f = word.f
        if f.capital and not (f.stop and (word.sentence_start or not name_run)):
            collect.phrase(phrase)
            phrase = []
            name_run.append(word)
            if word.possessive:
                collect.phrase(collect.name(name_run))
                name_run = []
            continue
        if name_run and f.connector and word.text.islower() and _continues_name(words, index):
            name_run.append(word)
            continue
        if name_run:
            phrase.extend(collect.name(name_run))
            name_run = []
        if f.stop or word.text[:1].isdigit():
            collect.phrase(phrase)
            phrase = []
        else:
            phrase.append(word)
            if word.possessive:
                collect.phrase(phrase)
                phrase = []
    phrase.extend(collect.name(name_run))
    collect.phrase(phrase)

    def salience(item: tuple[str, _Candidate]) -> tuple[float, int]:
        key, cand = item
        bonus = _MULTIWORD_BONUS if " " in key else 0.0
        return (-(cand.count * (_WEIGHT[cand.kind] + bonus)), cand.first)

    ranked = sorted(collect.found.items(), key=salience)[:limit]
    return [(key, cand.name, cand.kind, cand.count) for key, cand in ranked]
