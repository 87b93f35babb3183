"""SCOUT-RAG's tiers and budgeted refinement on the fast tier: the real sites of the `federation`
fixture through InProcessSiteTransport (signed and verified), watched by a spy that records what
each site was asked (mode, question) before handing the call on."""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator, Sequence

import pytest

from hansa.core.config import GatewayConfig
from hansa.gateway.trust.apikeys import API_KEYS_FILE, ApiKeyStore
from hansa.gateway.client import per_target
from hansa.gateway.query.request import Budget, QueryRequest
from hansa.gateway.query.budgeted import BudgetedRefiner
from hansa.gateway.query.policy import QueryPolicy, refine_policy, tiers_policy
from hansa.gateway.query.refine import RefineState
from hansa.gateway.query.tiers import TierCutoffs, TieredRouter
from hansa.gateway.query.assess import Assessment
from hansa.gateway.query.quality import Quality, answer_quality, key_terms
from hansa.gateway.query.tiers import HIGH, IRRELEVANT, MODERATE, POTENTIAL, TieredScore, fit_cutoffs
from hansa.gateway.query.fusion import FusedAnswer, FusedSentence
from hansa.gateway.query.reliability import PRIOR_RATE, SiteHistory
from hansa.gateway.service import Gateway
from hansa.gateway.transport import InProcessSiteTransport
from hansa.plugin.api import create_site_app
from hansa.sync.wire import RetrieveRequest

GOVT_Q = "What does FEMA do after a disaster?"
# "zanzibar" is in no passage: completeness stays below 1, so a Depth follow-up has a term to ask for.
UNCOVERED_Q = "What does FEMA do after a disaster in Zanzibar?"
SPLIT = TierCutoffs(high_gap=0.0, moderate_gap=1.0, potential_gap=1.0)  # leader HIGH, the rest MODERATE
HELD = TierCutoffs(high_gap=0.0, moderate_gap=0.0, potential_gap=2.0)  # leader HIGH, the rest POTENTIAL
ALWAYS = dict(quality_target=1.01, completeness=1.01, breadth=1.01)  # thresholds no answer meets
BREADTH = dict(quality_target=1.01, completeness=0.0, breadth=1.01)  # ... and never Depth


class SpyTransport(InProcessSiteTransport):
    """The real in-process transport, recording (site, mode, question) of every call it makes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.asked: list[tuple[str, str, str]] = []

    def call(self, targets, request, timeout_s, **kw):  # type: ignore[no-untyped-def]
        for target, req in zip(targets, per_target(request, len(targets))):
            self.asked.append((target.site_id, req.mode, req.question))
        return super().call(targets, request, timeout_s, **kw)


@pytest.fixture(scope="module")
def gw(federation, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    assert federation.gateway_service.index.flush(60)
    apps = {site_id: create_site_app(h.ctx) for site_id, h in federation.sites.items()}
    embedder = next(iter(federation.sites.values())).ctx.embedder
    keys = ApiKeyStore(tmp_path_factory.mktemp("refine-keys") / API_KEYS_FILE)
    service = Gateway.open(GatewayConfig(top_k_sites=4, site_timeout_s=60.0), embedder=embedder,
                           vector_store=federation.gateway_vectors, registry=federation.registry, api_keys=keys,
                           transport=lambda identity, cfg: SpyTransport(identity, apps))
    yield service
    service.close()


def ask(gw: Gateway, policy: QueryPolicy, question: str = GOVT_Q, **kw: Any) -> tuple[Any, list[tuple[str, str, str]]]:
    spy: SpyTransport = gw.transport  # type: ignore[assignment]
    spy.asked.clear()
    result = gw.query(QueryRequest(question=question, **kw), client="refine", policy=policy)
    return result, list(spy.asked)


# -- tiers ----------------------------------------------------------------------------------------------

def test_tiers_ask_high_sites_globally_and_moderate_ones_locally(gw: Gateway) -> None:
    result, asked = ask(gw, tiers_policy(gw, SPLIT))
    trace = result.trace
    assert trace.tiers == {"govt": HIGH, "clapnq": MODERATE}
    assert sorted(asked) == sorted([("govt", "global", GOVT_Q), ("clapnq", "local", GOVT_Q)])
    assert trace.rounds[0].modes == {"govt": "global", "clapnq": "local"}
    considered = {s.site_id: s for s in trace.sites_considered}
    assert all(isinstance(s, TieredScore) for s in considered.values())
    assert considered["govt"].tier == HIGH and considered["govt"].gap == 0
    assert considered["clapnq"].similarity < considered["govt"].similarity
    assert trace.stop_reason == "one round (no refinement)" and trace.policy["name"] == "tiers"


def test_potential_sites_are_held_back_by_tiers_and_asked_by_breadth(gw: Gateway) -> None:
    held, asked = ask(gw, tiers_policy(gw, HELD))
    assert held.trace.tiers == {"govt": HIGH, "clapnq": POTENTIAL} and asked == [("govt", "global", GOVT_Q)]
    refined, asked = ask(gw, refine_policy(gw, HELD, BudgetedRefiner(**BREADTH)))
    rounds = refined.trace.rounds
    assert [(r.kind, r.sites) for r in rounds] == [("routed", ("govt",)), ("breadth", ("clapnq",))]
    assert asked[1] == ("clapnq", "local", GOVT_Q)  # SCOUT-RAG Eq. 7: POTENTIAL sites locally
    assert all(r.quality is not None and "ms" in r.to_json() and "bytes_in" in r.to_json() for r in rounds)
    assert refined.trace.best_round in (0, 1)


def test_hybrid_is_chosen_before_depth_and_asks_follow_ups_locally(gw: Gateway) -> None:
    result, asked = ask(gw, refine_policy(gw, HELD, BudgetedRefiner(**ALWAYS)), UNCOVERED_Q)
    first = result.trace.rounds[0].quality
    assert first is not None and "zanzibar" in first.uncovered and first.completeness < 1
    second = result.trace.rounds[1]
    assert second.kind == "hybrid" and sorted(second.sites) == ["clapnq", "govt"] and second.followups is not None
    followup = second.followups["govt"]
    terms, _, rest = followup.partition(": ")  # the uncovered key terms, then the question
    assert "zanzibar" in terms.split() and set(terms.split()) == set(first.uncovered) and rest == UNCOVERED_Q
    assert ("govt", "local", followup) in asked and ("clapnq", "local", UNCOVERED_Q) in asked
    assert result.trace.budget.spent.sites == 3  # calls, the follow-up included


def test_depth_follows_up_at_high_sites_when_nothing_is_left_for_breadth(gw: Gateway) -> None:
    result, asked = ask(gw, refine_policy(gw, SPLIT, BudgetedRefiner(**ALWAYS)), UNCOVERED_Q)
    kinds = [(r.kind, r.sites) for r in result.trace.rounds]
    assert kinds[:2] == [("routed", ("govt", "clapnq")), ("depth", ("govt",))]
    assert [a[:2] for a in asked].count(("govt", "local")) == 1  # first asked globally, then the follow-up
    assert len(kinds) == 2  # each HIGH site is followed up once; no POTENTIAL site: stop
    assert result.trace.stop_reason == "nothing left to ask within the budget" or "no gain" in result.trace.stop_reason


# -- budget and stopping ------------------------------------------------------------------------------

def test_refinement_stops_on_the_sites_budget(gw: Gateway) -> None:
    result, asked = ask(gw, refine_policy(gw, HELD, BudgetedRefiner(**BREADTH)),
                        budget=Budget(sites=1))
    assert [a[0] for a in asked] == ["govt"] and result.trace.stop_reason == "budget"
    assert result.citations  # the first round's answer stands


def test_refinement_stops_on_the_bytes_budget(gw: Gateway) -> None:
    policy = refine_policy(gw, HELD, BudgetedRefiner(**BREADTH))
    free, _ = ask(gw, policy)
    first = free.trace.rounds[0]
    assert len(free.trace.rounds) == 2  # unbudgeted, breadth runs
    budget = first.bytes_out + first.bytes_in + 50  # room for round one, not for another request
    capped, asked = ask(gw, policy, budget=Budget(bytes=budget))
    assert [a[0] for a in asked] == ["govt"] and capped.trace.stop_reason == "budget"
    assert capped.trace.budget.spent.bytes <= budget


def _state(quality: Quality | None, qualities: Sequence[float], time_left_ms: float | None,
           rounds_ms: Sequence[float], considered: Sequence[TieredScore] = ()) -> RefineState:
    return RefineState(QueryRequest(question=GOVT_Q), considered, frozenset(), (), Assessment(), len(rounds_ms),
                       None, tuple(qualities), quality, time_left_ms, tuple(rounds_ms))


def _tiered(site: str, tier: str) -> TieredScore:
    return TieredScore(site_id=site, score=0.5, summaries=(), richness=0, tier=tier)


def test_the_refiner_stops_on_quality_no_gain_and_time_and_picks_by_eq6() -> None:
    r = BudgetedRefiner()
    narrow = Quality(1.0, 0.25, ())  # complete but from one document of one site
    pool = [_tiered("a", POTENTIAL), _tiered("b", POTENTIAL), _tiered("c", POTENTIAL), _tiered("x", IRRELEVANT)]
    assert "reached" in r.next_round(_state(Quality(0.9, 0.9, ()), [0.9], None, [50])).stop
    assert "no gain" in r.next_round(_state(narrow, [0.7, 0.625], None, [50, 50], pool)).stop
    assert r.next_round(_state(narrow, [0.625], 40.0, [50], pool)).stop == "nothing left to ask within the budget"
    step = r.next_round(_state(narrow, [0.625], 60.0, [50], pool))
    assert step.kind == "breadth" and step.sites == ("a", "b") and step.stop is None
    assert r.next_round(_state(narrow, [0.625], None, [50])).stop == "nothing left to ask within the budget"
    assert r.next_round(_state(None, [], None, [50])).stop == "no answer quality measured"


def test_the_time_budget_bounds_refinement(gw: Gateway) -> None:
    policy = refine_policy(gw, HELD, BudgetedRefiner(**BREADTH))
    free, _ = ask(gw, policy)
    spent = free.trace.total_ms
    tight = max(1, int(free.trace.rounds[0].ms + free.trace.routing_ms))  # little beyond round one
    result, asked = ask(gw, policy, budget=Budget(time_ms=tight))
    assert len(asked) <= 1 and result.trace.stop_reason in ("budget", "nothing left to ask within the budget")
    assert spent > 0


# -- the best answer seen -------------------------------------------------------------------------------

@dataclass(frozen=True)
class FewerSitesIsBetter(BudgetedRefiner):
    """A refiner whose judge prefers answers citing fewer sites: the second round can only make the
    answer worse, so the engine must return the first."""

    name: str = "fewer-sites"
    seen: list[FusedAnswer] = field(default_factory=list, compare=False)

    def quality(self, question: str, fused: FusedAnswer) -> Quality:
        self.seen.append(fused)
        v = 1.0 / max(1, len({c.site_id for c in fused.citations}))
        return Quality(v, v, ())


def test_the_best_answer_seen_is_returned_when_a_later_round_is_worse(gw: Gateway) -> None:
    refiner = FewerSitesIsBetter(**BREADTH)
    # without the reader: it re-reads the chosen round's answer (and may hop), so the object returned
    # is no longer the round's own; this pins which round refinement keeps
    result, _ = ask(gw, replace(refine_policy(gw, HELD, refiner), reading=False))
    rounds = result.trace.rounds
    first, second = (r.quality for r in rounds)
    assert first is not None and second is not None and second.value < first.value
    assert result.trace.best_round == 0 and result.fused is refiner.seen[0]
    assert {c["site_id"] for c in result.citations} == {"govt"} and "no gain" in result.trace.stop_reason


# -- quality, cut-offs, history, transport --------------------------------------------------------------

def test_quality_counts_key_terms_in_the_answer_and_its_sites_and_documents() -> None:
    assert key_terms("Where does the Penobscot River flow, and the river's mouth?")[:3] == ["penobscot", "river", "flow"]
    sentences = (FusedSentence("The Penobscot River flows south.", "a", "d1", 0.5, 1),
                 FusedSentence("Its mouth is at Penobscot Bay.", "b", "d2", 0.4, 2))
    q = answer_quality("Where does the Penobscot River flow into the sea?", FusedAnswer("", (), sentences))
    assert q.uncovered == ("sea",) and q.completeness == pytest.approx(3 / 4)  # flow/flows fold alike
    assert q.breadth == pytest.approx((1 + 2 / 3) / 2)
    assert answer_quality("Penobscot?", FusedAnswer("No answer.", (), ())).value == 0


def test_fit_cutoffs_takes_quantiles_of_the_gold_sites_gaps() -> None:
    def ranked(*gaps: float) -> list[TieredScore]:
        return [TieredScore(site_id=f"s{i}", score=1 - g, summaries=(), richness=0, gap=g) for i, g in enumerate(gaps)]

    examples = [(ranked(0.0, 0.1, 0.3), {"s0", "s1"}), (ranked(0.0, 0.2, 0.5), {"s0", "s2"})]
    fit = fit_cutoffs(examples, high_q=0.5, moderate_q=0.75, potential_q=1.0)
    assert (fit.high_gap, fit.potential_gap) == (0.05, 0.5) and 0.05 <= fit.moderate_gap <= 0.5
    assert fit_cutoffs([]) == TierCutoffs()
    with pytest.raises(ValueError):
        TierCutoffs(high_gap=0.3, moderate_gap=0.1)


def test_tiers_blend_the_sites_term_scores_as_the_summary_router_does() -> None:
    """A site whose summaries trail but whose published terms match the question best moves up by
    lexical_weight, exactly as gateway.query.route.score_sites ranks it, and a site known only by its
    terms is tiered too; without a weight the terms are ignored (SCOUT-RAG's summaries alone)."""
    from hansa.gateway.index.summaries import SummaryHit
    from hansa.gateway.query.route import score_sites

    hits = [SummaryHit("a", "a1", 0.60, 5), SummaryHit("b", "b1", 0.50, 5), SummaryHit("a", "a2", 0.40, 5)]
    lexical = {"a": 0.2, "b": 1.0, "c": 0.5}
    flat = TierCutoffs(w_richness=0.0, w_history=0.0)
    plain = TieredRouter(cutoffs=flat).rank(None, hits, {"a", "b", "c"}, lexical)  # type: ignore[arg-type]
    assert [s.site_id for s in plain] == ["a", "b"] and all(s.lexical is None for s in plain)
    blended = TieredRouter(cutoffs=flat, lexical_weight=0.3).rank(None, hits, {"a", "b", "c"}, lexical)  # type: ignore[arg-type]
    assert TieredRouter(lexical_weight=0.3).reads_lexical and not TieredRouter().reads_lexical
    assert [s.site_id for s in blended] == ["b", "a", "c"]
    by_site = {s.site_id: s for s in blended}
    assert by_site["b"].score == pytest.approx(0.50 + 0.3 * 1.0) and by_site["b"].tier == HIGH
    assert by_site["c"].score == pytest.approx(0.3 * 0.5) and by_site["c"].similarity == 0.0
    summary = {s.site_id: s.score for s in score_sites(hits, {"a", "b", "c"}, lexical=lexical, lexical_weight=0.3)}
    assert summary["c"] == pytest.approx(by_site["c"].score)  # the same term share, the same weight
    assert by_site["a"].score - by_site["a"].similarity == pytest.approx(0.3 * 0.2)


def test_tier_cutoffs_around_a_margin_keep_the_defaults_proportions_and_the_policies_use_the_gateways(gw: Gateway) -> None:
    around = TierCutoffs.around(0.48)
    assert (around.high_gap, around.moderate_gap, around.potential_gap) == (0.1, 0.48, 0.8)
    assert TierCutoffs.around(TierCutoffs().moderate_gap) == TierCutoffs()
    router = tiers_policy(gw).router
    assert isinstance(router, TieredRouter)
    assert router.lexical_weight == gw.cfg.lexical_weight and router.cutoffs == TierCutoffs.around(gw.cfg.site_margin)
    assert refine_policy(gw, HELD).router.cutoffs == HELD  # type: ignore[union-attr]


def test_history_decays_persists_and_survives_a_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "site-history.json"
    h = SiteHistory(path, half_life=1.0)
    assert h.score("a") == PRIOR_RATE
    h.record(["a", "b"], {"a"})
    assert h.score("a") > PRIOR_RATE > h.score("b")
    h.record(["b"], {"b"})  # a's record halves: its score drifts back towards the prior
    h.save()
    again = SiteHistory(path, half_life=1.0)
    assert again.scores() == pytest.approx(h.scores())
    path.write_text("{not json")
    assert SiteHistory(path).scores() == {}
    path.write_text(json.dumps({"sites": {"a": [1.0, 5.0]}}))  # cited more than asked: refused
    assert SiteHistory(path).scores() == {}


def test_the_gateway_records_which_sites_answers_cite(gw: Gateway) -> None:
    before = gw.history.score("govt")
    ask(gw, QueryPolicy(router=TieredRouter(gw.index, gw.history)))
    assert gw.history.score("govt") != before


def test_per_target_requests_must_match_the_targets() -> None:
    one = RetrieveRequest(question="q")
    assert per_target(one, 2) == [one, one]
    with pytest.raises(ValueError, match="2 retrieve requests for 3 sites"):
        per_target([one, one], 3)
