"""CORI resource selection over the sites' published term statistics (sync.terms).

For each question word w and site s, with df the number of s's documents using w, cw the site's
summed document counts, sf the number of sites using w and N the sites compared (Callan, Lu & Croft,
"Searching distributed collections with inference networks", SIGIR 1995):

    T = df / (df + 50 + 150 * cw / mean cw)        how much of s is about w
    I = log((N + 0.5) / sf) / log(N + 1)           how rare w is among sites
    lexical(s) = mean over the question's words that some site uses of T * I

CORI's belief adds a constant 0.4 and scales T * I by 0.6; both change no ranking, so the score is
left in T * I units and the router weighs it (gateway.router). Words no site uses say nothing about
where to go and are left out of the mean. Why CORI and not BM25 over sites: on SQuAD's fit split
(16 sites, its first 3,000 questions in file order, every word of every document, term statistics
alone; a scratch comparison) CORI ranked the gold site in the first 4 for 0.908 of questions, BM25
with each site as one document for 0.873, and CORI's constants (50, 150) beat smaller ones. The
shipped blend is measured in benchmarks/README.md.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from hansa.sync.terms import TermSketch

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
    t = df / (df + DF_BASE + DF_SCALE * (cw / cw.mean())[:, None])
    i = np.log((n + 0.5) / sf) / np.log(n + 1.0)
    scores = (t * i).mean(axis=1)
    return {s: float(v) for s, v in zip(names, scores)}
