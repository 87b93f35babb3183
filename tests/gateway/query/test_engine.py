"""The query engine's fast tier: the Gateway service over the real sites of the `federation`
fixture, reached through InProcessSiteTransport (signed and verified, no sockets). Routing,
origins, budgets, gate/refine contracts and the trace; plus the request's validation alone."""
from __future__ import annotations

import json
from dataclasses import fields, replace
from importlib import resources
from pathlib import Path
from typing import Any, Iterator

import pytest

from hansa.adapters.embedder.memo import MemoEmbedder
from hansa.core.config import Config, GatewayConfig
from hansa.core.errors import ConfigError, InputError, NotFoundError, VerificationError
from hansa.gateway.trust.apikeys import API_KEYS_FILE, ApiKeyStore
from hansa.gateway.http.app import create_gateway_app
from hansa.gateway.client import OK, TIMEOUT, SiteCall
from hansa.gateway.query.route import QuestionWords
from hansa.gateway.query.assess import Assessment, assess
from hansa.gateway.query.request import Budget, QueryRequest
from hansa.gateway.query.gate import GateDecision
from hansa.gateway.query.engine import QueryTrace
from hansa.gateway.query.policy import QueryPolicy
from hansa.gateway.query.refine import RefineState, RefineStep
from hansa.gateway.query.request import (
    BUDGET_LIMITS,
    MAX_CONVERSATION_TURNS,
    MAX_EXPLICIT_SITES,
    MAX_TOP_K,
    MAX_TOP_K_SITES,
    authorize_origin,
)
from hansa.gateway.trust.registry import REVOKED
from hansa.gateway.service import Gateway
from hansa.gateway.transport import HttpSiteTransport, InProcessSiteTransport
from hansa.plugin.api import create_site_app
from hansa.sync.terms import TermSketch
from hansa.sync.wire import Citation, PartialAnswer

GOVT_Q = "What does FEMA do after a disaster?"
RIVER_Q = "Where does the Penobscot River flow?"
STAGES = {"route", "call", "assess", "refine", "abstain", "fuse"}


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> ApiKeyStore:
    return ApiKeyStore(tmp_path_factory.mktemp("engine-keys") / API_KEYS_FILE)


@pytest.fixture(scope="module")
def gw(federation, keys) -> Iterator[Gateway]:
    assert federation.gateway_service.index.flush(60)  # the durable copy this gateway restores from
    apps = {site_id: create_site_app(h.ctx) for site_id, h in federation.sites.items()}
    embedder = next(iter(federation.sites.values())).ctx.embedder
    service = Gateway.open(GatewayConfig(top_k_sites=1, site_timeout_s=60.0), embedder=embedder,
                           vector_store=federation.gateway_vectors, registry=federation.registry, api_keys=keys,
                           transport=lambda identity, cfg: InProcessSiteTransport(identity, apps))
    yield service
    service.close()


def called(trace: QueryTrace) -> list[str]:
    return [c.site_id for c in trace.per_site]


# -- routing and the trace --------------------------------------------------------------------------

def test_routes_each_question_to_the_site_that_holds_it_and_traces_every_stage(gw: Gateway) -> None:
    for question, site in ((GOVT_Q, "govt"), (RIVER_Q, "clapnq")):
        result = gw.query(QueryRequest(question=question), client="engine")
        trace = result.trace
        assert called(trace) == list(trace.sites_called) == [site], trace.sites_considered
        assert trace.per_site[0].status == OK and result.citations and result.citations[0]["site_id"] == site
        assert set(trace.stages_ms) == STAGES and trace.gate is None and "gate" not in trace.to_json()
        assert [(r.round, r.kind, r.sites) for r in trace.rounds] == [(0, "routed", (site,))]
        assert 0 < trace.waiting_ms <= trace.total_ms
        assert trace.gateway_overhead_ms == pytest.approx(trace.total_ms - trace.waiting_ms, abs=0.2)
        assert trace.bytes_in == trace.per_site[0].bytes_in > 0
        assert trace.budget.spent.sites == 1 and trace.policy["name"] == "hansa"
        assert trace.assessment.passages > 0 and trace.assessment.best_relevance > 0.3
        assert trace.stop_reason == "one round (no refinement)"


def test_routing_scores_each_site_by_its_published_terms_too(gw: Gateway) -> None:
    """The federation's sites publish term statistics; the trace shows each site's CORI score, and
    routing by the words alone would pick the same site for these questions."""
    assert gw.sites_view()["sites"] and all(s["terms"] for s in gw.sites_view()["sites"])
    for question, site in ((GOVT_Q, "govt"), (RIVER_Q, "clapnq")):
        considered = gw.query(QueryRequest(question=question), client="engine").trace.sites_considered
        lexical = {s.site_id: s.lexical for s in considered}
        assert max(lexical, key=lexical.get) == site, considered


def test_explicit_sites_are_called_as_named_and_unknown_ones_are_404(gw: Gateway) -> None:
    trace = gw.query(QueryRequest(question=GOVT_Q, sites=("clapnq", "govt")), client="engine").trace
    assert trace.selection == "explicit" and sorted(called(trace)) == ["clapnq", "govt"]
    with pytest.raises(NotFoundError):
        gw.query(QueryRequest(question=GOVT_Q, sites=("nowhere",)), client="engine")


def test_a_follow_up_is_routed_with_its_conversation(gw: Gateway) -> None:
    follow_up = "What does it do after one?"
    alone = gw.query(QueryRequest(question=follow_up), client="engine").trace
    assert alone.standalone_question is None
    trace = gw.query(QueryRequest(question=follow_up, conversation=("Tell me about FEMA and disaster relief.",)),
                     client="engine").trace
    assert trace.standalone_question is not None and trace.standalone_question.startswith(follow_up)
    assert "fema" in trace.standalone_question and called(trace) == ["govt"] and trace.conversation_turns == 1


# -- origins ------------------------------------------------------------------------------------------

def test_the_origin_is_asked_first_then_escalation_skips_it(gw: Gateway) -> None:
    trace = gw.query(QueryRequest(question=GOVT_Q, origin="clapnq", top_k_sites=2), client="engine").trace
    assert trace.rounds[0].kind == "origin" and trace.rounds[0].sites == ("clapnq",)
    assert trace.gate is not None and trace.gate.decision == "escalate" and "gate" in trace.stages_ms
    assert called(trace).count("clapnq") == 1 and "govt" in called(trace)  # escalated, origin not asked twice


def test_a_gate_that_trusts_the_origin_answers_from_it_alone(gw: Gateway) -> None:
    class TrustOrigin:
        name = "trust-origin"

        def decide(self, assessment: Assessment) -> GateDecision:
            return GateDecision(assessment.best_relevance > 0.3, "relevant enough", assessment.best_relevance)

    policy = QueryPolicy(name="gated", gate=TrustOrigin())
    result = gw.query(QueryRequest(question=GOVT_Q, origin="govt"), client="engine", policy=policy)
    assert called(result.trace) == ["govt"] and result.decision is not None and result.decision.answer
    assert result.trace.stop_reason == "answered by the origin" and result.trace.policy["gate"] == "trust-origin"
    out_of_domain = gw.query(QueryRequest(question=RIVER_Q, origin="govt"), client="engine", policy=policy)
    assert "clapnq" in called(out_of_domain.trace)  # the origin's evidence is weak: escalate


def test_unknown_origin_is_404_and_a_key_speaks_only_for_its_origins(gw: Gateway, keys: ApiKeyStore) -> None:
    with pytest.raises(NotFoundError, match="origin 'atlantis'"):
        gw.query(QueryRequest(question=GOVT_Q, origin="atlantis"), client="engine")
    key = keys.create("govt-desk", origins=["govt"])
    assert keys.allowed_origins("govt-desk") == {"govt"} and keys.allowed_origins("engine") is None
    with pytest.raises(VerificationError, match="may not speak for origin 'clapnq'"):
        gw.query(QueryRequest(question=GOVT_Q, origin="clapnq"), client="govt-desk")
    assert gw.query(QueryRequest(question=GOVT_Q, origin="govt"), client="govt-desk").trace.origin == "govt"
    client = create_gateway_app(gw).test_client()  # the same refusals over HTTP: statuses, never a 500
    auth = {"Authorization": f"Bearer {key}"}
    assert client.post("/v1/query", json={"question": GOVT_Q, "origin": "clapnq"}, headers=auth).status_code == 403
    assert client.post("/v1/query", json={"question": GOVT_Q, "origin": "atlantis"}, headers=auth).status_code == 404
    assert client.post("/v1/query", json={"question": GOVT_Q, "origin": "govt"}, headers=auth).status_code == 200


def test_a_revoked_origin_is_refused(federation) -> None:
    records = {r.site_id: r for r in federation.registry.list()}
    records["govt"] = replace(records["govt"], status=REVOKED)  # the registry's own record, revoked
    with pytest.raises(VerificationError, match="revoked"):
        authorize_origin(QueryRequest(question=GOVT_Q, origin="govt"), records, None)
    authorize_origin(QueryRequest(question=GOVT_Q, origin="clapnq"), records, None)


# -- budgets ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("budget", [{"sites": 0}, {"time_ms": 0}, {"bytes": -1}, {"tokens": 10**12},
                                    {"time_ms": 1e300}, {"sites": True}, {"sites": "2"}, {"time_ms": 1.5},
                                    {"seconds": 3}, [], None])
def test_bad_budgets_are_400(budget: Any, gw: Gateway, keys: ApiKeyStore) -> None:
    with pytest.raises(InputError, match="budget"):
        QueryRequest.from_json({"question": GOVT_Q, "budget": budget})
    key = keys.create(f"budget-{len(keys.list())}")
    resp = create_gateway_app(gw).test_client().post(
        "/v1/query", json={"question": GOVT_Q, "budget": budget}, headers={"Authorization": f"Bearer {key}"})
    assert resp.status_code == 400 and "budget" in resp.get_json()["error"]


def test_the_budget_bounds_sites_bytes_and_time(gw: Gateway) -> None:
    both = ("clapnq", "govt")
    one = gw.query(QueryRequest(question=GOVT_Q, sites=both, budget=Budget(sites=1)), client="engine").trace
    assert called(one) == ["clapnq"] and one.budget.given == Budget(sites=1)
    starved = gw.query(QueryRequest(question=GOVT_Q, budget=Budget(bytes=10)), client="engine")
    assert starved.trace.per_site == () and starved.trace.stop_reason == "budget"
    assert "budget" in starved.answer
    # a question the gateway's LRU has not seen: embedding it alone outlasts 1 ms
    late = gw.query(QueryRequest(question="What does FEMA do before a flood?", budget=Budget(time_ms=1)),
                    client="engine").trace
    assert late.per_site == () and late.stop_reason == "budget"


def test_skipped_counts_the_chosen_sites_the_budget_or_the_gate_left_uncalled(gw: Gateway) -> None:
    both = ("clapnq", "govt")
    everyone = gw.query(QueryRequest(question=GOVT_Q, sites=both), client="engine").sites
    assert everyone["skipped"] == 0 and everyone["total"] == 2 and everyone["successful"] == 2
    one = gw.query(QueryRequest(question=GOVT_Q, sites=both, budget=Budget(sites=1)), client="engine").sites
    assert one["skipped"] == 1 and one["total"] == 2 and one["successful"] == 1  # govt: named, cut by the budget
    starved = gw.query(QueryRequest(question=GOVT_Q, sites=both, budget=Budget(bytes=10)), client="engine").sites
    assert starved["skipped"] == 2 and starved["total"] == 2 and starved["details"] == []

    class TrustOrigin:
        name = "trust-origin"

        def decide(self, assessment: Assessment) -> GateDecision:
            return GateDecision(True, "trusted", 1.0)

    answered = gw.query(QueryRequest(question=GOVT_Q, origin="govt", sites=both), client="engine",
                        policy=QueryPolicy(name="gated", gate=TrustOrigin()))
    assert called(answered.trace) == ["govt"] and answered.trace.stop_reason == "answered by the origin"
    assert answered.sites["skipped"] == 1 and answered.sites["total"] == 2  # clapnq: chosen, the gate kept it out


def test_request_validation_is_complete_for_in_process_callers() -> None:
    for bad in (dict(question=" \t"), dict(question=GOVT_Q, top_k_sites=0), dict(question=GOVT_Q, top_k=101),
                dict(question=GOVT_Q, origin="Not A Site"), dict(question=GOVT_Q, conversation=("",)),
                dict(question=GOVT_Q, conversation=tuple(["earlier?"] * 17)), dict(question="\ud800")):
        with pytest.raises(InputError):
            QueryRequest(**bad)  # type: ignore[arg-type]
    req = QueryRequest.from_json({"question": GOVT_Q, "conversation": ["Who runs disaster relief?"], "origin": "govt",
                                  "budget": {"time_ms": 5000.0, "sites": 3}, "sites": ["govt", "govt"]})
    assert req.budget == Budget(time_ms=5000, sites=3) and req.sites == ("govt",)
    assert QueryRequest.from_json(req.to_json()) == req
    assert req.fan_out(5) == 1 and QueryRequest(question="q", origin="govt").fan_out(5) == 6


# -- refine contract ----------------------------------------------------------------------------------

def test_a_refiner_adds_rounds_never_recalls_a_site_and_the_engine_stops_it(gw: Gateway) -> None:
    class NextBest:
        name = "next-best"

        def next_round(self, state: RefineState) -> RefineStep:
            rest = [s.site_id for s in state.considered if s.site_id not in state.called]
            return RefineStep(tuple(rest[:1])) if rest else RefineStep(("govt",))  # then asks an old one

    result = gw.query(QueryRequest(question=GOVT_Q), client="engine", policy=QueryPolicy(refiner=NextBest()))
    kinds = [r.kind for r in result.trace.rounds]
    assert kinds == ["routed", "refine"] and sorted(called(result.trace)) == ["clapnq", "govt"]
    assert result.trace.stop_reason == "no new site to ask"
    capped = gw.query(QueryRequest(question=GOVT_Q, budget=Budget(sites=1)), client="engine",
                      policy=QueryPolicy(refiner=NextBest()))
    assert called(capped.trace) == ["govt"] and capped.trace.stop_reason == "budget"


def test_each_round_deadline_counts_the_gateway_work_that_preceded_it(federation, keys) -> None:
    """A round gets `site_timeout_s` counted from when the gateway began working toward it (the
    query's arrival, then the previous round's end), so a slow route or refiner comes out of the
    sites' time; and, once questions were seen, less what the gateway's work after a round took
    (query.call.FinishReserve), so a hung site costs the user the deadline, not more."""
    import time as _time

    from hansa.gateway.query.route import SummaryRouter

    apps = {site_id: create_site_app(h.ctx) for site_id, h in federation.sites.items()}
    timeouts: list[float] = []

    class Timed(InProcessSiteTransport):
        def call(self, targets: Any, request: Any, timeout_s: float, **kw: Any) -> list[SiteCall]:
            timeouts.append(timeout_s)
            return super().call(targets, request, timeout_s, **kw)

    class SlowRouter(SummaryRouter):  # routing that takes 0.4 s
        def rank(self, *args: Any, **kw: Any) -> Any:
            _time.sleep(0.4)
            return super().rank(*args, **kw)

    class SlowRefiner:  # one more round, chosen in 0.3 s
        name = "slow"

        def next_round(self, state: RefineState) -> RefineStep:
            _time.sleep(0.3)
            return RefineStep(()) if len(state.called) > 1 else RefineStep(("clapnq",))

    service = Gateway.open(GatewayConfig(top_k_sites=1, site_timeout_s=5.0), embedder=next(
        iter(federation.sites.values())).ctx.embedder, vector_store=federation.gateway_vectors,
        registry=federation.registry, api_keys=keys, transport=lambda identity, cfg: Timed(identity, apps))
    try:
        result = service.query(QueryRequest(question=GOVT_Q), client="engine",
                               policy=QueryPolicy(router=SlowRouter(0.4, 0.3), refiner=SlowRefiner()))
    finally:
        service.close()
    assert [r.kind for r in result.trace.rounds] == ["routed", "refine"]
    first, second = timeouts
    assert 5.0 - 1.5 < first <= 5.0 - 0.4 and 5.0 - 1.5 < second <= 5.0 - 0.3
    assert result.trace.finish_reserve_ms == 0.0  # the service's first question: nothing seen yet
    assert list(service.engine.finish._samples) == []  # every site answered in time: nothing to learn

    # a round that cut a call at its deadline records what the gateway's work after it took
    class Hung(Timed):
        def call(self, targets: Any, request: Any, timeout_s: float, **kw: Any) -> list[SiteCall]:
            timeouts.append(timeout_s)
            _time.sleep(timeout_s)
            return [SiteCall(t.site_id, TIMEOUT, timeout_s * 1000, 0, 0, error="no answer by the deadline")
                    for t in targets]

    service = Gateway.open(GatewayConfig(top_k_sites=1, site_timeout_s=0.3), embedder=next(
        iter(federation.sites.values())).ctx.embedder, vector_store=federation.gateway_vectors,
        registry=federation.registry, api_keys=keys, transport=lambda identity, cfg: Hung(identity, apps))
    try:
        cut = service.query(QueryRequest(question=GOVT_Q), client="engine")
        recorded = list(service.engine.finish._samples)
    finally:
        service.close()
    assert [c.status for c in cut.trace.per_site] == [TIMEOUT]
    assert len(recorded) == 1 and 0 <= recorded[0] < 1_000

    # a gateway whose recent questions needed 150 ms after their rounds stops waiting 150 ms earlier
    timeouts.clear()
    service = Gateway.open(GatewayConfig(top_k_sites=1, site_timeout_s=5.0), embedder=next(
        iter(federation.sites.values())).ctx.embedder, vector_store=federation.gateway_vectors,
        registry=federation.registry, api_keys=keys, transport=lambda identity, cfg: Timed(identity, apps))
    try:
        for _ in range(20):
            service.engine.finish.record(150.0)
        kept = service.query(QueryRequest(question=GOVT_Q), client="engine", policy=QueryPolicy(router=SlowRouter(0.4, 0.3)))
    finally:
        service.close()
    assert kept.trace.finish_reserve_ms == 150.0
    (reserved,) = timeouts
    assert 5.0 - 1.5 < reserved <= 5.0 - 0.4 - 0.15

    # routing that outlasts the whole deadline: nobody is asked, and the answer says why (no budget
    # was given, so it is the deadline, not the budget)
    timeouts.clear()
    service = Gateway.open(GatewayConfig(top_k_sites=1, site_timeout_s=0.3), embedder=next(
        iter(federation.sites.values())).ctx.embedder, vector_store=federation.gateway_vectors,
        registry=federation.registry, api_keys=keys, transport=lambda identity, cfg: Timed(identity, apps))
    try:
        late = service.query(QueryRequest(question=GOVT_Q), client="engine", policy=QueryPolicy(router=SlowRouter(0.4, 0.3)))
    finally:
        service.close()
    assert timeouts == [] and late.trace.per_site == () and late.trace.stop_reason == "deadline"
    assert "site deadline" in late.answer and late.sites["skipped"] == 1  # the routed site, not asked


# -- assess, on answers built here ---------------------------------------------------------------------

def _call(site: str, sentences: list[tuple[str, str, float]], status: str = OK) -> SiteCall:
    answer = PartialAnswer(site, " ".join(s[0] for s in sentences),
                           tuple(Citation(site, d, "", r) for _, d, r in sentences), 0.9, tuple(sentences))
    return SiteCall(site, status, 1.0, 10, 10, answer=answer if status == OK else None)


def test_assess_computes_relevance_margin_coverage_and_agreement() -> None:
    calls = [_call("a", [("Flood insurance covers river damage.", "d1", 0.8)]),
             _call("b", [("River flood insurance pays for damage.", "d2", 0.5),
                         ("Unrelated cooking advice here.", "d3", 0.1)]),
             _call("c", [("Ignored, the call failed.", "d4", 0.99)], status="error")]
    a = assess("Does flood insurance cover damage from a river?", calls, best_summary=0.6)
    assert (a.best_relevance, round(a.margin, 6), a.sites_answered, a.passages, a.best_summary) == (0.8, 0.3, 2, 3, 0.6)
    assert a.coverage == 1.0  # flood, insurance, cover, damage, river: all in the top passages
    assert 0 < a.agreement < 1  # the two flood passages overlap, the cooking one does not
    assert assess("anything?", []) == Assessment()


def test_assess_says_what_the_newest_site_added() -> None:
    """Escalation's features: the calls in the order asked, the last the newest."""
    weak = _call("a", [("Flood insurance is sold by agents.", "d1", 0.5)])
    strong = _call("b", [("Flood insurance covers damage from a river.", "d2", 0.8)])
    q = "Does flood insurance cover damage from a river?"
    grew = assess(q, [weak, strong])
    assert (round(grew.relevance_gain, 6), grew.sites_since_best) == (0.3, 0) and grew.coverage_gain > 0
    stale = assess(q, [strong, weak])  # the newest site found nothing better
    assert (stale.relevance_gain, stale.coverage_gain, stale.sites_since_best) == (0.0, 0.0, 1)
    alone = assess(q, [strong])
    assert (alone.relevance_gain, alone.coverage_gain, alone.sites_since_best) == (0.8, alone.coverage, 0)
    failed = assess(q, [strong, _call("c", [], status="error")])  # a failed newest site added nothing
    assert (failed.relevance_gain, failed.sites_since_best) == (0.0, 1)


def test_weighted_coverage_counts_a_rare_question_word_more_than_a_common_one() -> None:
    """Two answers each hold one of the question's two words; the one holding the word fewer of the
    federation's documents use covers more (gateway.query.route.QuestionWords). Without the weighed
    words (routing had no question word) the feature is 0."""
    docs = [("d0", "The Penobscot River flows south."), *[(f"d{i}", f"Every river floods, year {i}.") for i in range(1, 9)]]
    words = QuestionWords.of("Which river is the Penobscot?", {"s": TermSketch.from_documents(docs, 1)})
    assert words is not None
    q = "Which river is the Penobscot?"
    rare = assess(q, [_call("a", [("Penobscot County lies in Maine.", "d1", 0.7)])], words=words)
    common = assess(q, [_call("a", [("A river floods in spring.", "d2", 0.7)])], words=words)
    assert rare.coverage == common.coverage == 0.5  # unweighed, the two answers look the same
    assert 0.5 < rare.weighted_coverage < 1.0 and common.weighted_coverage == pytest.approx(1 - rare.weighted_coverage)
    assert assess(q, [_call("a", [("Penobscot County lies in Maine.", "d1", 0.7)])]).weighted_coverage == 0.0


def test_the_openapi_spec_states_the_limits_the_code_enforces() -> None:
    spec = json.loads(resources.files("hansa.gateway.http").joinpath("openapi.json").read_bytes())["components"]["schemas"]

    def given(schema: dict[str, Any]) -> dict[str, Any]:  # an optional key's schema when it is sent
        return next((s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"))

    assert {k: given(v)["maximum"] for k, v in spec["Budget"]["properties"].items()} == dict(BUDGET_LIMITS)
    props = spec["QueryRequest"]["properties"]
    assert set(props) == {f.name for f in fields(QueryRequest)} and props["conversation"]["maxItems"] == MAX_CONVERSATION_TURNS
    assert (given(props["top_k_sites"])["maximum"], given(props["top_k"])["maximum"], given(props["sites"])["maxItems"]) == (
        MAX_TOP_K_SITES, MAX_TOP_K, MAX_EXPLICIT_SITES)


# -- the service's own wiring -------------------------------------------------------------------------

def test_open_needs_its_parts_or_the_whole_config(tmp_path: Path, embedder) -> None:
    with pytest.raises(ConfigError, match="registry"):
        Gateway.open(GatewayConfig(), embedder=embedder)
    gw = Gateway.open(Config(home=tmp_path), embedder=embedder)  # opens <home>/gateway and Milvus Lite itself
    try:
        assert gw.registry.path == tmp_path / "gateway" / "registry.json"
        assert gw.health()["summaries"] == 0 and gw.sites_view() == {"sites": []}
        assert isinstance(gw.transport, HttpSiteTransport) and gw.transport.identity is gw.identity
    finally:
        assert gw.close() and gw.close()  # idempotent; the store it opened is closed with it


def test_a_repeated_question_embeds_nothing_new_at_the_gateway(gw: Gateway, federation) -> None:
    """The gateway's embedder is an LRU: the question and the sentences fusion measured are embedded
    once (gateway.embedding_memo_entries; 0 turns it off)."""
    assert isinstance(gw.embedder, MemoEmbedder)
    gw.query(QueryRequest(question=RIVER_Q), client="engine")
    misses = gw.embedder.misses
    trace = gw.query(QueryRequest(question=RIVER_Q), client="engine").trace
    assert trace.fusion_measured >= 1 and gw.embedder.misses == misses
    embedder = next(iter(federation.sites.values())).ctx.embedder
    plain = Gateway.open(GatewayConfig(embedding_memo_entries=0), embedder=embedder, vector_store=federation.gateway_vectors,
                         registry=federation.registry, api_keys=gw.api_keys)
    try:
        assert plain.embedder is embedder
    finally:
        plain.close()


class Recording:
    """The federation's real embedder, recording each batch it embeds and the thread that asked."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.model_id, self.dim, self.model_sha256 = inner, inner.model_id, inner.dim, inner.model_sha256
        self.batches: list[tuple[str, list[str]]] = []

    def embed(self, texts: Any) -> Any:
        import threading

        self.batches.append((threading.current_thread().name, list(texts)))
        return self.inner.embed(texts)

    def embed_one(self, text: str) -> Any:
        return self.embed([text])[0]

    def embed_query(self, text: str) -> Any:  # the question: the same vector for this symmetric model
        return self.embed([text])[0]

    def embed_queries(self, texts: Any) -> Any:
        return self.embed(texts)


def test_an_early_answer_is_measured_while_a_slower_site_is_awaited_and_the_answer_is_unchanged(
        federation, keys) -> None:
    """Fusion's measuring moves into the wait for slower sites (gateway.query.fusion.measure_early):
    the early site's sentences are embedded in its call's thread, fusion finds them memoized, and
    the answer is the one a gateway without the memo (so without early measuring) gives."""
    import time as _time

    from hansa.adapters.embedder.base import Embedder

    Embedder.register(Recording)
    apps = {site_id: create_site_app(h.ctx) for site_id, h in federation.sites.items()}
    slow_app = apps["clapnq"]

    def slow(environ: Any, start_response: Any) -> Any:  # the real site, answering 0.8 s late
        _time.sleep(0.8)
        return slow_app(environ, start_response)

    apps["clapnq"] = slow
    inner = next(iter(federation.sites.values())).ctx.embedder
    request = QueryRequest(question=GOVT_Q, sites=("clapnq", "govt"))
    answers = {}
    recorded = Recording(inner)
    for memo_entries, embedder in ((4096, MemoEmbedder(recorded, 4096)), (0, inner)):
        service = Gateway.open(GatewayConfig(site_timeout_s=60.0, embedding_memo_entries=memo_entries),
                               embedder=embedder, vector_store=federation.gateway_vectors, registry=federation.registry,
                               api_keys=keys, transport=lambda identity, cfg: InProcessSiteTransport(identity, apps))
        try:
            answers[memo_entries] = service.query(request, client="engine")
        finally:
            service.close()
    early = [texts for thread, texts in recorded.batches if thread.startswith("hansa-site-call")]
    assert early, recorded.batches  # govt answered first; its sentences were embedded in its call's thread
    later = [t for thread, texts in recorded.batches if not thread.startswith("hansa-site-call") for t in texts]
    assert not set(early[0]) & set(later)  # fusion did not embed them again
    with_memo, without = answers[4096], answers[0]
    assert with_memo.answer == without.answer
    assert [c["doc_id"] for c in with_memo.citations] == [c["doc_id"] for c in without.citations]


def test_a_time_budget_that_cuts_every_call_says_so_instead_of_no_answer(federation, keys) -> None:
    """The sites were asked but none had the time to answer: the answer must not claim the
    federation holds nothing (issue 32), and the HTTP answer is a 200 naming the cut sites."""
    import time as _time

    apps = {site_id: create_site_app(h.ctx) for site_id, h in federation.sites.items()}
    for site_id, app in list(apps.items()):
        def slow(environ: Any, start_response: Any, app: Any = app) -> Any:  # the real site, 2 s late
            _time.sleep(2.0)
            return app(environ, start_response)
        apps[site_id] = slow
    embedder = next(iter(federation.sites.values())).ctx.embedder
    service = Gateway.open(GatewayConfig(site_timeout_s=60.0), embedder=embedder,
                           vector_store=federation.gateway_vectors, registry=federation.registry, api_keys=keys,
                           transport=lambda identity, cfg: InProcessSiteTransport(identity, apps))
    try:
        embedder.embed([GOVT_Q])  # warm: the budget goes to the calls, not to a first embedding
        result = service.query(QueryRequest(question=GOVT_Q, sites=("clapnq", "govt"), budget=Budget(time_ms=600)),
                               client="engine")
        assert [c.status for c in result.trace.per_site] == [TIMEOUT, TIMEOUT], result.trace.per_site
        assert "holds no answer" not in result.answer
        assert "time budget (600 ms)" in result.answer and "clapnq, govt" in result.answer
        assert "not an absence of an answer" in result.answer and not result.citations
        assert result.trace.abstained is False

        key = keys.create("budget-cut")
        resp = create_gateway_app(service).test_client().post(
            "/v1/query", json={"question": GOVT_Q, "sites": ["govt"], "budget": {"time_ms": 600}},
            headers={"Authorization": f"Bearer {key}"})
        assert resp.status_code == 200, resp.get_json()
        assert "time budget" in resp.get_json()["answer"] and "(govt)" in resp.get_json()["answer"]
    finally:
        service.close()


@pytest.mark.parametrize("weight", [-0.1, 1.5])
@pytest.mark.parametrize("name", ["fusion_site_prior", "fusion_answer_coverage"])
def test_a_fusion_weight_outside_0_to_1_is_a_config_error(name: str, weight: float, embedder) -> None:
    from hansa.gateway.query.engine import QueryEngine

    with pytest.raises(ConfigError, match=name):
        QueryEngine(GatewayConfig(**{name: weight}), embedder, None, None, None)  # type: ignore[arg-type]


def test_the_site_prior_weighs_citations_by_routing_and_is_traced(gw: Gateway) -> None:
    """Both sites named, a prior of 1: the site routing matched best leads the citations, and the
    trace carries each site's factor; without a prior there is no such entry."""
    both = sorted(r.site_id for r in gw.registry.list())
    assert both == ["clapnq", "govt"]
    request = QueryRequest(question=RIVER_Q, sites=tuple(both))
    weighed = gw.query(request, client="engine", policy=QueryPolicy(site_prior=1.0))
    prior = weighed.trace.site_prior
    assert prior is not None
    assert set(prior) == set(both) and prior["clapnq"] == 1.0 and prior["govt"] < 1.0
    assert weighed.citations[0]["site_id"] == "clapnq"
    plain = gw.query(request, client="engine", policy=QueryPolicy(site_prior=0.0))
    assert plain.trace.site_prior is None
    assert {(c["site_id"], c["doc_id"]) for c in plain.citations} == {(c["site_id"], c["doc_id"]) for c in weighed.citations}


def test_answer_coverage_is_traced_per_answering_site_and_only_when_weighed(gw: Gateway) -> None:
    """The river question at both sites: the site whose answer uses the question's words gets the
    higher factor, and the trace says so; at weight 0 there is no such entry."""
    request = QueryRequest(question=RIVER_Q, sites=("clapnq", "govt"))
    weighed = gw.query(request, client="engine", policy=QueryPolicy(answer_coverage=1.0))
    cover = weighed.trace.answer_coverage
    assert cover is not None
    assert set(cover) <= {"clapnq", "govt"} and 0.0 < cover["clapnq"] <= 1.0
    assert cover["clapnq"] > cover.get("govt", 0.0)
    plain = gw.query(request, client="engine", policy=QueryPolicy(answer_coverage=0.0))
    assert plain.trace.answer_coverage is None
