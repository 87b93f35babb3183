"""What the sites' published term statistics (sync.terms) tell the gateway: CORI resource
selection (which sites to ask), QuestionWords (how rare each of the question's words is) and
AnswerCoverage (how much of the question a site's answer uses).

CORI: for each question word w and site s, with df the number of s's documents using w, cw the site's
summed document counts, sf the number of sites using w and N the sites compared (Callan, Lu & Croft,
"Searching distributed collections with inference networks", SIGIR 1995):

    T = df / (df + 50 + 150 * cw / median cw)      how much of s is about w
    I = log((N + 0.5) / sf) / log(N + 1)           how rare w is among sites
    lexical(s) = mean over the question's words that some site uses of T * I

CORI normalises a site's size by the mean; here by the median, so that no one site can move the
yardstick: a member claiming every word at a high document frequency (a "routing hog", issue 32)
inflated the mean by its own claims, and with it its share of every word. By the median its claimed
mass counts against it alone (with 16 honest SQuAD sites of similar size the two agree).

CORI's belief adds a constant 0.4 and scales T * I by 0.6; both change no ranking, so the score is
left in T * I units and the router weighs it (gateway.query.route). Words no site uses say nothing about
where to go and are left out of the mean. Why CORI and not BM25 over sites: on SQuAD's fit split
(16 sites, its first 3,000 questions in file order, every word of every document, term statistics
alone; a scratch comparison) CORI ranked the gold site in the first 4 for 0.908 of questions, BM25
with each site as one document for 0.873, and CORI's constants (50, 150) beat smaller ones. The
shipped blend is measured in benchmarks/README.md.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np

from hansa.sync.terms import TermSketch, term_keys

DF_BASE = 50.0
DF_SCALE = 150.0


def lexical_scores(question_keys: np.ndarray, sketches: Mapping[str, TermSketch]) -> dict[str, float]:
    """CORI score per site in `sketches` (0.0 where it uses none of the question's words)."""
    names = [s for s, sketch in sketches.items() if len(sketch)]
    if not names or not len(question_keys):
        return {}
    df = np.vstack([sketches[s].lookup(question_keys) for s in names]).astype(np.float64)
    sf = (df > 0).sum(axis=0)
    known = sf > 0
    if not known.any():
        return {s: 0.0 for s in names}
    df, sf = df[:, known], sf[known]
    n = len(names)
    cw = np.array([max(sketches[s].total, 1) for s in names], dtype=np.float64)
    t = df / (df + DF_BASE + DF_SCALE * (cw / np.median(cw))[:, None])
    i = np.log((n + 0.5) / sf) / np.log(n + 1.0)
    scores = (t * i).mean(axis=1)
    return {s: float(v) for s, v in zip(names, scores)}


@dataclass(frozen=True)
class QuestionWords:
    """The question's words, each weighed by how rare it is in the federation: its inverse document
    frequency over every routable site's published term statistics (sync.terms),
    log(1 + D / (1 + df)) with D the documents counted; a word no site published (rare: used by one
    document) weighs most. Without term statistics every word weighs the same.

    Built once per question by routing (query.route) from the sketches it ranks with, and read
    twice: by the assessment's `weighted_coverage` (the gate's evidence) and by fusion's
    AnswerCoverage. Why rarity: a question's common words ("year", "first") are found in any
    site's answer; the rare ones ("Hastings") are what tells an answer about *this* question from
    one about its neighbour."""

    keys: np.ndarray  # the question's word keys (sync.terms), sorted
    idf: np.ndarray  # each key's weight

    @classmethod
    def of(cls, question: str, sketches: Mapping[str, TermSketch]) -> "QuestionWords | None":
        """None when the question has no word to look for."""
        keys = term_keys(question)
        if not len(keys):
            return None
        documents = sum(s.documents for s in sketches.values())
        if documents:
            df = np.sum([s.lookup(keys) for s in sketches.values()], axis=0, dtype=np.float64)
            idf = np.log1p(documents / (1.0 + df))
        else:
            idf = np.ones(len(keys))
        return cls(keys, idf)

    def share(self, texts: Iterable[str]) -> float:
        """The weighted share of the question's words found in `texts`. A set lookup per question
        word: fusion asks this once per answering site, and np.isin on a handful of keys costs
        ~2.5x more (~60 against ~25 us a site)."""
        found = set(term_keys(" ".join(texts)).tolist())
        hit = sum(w for k, w in zip(self.keys.tolist(), self.idf.tolist()) if k in found)
        return float(hit / self.idf.sum())


@dataclass(frozen=True)
class AnswerCoverage:
    """Fusion's word-level check of a site's answer: how much of the question (QuestionWords) the
    sentences a site offers actually use; a site's citations are weighed by
    1 - weight + weight x that share (gateway/query/fusion.py).

    Why: a site's scores are cosines against its own chunks, and a question that names nothing
    outside its paragraph ("Who destroyed the Jesuit college?") is about equally close to passages
    at several sites; the words it shares with each site's answer are the gateway's own,
    comparable evidence."""

    words: QuestionWords
    weight: float

    @classmethod
    def weighing(cls, words: QuestionWords | None, weight: float) -> "AnswerCoverage | None":
        """None when `weight` is 0 or there are no words (nothing to weigh by)."""
        return cls(words, float(weight)) if words is not None and weight > 0 else None

    def share(self, texts: Iterable[str]) -> float:
        return self.words.share(texts)

    def factor(self, texts: Iterable[str]) -> float:
        return 1.0 - self.weight + self.weight * self.share(texts)
