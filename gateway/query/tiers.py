"""SCOUT-RAG's Stage I without an LLM: every candidate site gets a tier, and the tier a mode.

Three signals per site (SCOUT-RAG's s_sim, s_rich, s_hist):
  similarity  an aggregate of the site's top-m summary matches, not only the best:
              s1 + AGG_BONUS * mean(s2..s_AGG_HITS) (0 for hits it lacks) — the best community is
              the strongest evidence (DGRAG), further matching communities say the site covers the
              topic from several angles; bounded so volume cannot beat a clearly closer match.
  richness    log(1 + entities its published communities cover) / the same for the richest
              candidate (SCOUT-RAG's |R_i| / max_j |R_j|, log-scaled so a huge site does not
              swamp similarity); the index keeps communities and entities per summary.
  history     the site's smoothed citation rate (gateway.query.reliability), centred on a new site's prior.

    score = similarity + lexical_weight * terms + w_richness * richness + w_history * (history - PRIOR_RATE)

  terms       the site's CORI score over its published term statistics as a share of the best
              site's (gateway.query.route), weighed as the summary router weighs it
              (gateway.query.route.score_sites, `[gateway] lexical_weight`): the same blend the gateway
              routes by, which at realistic site sizes finds gold sites the summaries miss
              (benchmarks/README.md). `lexical_weight = 0`: summaries alone.

Tiers come from each site's gap to the leader's score (absolute cosines shift from question to
question; the gap is what the routing margin already calibrates), plus an absolute floor:

  HIGH        gap <= high_gap                 -> asked first, global mode (community summaries)
  MODERATE    gap <= moderate_gap             -> asked first, local mode (entities + expansion)
  POTENTIAL   gap <= potential_gap            -> held back for refinement (breadth)
  IRRELEVANT  further, or score <= min_score  -> never asked

Defaults (TierCutoffs()): moderate_gap is the routing margin for summary scores alone (0.24,
measured on MTRAG 16 shards: gold-site recall 0.947 at 3.98 sites); high_gap and potential_gap
bracket it. With the term blend the score spreads wider, and `TierCutoffs.around(margin)` keeps
those proportions around the margin the gateway routes the blend with (`[gateway] site_margin`,
fit on the fit split): what `tiers_policy` and `refine_policy` use unless the gateway's calibration
holds cut-offs. `cutoffs_from_gaps` sets the three gaps from the fit split's gold sites (quantiles
of their gaps to the leader), no LLM: `hansa eval --split fit --calibration-rows` collects the gaps
(tiers rows, gateway.query.calibrate.tier_rows) and `hansa gateway calibrate` fits them into the
calibration file the gateway loads.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Collection, Iterable, Mapping, Sequence

import numpy as np

from hansa.gateway.query.reliability import PRIOR_RATE, SiteHistory
from hansa.gateway.index.summaries import SummaryHit, SummaryIndex
from hansa.gateway.query.route import SiteScore, routable_terms

HIGH, MODERATE, POTENTIAL, IRRELEVANT = "high", "moderate", "potential", "irrelevant"
TIERS = (HIGH, MODERATE, POTENTIAL, IRRELEVANT)
MODE = {HIGH: "global", MODERATE: "local"}  # PAGA: global for HIGH, local for MODERATE
AGG_HITS = 3
AGG_BONUS = 0.1


@dataclass(frozen=True)
class TierCutoffs:
    high_gap: float = 0.05
    moderate_gap: float = 0.24
    potential_gap: float = 0.40
    min_score: float = 0.0
    w_richness: float = 0.02
    w_history: float = 0.05

    def __post_init__(self) -> None:
        if not 0 <= self.high_gap <= self.moderate_gap <= self.potential_gap:
            raise ValueError("tier cut-offs must satisfy 0 <= high_gap <= moderate_gap <= potential_gap")

    def tier(self, gap: float, score: float) -> str:
        if score <= self.min_score or gap > self.potential_gap:
            return IRRELEVANT
        if gap <= self.high_gap:
            return HIGH
        return MODERATE if gap <= self.moderate_gap else POTENTIAL

    def to_json(self) -> dict[str, float]:
        return {k: round(getattr(self, k), 4) for k in self.__dataclass_fields__}

    @classmethod
    def around(cls, margin: float) -> "TierCutoffs":
        """The default gaps' proportions kept around `margin` as the MODERATE gap: HIGH within
        5/24 of it, POTENTIAL within 40/24 (the defaults' 0.05 / 0.24 / 0.40)."""
        base = cls()
        scale = margin / base.moderate_gap
        return cls(round(base.high_gap * scale, 4), round(margin, 4), round(base.potential_gap * scale, 4))


@dataclass(frozen=True)
class TieredScore(SiteScore):
    """A routed site with its tier, the retrieval mode its tier asks for and the signals."""

    tier: str = IRRELEVANT
    similarity: float = 0.0
    richness_norm: float = 0.0
    history: float = PRIOR_RATE
    gap: float = 0.0

    @property
    def mode(self) -> str | None:
        return MODE.get(self.tier)

    def to_json(self) -> dict[str, object]:
        return {**super().to_json(), "tier": self.tier, "similarity": round(self.similarity, 6),
                "richness": round(self.richness_norm, 4), "history": round(self.history, 4),
                "gap": round(self.gap, 6)}


def similarity(scores: Sequence[float]) -> float:
    """The aggregate of one site's top-m summary similarities (best first)."""
    rest = list(scores[1:AGG_HITS]) + [0.0] * (AGG_HITS - min(len(scores), AGG_HITS))
    return scores[0] + AGG_BONUS * float(np.mean([max(s, 0.0) for s in rest])) if scores else 0.0


def assign_tiers(hits: Sequence[SummaryHit], routable: Collection[str], richness: Mapping[str, tuple[int, int]],
                 history: Mapping[str, float], cutoffs: TierCutoffs, lexical: Mapping[str, float] | None = None,
                 lexical_weight: float = 0.0) -> list[TieredScore]:
    """Every routable site with a summary among the top-m hits (or, given `lexical`, a term score
    above 0), tiered, best first."""
    per_site: dict[str, list[SummaryHit]] = {}
    for hit in hits:
        if hit.site_id in routable:
            per_site.setdefault(hit.site_id, []).append(hit)
    terms, top_terms = routable_terms(lexical, routable, lexical_weight)
    for site in (s for s, v in terms.items() if v > 0):
        per_site.setdefault(site, [])
    if not per_site:
        return []
    rich_log = {s: math.log1p(richness.get(s, (0, 0))[1]) for s in per_site}
    top_rich = max(rich_log.values()) or 1.0
    rows = []
    for site, site_hits in per_site.items():
        site_hits.sort(key=lambda h: (-h.score, h.summary_id))
        sim = similarity([h.score for h in site_hits])
        word = terms.get(site)
        rich = rich_log[site] / top_rich
        hist = history.get(site, PRIOR_RATE)
        score = (sim + (lexical_weight * word / top_terms if word else 0.0)
                 + cutoffs.w_richness * rich + cutoffs.w_history * (hist - PRIOR_RATE))
        rows.append((site, score, sim, word, rich, hist, site_hits))
    lead = max(r[1] for r in rows)
    ranked = [TieredScore(site_id=site, score=score, summaries=tuple(h.summary_id for h in hs),
                          richness=sum(h.richness for h in hs), lexical=word, tier=cutoffs.tier(lead - score, score),
                          similarity=sim, richness_norm=rich, history=hist, gap=lead - score)
              for site, score, sim, word, rich, hist, hs in rows]
    ranked.sort(key=lambda s: (-s.score, -s.richness, s.site_id))
    return ranked


@dataclass
class TieredRouter:
    """A Router (query.route) that tiers sites: rank = every candidate with its tier, select =
    the HIGH then MODERATE sites (at most k; the engine asks each in its tier's mode)."""

    index: SummaryIndex | None = None  # richness source; None: richness 0 for all
    history: SiteHistory | None = None
    cutoffs: TierCutoffs = field(default_factory=TierCutoffs)
    lexical_weight: float = 0.0  # the term blend's weight (module docstring); 0: summaries alone

    @property
    def reads_lexical(self) -> bool:
        return self.lexical_weight != 0

    def rank(self, question_vector: np.ndarray, hits: Sequence[SummaryHit], routable: Collection[str],
             lexical: Mapping[str, float] | None = None) -> list[SiteScore]:
        # the sites assign_tiers will rank: those with a summary hit, and (blending) those with a term score
        scored = {s for s, v in (lexical or {}).items() if v > 0 and s in routable} if self.reads_lexical else set()
        sites = {h.site_id for h in hits if h.site_id in routable} | scored
        richness = self.index.richness(sites) if self.index is not None else {}
        history = {s: self.history.score(s) for s in sites} if self.history is not None else {}
        return list(assign_tiers(hits, routable, richness, history, self.cutoffs, lexical, self.lexical_weight))

    def select(self, ranked: Sequence[SiteScore], k: int) -> list[SiteScore]:
        first = [s for s in ranked if getattr(s, "tier", None) == HIGH]
        first += [s for s in ranked if getattr(s, "tier", None) == MODERATE]
        return first[:k]

    def describe(self) -> dict[str, Any]:
        return {"name": type(self).__name__, "model_version": None}


# The fit's default quantiles of the gold sites' gaps: half within HIGH; within MODERATE (asked in the
# first round) the share the gold-site recall target asks for, with the margin the escalation fit
# keeps (gateway.query.calibrate.DEFAULT_MIN_RECALL); nearly all within POTENTIAL (reachable by refinement).
DEFAULT_QUANTILES = (0.5, 0.96, 0.99)


def fit_cutoffs(examples: Iterable[tuple[Sequence[TieredScore], Collection[str]]], *, high_q: float = 0.5,
                moderate_q: float = 0.9, potential_q: float = 0.99, base: TierCutoffs | None = None) -> TierCutoffs:
    """Cut-offs from the fit split: each example is one question's tiered ranking and its gold
    sites (cutoffs_from_gaps over the gold sites' gaps)."""
    gaps = [s.gap for ranked, gold in examples for s in ranked if s.site_id in gold]
    return cutoffs_from_gaps(gaps, quantiles=(high_q, moderate_q, potential_q), base=base)


def cutoffs_from_gaps(gold_gaps: Sequence[float], *, quantiles: Sequence[float] = DEFAULT_QUANTILES,
                      base: TierCutoffs | None = None) -> TierCutoffs:
    """The three gaps as quantiles of the fit split's gold sites' gaps to the leader: `quantiles[0]`
    of the gold sites fall within high_gap, `quantiles[1]` within moderate_gap (asked in the first
    round), `quantiles[2]` within potential_gap (reachable by refinement). Gold sites absent from
    the ranking (no summary in the top-m, no term score) cannot be reached by any gap and are not
    given. No gaps: `base` (the defaults)."""
    base = base or TierCutoffs()
    if len(quantiles) != 3 or not all(0.0 <= q <= 1.0 for q in quantiles) or list(quantiles) != sorted(quantiles):
        raise ValueError("tier quantiles must be three shares in 0..1, in increasing order")
    if not gold_gaps:
        return base
    q = np.quantile(np.asarray(gold_gaps, dtype=np.float64), list(quantiles))
    h, m, p = (float(x) for x in np.maximum.accumulate(np.maximum(q, 0.0)))
    return TierCutoffs(round(h, 4), round(m, 4), round(p, 4), base.min_score, base.w_richness, base.w_history)
