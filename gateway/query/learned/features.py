"""Features of one (question, site) pair that never name the site.

Why site-agnostic: RAGRoute's router learns from a one-hot-free description of each data source,
so one model serves every source; here that means a site that joins the federation tomorrow is
scored by the model trained today, with no retraining. Each feature is a number the gateway
already holds for *any* site: how the site's published summaries match the question among the
top-m, where that puts it against the other sites, how much the site published, and how its
published term statistics match the question's words (gateway.query.route: at realistic site sizes
the words find gold sites the summaries miss).

FEATURE_NAMES is the model's input contract: a model trained on other names is refused at load
(routing falls back to summary matching), so a change here can never be silently misread.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Collection, Mapping, Sequence

import numpy as np

from hansa.gateway.index.summaries import SummaryHit
from hansa.gateway.query.route import SiteScore, routable_terms, score_sites

FEATURE_NAMES: tuple[str, ...] = (
    "best",            # the site's best summary similarity among the top-m
    "second",          # its second best (0: one hit)
    "mean_top3",       # mean of its best three (of those it has)
    "hits_share",      # its share of the top-m hits
    "rank_recip",      # 1 / (1 + its rank by summary score): 1 for the leader
    "gap_to_leader",   # the leading site's best minus this site's best
    "gap_to_next",     # this site's best minus the next-ranked site's best (0 for the last)
    "leader_best",     # the leader's best: how clear the question is at all
    "log_summaries",   # log1p(summaries the site published)
    "log_entities",    # log1p(entities its published communities cover)
    "best_richness",   # log1p(entities of its best-matching community)
    "best_position",   # log1p(position of its best summary in the whole top-m): 0 for the leader's
    "hits_top16",      # its share of the 16 best hits overall
    "terms_share",     # its CORI score over its published term statistics, as a share of the best site's
    "terms_rank_recip",  # 1 / (1 + its rank by that score): 1 for the term leader, 0 without a score
)

# (summaries published, entities covered) of a site; (0, 0) when unknown
Published = Callable[[str], tuple[int, int]]


@dataclass(frozen=True)
class SiteFeatures:
    score: SiteScore  # the summary-matching score the features were derived from
    vector: np.ndarray  # float64, aligned with FEATURE_NAMES


def site_features(hits: Sequence[SummaryHit], routable: Collection[str], published: Published,
                  lexical: Mapping[str, float] | None = None) -> list[SiteFeatures]:
    """Every routable site with hits, in summary-matching order, with its feature vector;
    `lexical` is each site's CORI term score (None: no site has term statistics)."""
    ranked = score_sites(hits, routable)
    if not ranked:
        return []
    terms, top_terms = routable_terms(lexical, routable, 1.0)
    term_rank = {site: i for i, site in enumerate(sorted((s for s, v in terms.items() if v > 0),
                                                         key=lambda s: (-terms[s], s)))}
    per_site: dict[str, list[SummaryHit]] = {}
    for h in hits:
        per_site.setdefault(h.site_id, []).append(h)
    n_hits = max(len(hits), 1)
    position: dict[str, int] = {}
    for i, h in enumerate(hits):
        position.setdefault(h.site_id, i)
    top16: dict[str, int] = {}
    for h in hits[:16]:
        top16[h.site_id] = top16.get(h.site_id, 0) + 1
    bests = [max(h.score for h in per_site[s.site_id]) for s in ranked]
    leader = max(bests)
    out = []
    for i, s in enumerate(ranked):
        own = sorted((h for h in per_site[s.site_id]), key=lambda h: -h.score)
        sims = [h.score for h in own]
        summaries, entities = published(s.site_id)
        nxt = bests[i + 1] if i + 1 < len(bests) else bests[i]
        vec = np.array([
            sims[0],
            sims[1] if len(sims) > 1 else 0.0,
            float(np.mean(sims[:3])),
            len(sims) / n_hits,
            1.0 / (1 + i),
            leader - sims[0],
            sims[0] - nxt,
            leader,
            math.log1p(max(summaries, 0)),
            math.log1p(max(entities, 0)),
            math.log1p(max(own[0].richness, 0)),
            math.log1p(position[s.site_id]),
            top16.get(s.site_id, 0) / min(16, n_hits),
            terms.get(s.site_id, 0.0) / top_terms if top_terms > 0 else 0.0,
            1.0 / (1 + term_rank[s.site_id]) if s.site_id in term_rank else 0.0,
        ], dtype=np.float64)
        out.append(SiteFeatures(s, vec))
    return out
