"""DGRAG summary matching: the top-m summaries nearest a question vote for the sites that own them.

Per-site score, from that site's hits among the top-m (similarities s1 >= s2 >= ...):

    score = s1 + SECOND_HIT_BONUS * max(s2, 0)        (s2 = 0 when the site has one hit)

Why: the best-matching community is the strongest evidence that a site can answer (DGRAG routes on
it alone). A second matching community means the site covers the topic from more than one angle,
so it earns a small bonus — at most SECOND_HIT_BONUS * s2, so it breaks near-ties but can never
outrank a site whose best summary is clearly closer. Further hits add nothing: a site with many
small communities must not win on volume. Ties break on total richness, then site id, so routing
is deterministic.

Sites not in `active_sites` (revoked, expired, unknown) are ignored, as are sites whose best
similarity is not above `min_score` (orthogonal or opposed to the question).

Which sites are called: at most `top_k`, and only those scoring at least MIN_RELATIVE_SCORE times
the leader's score. Every call costs latency and bytes, and RAGRoute found most source queries
unnecessary; a site whose best summary is far less similar than the leader's rarely holds the
answer. (On the bundled MTRAG demo, the domain holding the gold passage leads with 0.45-0.68 and
the others trail at 0.09-0.31, i.e. below 0.7 x the leader.) Sites scoring within the margin are
all kept, so a question that spans sites still reaches each of them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Sequence

from hansa.core.errors import InputError
from hansa.gateway.index import SummaryHit

SECOND_HIT_BONUS = 0.1
MIN_RELATIVE_SCORE = 0.75


@dataclass(frozen=True)
class SiteScore:
    site_id: str
    score: float
    summaries: tuple[str, ...]  # evidence: the site's matching summary ids, best first
    richness: int  # summed over the matching summaries

    def to_json(self) -> dict[str, object]:
        return {"site_id": self.site_id, "score": round(self.score, 6), "summaries": list(self.summaries)}


def score_sites(hits: Sequence[SummaryHit], active_sites: Collection[str], min_score: float = 0.0) -> list[SiteScore]:
    """Every routable site with hits, ranked best first (what a trace shows as considered)."""
    per_site: dict[str, list[SummaryHit]] = {}
    for hit in hits:
        if hit.site_id in active_sites:
            per_site.setdefault(hit.site_id, []).append(hit)
    ranked: list[SiteScore] = []
    for site_id, site_hits in per_site.items():
        site_hits.sort(key=lambda h: (-h.score, h.summary_id))
        best = site_hits[0].score
        if best <= min_score:
            continue
        second = site_hits[1].score if len(site_hits) > 1 else 0.0
        ranked.append(
            SiteScore(
                site_id=site_id,
                score=best + SECOND_HIT_BONUS * max(second, 0.0),
                summaries=tuple(h.summary_id for h in site_hits),
                richness=sum(h.richness for h in site_hits),
            )
        )
    ranked.sort(key=lambda s: (-s.score, -s.richness, s.site_id))
    return ranked


def select_sites(ranked: Sequence[SiteScore], top_k: int, min_relative: float = MIN_RELATIVE_SCORE) -> list[SiteScore]:
    """From ranked sites, the ones to call: the first `top_k` within `min_relative` of the leader."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise InputError(f"top_k sites must be a positive integer, got {top_k!r}")
    if not ranked:
        return []
    floor = min_relative * ranked[0].score
    return [s for s in ranked[:top_k] if s.score >= floor]


def route(
    hits: Sequence[SummaryHit],
    top_k: int,
    active_sites: Collection[str],
    min_score: float = 0.0,
    min_relative: float = MIN_RELATIVE_SCORE,
) -> list[SiteScore]:
    """The sites to ask, best first: DGRAG's top-k, pruned of clearly weaker sites."""
    return select_sites(score_sites(hits, active_sites, min_score), top_k, min_relative)
