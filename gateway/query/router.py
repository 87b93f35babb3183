"""DGRAG summary matching: the top-m summaries nearest a question vote for the sites that own them.

Per-site score, from that site's hits among the top-m (similarities s1 >= s2 >= ...):

    score = s1 + SECOND_HIT_BONUS * max(s2, 0)        (s2 = 0 when the site has one hit)

Why: the best-matching community is the strongest evidence that a site can answer (DGRAG routes on
it alone). A second matching community means the site covers the topic from more than one angle,
so it earns a small bonus — at most SECOND_HIT_BONUS * s2, so it breaks near-ties but can never
outrank a site whose best summary is clearly closer. Further hits add nothing: a site with many
small communities must not win on volume. Ties break on total richness, then site id, so routing
is deterministic.

Term statistics (sync.terms, scored by gateway.query.lexical's CORI) add

    lexical_weight * lexical(s) / max over sites of lexical

to a site's score, and can bring in a site none of whose summaries made the top-m: at realistic
site sizes the rare words of a factoid question say more about where it lives than a community's
vector. Why relative to the best site: CORI scores shrink with question length and federation
size, while a share of the leader's stays in the units of the summary score and the margin, so one
weight and one margin serve MTRAG's small sites and SQuAD's large ones. Chosen on both fit splits
(16 sites, routing only; benchmarks/README.md, "Term statistics"): weight 0.3 with margin 0.4
(top 5) asked 3.8 sites on SQuAD at gold-site recall 0.858 (summaries alone, margin 0.24: 0.748
at 4.3) and 3.9 on MTRAG at 0.943 (alone: 0.941 at 3.8). A site that publishes no term statistics
is scored by its summaries alone.

What a site publishes about itself is checked against what it answers: the engine subtracts each
site's routing discount (gateway.query.conduct: how far its summaries' promise exceeds its measured
answers, beyond the federation's median) from its score before selection (query.route.discounted),
and CORI normalises sizes by the median site (gateway.query.lexical), so a member claiming every word
or publishing generic summaries cannot keep every question to itself (issue 32).

Sites not in `active_sites` (revoked, expired, unknown) are ignored, as are sites whose best
similarity is not above `min_score` (orthogonal or opposed to the question) and that no question
word points at.

Which sites are called: at most `top_k`, and only those scoring within `margin` of the leader
(score >= best - margin). Every call costs latency and bytes, and RAGRoute found most source
queries unnecessary; a site whose best summary is far less similar than the leader's rarely holds
the answer, while sites close to the leader are all kept, so a question that spans sites still
reaches each of them. The number of sites asked therefore adapts to how clear the routing is.
Scored by summaries alone (MTRAG, 16 random shards, 511 questions, routing only), margin 0.24
(MiniLM's summary_margin, adapters/embedder/scales.toml) with at most 5 sites reached gold-site recall 0.947 at 3.98 sites, and the same
rule on a router that sees every chunk 0.953 at 3.96 (benchmarks/README.md); with term statistics
the margin is [gateway] site_margin (above). Both margins and the term weight are in the embedder's
cosine units: where the configuration leaves site_margin and lexical_weight out, they are the
embedder's (scales.toml; core.config.load_config), so a federation on bge-small gets bge's values.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Mapping, Sequence

from hansa.core.config import GatewayConfig
from hansa.core.errors import InputError
from hansa.gateway.index.summaries import SummaryHit

SECOND_HIT_BONUS = 0.1
DEFAULT_MARGIN = GatewayConfig.site_margin  # [gateway] site_margin: summaries and term statistics
# The margin for scores from summaries alone (the learned router's cold start: its features are the
# summaries') is the embedder's `summary_margin` (adapters/embedder/scales.toml): 0.24 for MiniLM.
DEFAULT_LEXICAL_WEIGHT = GatewayConfig.lexical_weight  # [gateway] lexical_weight


@dataclass(frozen=True)
class SiteScore:
    site_id: str
    score: float
    summaries: tuple[str, ...]  # evidence: the site's matching summary ids, best first
    richness: int  # summed over the matching summaries
    lexical: float | None = None  # the site's CORI term score (None: no term statistics used)

    @property
    def mode(self) -> str | None:
        """The retrieval mode to ask the site in (a tiered router's, query.tiers); None: the query's."""
        return None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"site_id": self.site_id, "score": round(self.score, 6),
                                  "summaries": list(self.summaries)}
        if self.lexical is not None:
            out["lexical"] = round(self.lexical, 6)
        return out


def routable_terms(lexical: Mapping[str, float] | None, active_sites: Collection[str],
                   lexical_weight: float) -> tuple[dict[str, float], float]:
    """The routable sites' CORI term scores (gateway.query.lexical) and the best of them, what a router
    blends in as `lexical_weight x score / best`; empty when the blend is off."""
    terms = {s: v for s, v in (lexical or {}).items() if s in active_sites} if lexical_weight else {}
    return terms, max(terms.values(), default=0.0)


def score_sites(hits: Sequence[SummaryHit], active_sites: Collection[str], min_score: float = 0.0,
                lexical: Mapping[str, float] | None = None,
                lexical_weight: float = DEFAULT_LEXICAL_WEIGHT) -> list[SiteScore]:
    """Every routable site with hits (or, given `lexical`, a term score above 0), ranked best first
    (what a trace shows as considered)."""
    per_site: dict[str, list[SummaryHit]] = {}
    for hit in hits:
        if hit.site_id in active_sites:
            per_site.setdefault(hit.site_id, []).append(hit)
    terms, leader = routable_terms(lexical, active_sites, lexical_weight)
    ranked: list[SiteScore] = []
    for site_id in per_site.keys() | {s for s, v in terms.items() if v > 0}:
        site_hits = sorted(per_site.get(site_id, ()), key=lambda h: (-h.score, h.summary_id))
        best = site_hits[0].score if site_hits else 0.0
        word = terms.get(site_id)
        if best <= min_score and not word:
            continue
        second = site_hits[1].score if len(site_hits) > 1 else 0.0
        vector = best + SECOND_HIT_BONUS * max(second, 0.0) if best > min_score else 0.0
        ranked.append(
            SiteScore(
                site_id=site_id,
                score=vector + (lexical_weight * word / leader if word else 0.0),
                summaries=tuple(h.summary_id for h in site_hits),
                richness=sum(h.richness for h in site_hits),
                lexical=word,
            )
        )
    ranked.sort(key=lambda s: (-s.score, -s.richness, s.site_id))
    return ranked


def select_sites(ranked: Sequence[SiteScore], top_k: int, margin: float = DEFAULT_MARGIN) -> list[SiteScore]:
    """From ranked sites, the ones to call: the first `top_k` within `margin` of the leader."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise InputError(f"top_k sites must be a positive integer, got {top_k!r}")
    if not ranked:
        return []
    floor = ranked[0].score - margin
    return [s for s in ranked[:top_k] if s.score >= floor]


def route(
    hits: Sequence[SummaryHit],
    top_k: int,
    active_sites: Collection[str],
    min_score: float = 0.0,
    margin: float = DEFAULT_MARGIN,
) -> list[SiteScore]:
    """The sites to ask, best first: DGRAG's top-k, pruned of clearly weaker sites."""
    return select_sites(score_sites(hits, active_sites, min_score), top_k, margin)
