"""SCOUT-RAG's Stage III without an LLM: budgeted Depth / Breadth / Hybrid refinement.

After each round the engine fuses the answer and this refiner measures it (query.quality: C, V,
Q = (C + V) / 2), then picks the next round by Eq. 6 — with Hybrid tested first: as the paper
writes it, Depth's condition (C < 0.75) already holds whenever Hybrid's (C < 0.75 and V < 0.70)
does, so Hybrid could never be chosen:

  Hybrid   C < completeness and V < breadth, time for both      -> depth + breadth at once
  Depth    C < completeness, a HIGH site not yet followed up     -> each such HIGH site gets a
           follow-up question built from the uncovered key terms, asked in local mode
  Breadth  V < breadth (or C < completeness with no Depth left)  -> the next `breadth_batch`
           POTENTIAL sites (then any ranked, uncalled, non-IRRELEVANT ones), best first
  Stop     Q >= quality, no gain (Q rose less than min_gain over the best before), or nothing
           the remaining budget allows

Time: the paper's thresholds are seconds of LLM work (T_r > 15 / 10 / 20 s); here a round is a
parallel wait for sites, so they are multiples of the slowest round so far (Depth 1.5x, Breadth 1x,
Hybrid 2x): a round is tried only when it is likely to finish within the time left. Sites and
bytes are the engine's to enforce (it caps a round to what is left). The engine keeps the best
answer seen, so a worse late round costs time, never quality.

Without a tiered router (no tiers in `considered`) every ranked, uncalled site counts as
POTENTIAL and no site as HIGH: Breadth only.
"""
from __future__ import annotations

from dataclasses import dataclass

from hansa.gateway.query.quality import Quality, answer_quality
from hansa.gateway.query.refine import RefineState, RefineStep
from hansa.gateway.query.tiers import HIGH, IRRELEVANT, POTENTIAL
from hansa.gateway.query.fusion import FusedAnswer

DEPTH_TIME, BREADTH_TIME, HYBRID_TIME = 1.5, 1.0, 2.0  # x the slowest round so far


def followup_question(question: str, uncovered: tuple[str, ...]) -> str:
    """What a Depth round asks: the question's uncovered key terms first (so a site's vector and
    word match lean on them), then the question for context."""
    return f"{' '.join(uncovered)}: {question}" if uncovered else question


@dataclass(frozen=True)
class BudgetedRefiner:
    name: str = "budgeted"
    completeness: float = 0.75
    breadth: float = 0.70
    quality_target: float = 0.85
    min_gain: float = 0.01
    breadth_batch: int = 2

    def quality(self, question: str, fused: FusedAnswer) -> Quality:
        return answer_quality(question, fused)

    def next_round(self, state: RefineState) -> RefineStep:
        q: Quality | None = state.quality
        if q is None:
            return RefineStep(stop="no answer quality measured")
        if q.value >= self.quality_target:
            return RefineStep(stop=f"quality {q.value:.2f} reached {self.quality_target}")
        past = state.qualities[:-1]
        if past and q.value - max(past) < self.min_gain:
            return RefineStep(stop=f"no gain (quality {q.value:.2f}, best before {max(past):.2f})")

        slowest = max(state.rounds_ms, default=0.0)

        def affordable(factor: float) -> bool:
            return state.time_left_ms is None or state.time_left_ms > factor * slowest

        asked: dict[str, int] = {}
        for call in state.calls:
            asked[call.site_id] = asked.get(call.site_id, 0) + 1
        depth_sites = [s.site_id for s in state.considered
                       if getattr(s, "tier", None) == HIGH and asked.get(s.site_id) == 1]
        pool = [s for s in state.considered if s.site_id not in asked and getattr(s, "tier", POTENTIAL) != IRRELEVANT]
        pool.sort(key=lambda s: getattr(s, "tier", POTENTIAL) != POTENTIAL)  # POTENTIAL first, rank kept
        breadth_sites = [s.site_id for s in pool[:self.breadth_batch]]

        low_c, low_v = q.completeness < self.completeness, q.breadth < self.breadth
        can_depth = low_c and bool(depth_sites and q.uncovered)
        followups = {s: followup_question(state.request.question, q.uncovered) for s in depth_sites}
        if can_depth and low_v and breadth_sites and affordable(HYBRID_TIME):
            return RefineStep(tuple(depth_sites + breadth_sites), kind="hybrid", followups=followups)
        if can_depth and affordable(DEPTH_TIME):
            return RefineStep(tuple(depth_sites), kind="depth", followups=followups)
        if (low_v or low_c) and breadth_sites and affordable(BREADTH_TIME):
            return RefineStep(tuple(breadth_sites), kind="breadth")
        if low_v or low_c:
            return RefineStep(stop="nothing left to ask within the budget")
        return RefineStep(stop="completeness and breadth need nothing more")
