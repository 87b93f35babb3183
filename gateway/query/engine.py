"""The query engine: route -> gate -> call -> assess -> refine -> fuse -> synthesize, one traced pipeline.

Why one composer with small stages: each stage has one contract (see its module) and can be
replaced alone — a calibrated gate, a tiered or learned router, a budgeted refiner, a new fusion —
while the engine keeps what must hold for all of them: the registry decides who may be called,
the budget is enforced here (not by stages), every answer seen is fused (the best answer found is
never lost), and the trace shows each stage's time and each round.

The trace beside the answer is a `QueryTrace`, built once at the end of the query from the
query's state, typed for in-process readers, and serialized where an answer is written out (its
docstring lists its fields).

The result carries what a reader needs beside the answer: readable citations
(FusedAnswer.readable_citations: title, snippet, page, source, `n`, `used`) and the per-site
summary (gateway.query.call.site_summary) `sites` {total, successful, skipped, failed, timed_out,
partial}. `skipped` counts the sites the engine chose to ask (routed,
named in `sites`, or picked by a refiner) and then did not call: the budget ran out before them, or
the gate let the origin answer alone. Sites routing never selected are not skipped, only unasked.
"""
from __future__ import annotations

import time
from functools import partial
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Callable, Collection, Mapping

from hansa.adapters.embedder.base import Embedder
from hansa.core.config import GatewayConfig
from hansa.core.errors import ConfigError, VerificationError
from hansa.gateway.client import OK, TIMEOUT, SiteCall
from hansa.gateway.query.abstain import (AbstainDecision, Abstainer, EvidenceRule, budget_cut_text, no_answer_text, read_abstain,
                                        shares_no_word)
from hansa.gateway.query.assess import Assessment
from hansa.gateway.query.calibration import Calibration, LogisticModel
from hansa.gateway.query.request import standalone_question
from hansa.gateway.query.call import Calls, FinishReserve, Round, site_summary
from hansa.gateway.query.gate import EvidenceGate, Gate, GateDecision
from hansa.gateway.query.hops import bridge_entities
from hansa.gateway.query.policy import QueryPolicy, default_abstainer, default_gate, escalation_policy
from hansa.gateway.query.refine import MAX_ROUNDS, JudgingRefiner, OneRound, RefineState, Refiner
from hansa.gateway.query.request import Budget, QueryRequest, authorize_origin, check_sites
from hansa.gateway.query.route import LearningRouter, Router, Routing, SiteScore, SummaryRouter, route
from hansa.gateway.query.synthesize import Synthesis, SynthesisTrace, synthesize
from hansa.gateway.query.tiers import TieredScore
from hansa.gateway.query.fusion import FusedAnswer, fuse
from hansa.gateway.query.reliability import SiteHistory
from hansa.gateway.index.summaries import SummaryIndex
from hansa.gateway.query.route import AnswerCoverage
from hansa.gateway.query.reading import ReadingStage, open_reading
from hansa.gateway.query.fusion import measure_early
from hansa.gateway.trust.registry import SiteRecord, SiteRegistry
from hansa.gateway.query.conduct import OVERROUTED_EXCESS, SiteConduct
from hansa.gateway.query.conflicts import dispute_pairs
from hansa.gateway.query.reliability import OVERROUTED, Observation, SiteReliability
from hansa.gateway.query.fusion import Screen, Screened
from hansa.gateway.transport import SiteTransport
from hansa.core.text import content_words  # the sites' own notion of a content word
from hansa.sync.wire import MAX_QUESTION_CHARS, RetrieveRequest

if TYPE_CHECKING:
    from hansa.gateway.query.quality import Quality


# The trace's types live here, beside QueryResult, not in a module of their own: the engine is their
# one writer, and issue 33 counts the gateway files a default query enters (scripts/bench_house.py).

class _Traced:
    """A part of the trace: its JSON is its fields in order, each part by its own `to_json`
    (a site call by `trace_json`), and a field that has a default is left out while it holds it
    (an optional key absent, as the served JSON always had it)."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type]  # every subclass is a dataclass
            value = getattr(self, f.name)
            if f.default is not MISSING and value == f.default:
                continue
            out[f.name] = _json(value)
        return out


def _json(value: Any) -> Any:
    if isinstance(value, SiteCall):
        return value.trace_json()
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, Mapping):
        return {k: _json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class Spent(_Traced):
    """What the query spent of its budget: time, site calls, bytes both ways, LLM tokens."""

    time_ms: float
    sites: int
    bytes: int
    tokens: int


@dataclass(frozen=True, slots=True)
class BudgetUse(_Traced):
    given: Budget  # the request's, echoed
    spent: Spent


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundTrace(_Traced):
    """One round of calls: `modes` when its sites were asked differently, `followups` where a site
    was asked another question than the query's, and with a judging refiner the fused answer's
    `quality` after it."""

    round: int
    kind: str
    sites: tuple[str, ...]
    ms: float
    bytes_out: int
    bytes_in: int
    modes: Mapping[str, str] | None = None
    followups: Mapping[str, str] | None = None
    quality: Quality | None = None

    @classmethod
    def of(cls, number: int, rnd: Round, question: str, quality: Quality | None) -> RoundTrace:
        asked = list(zip(rnd.calls, rnd.requests))
        followups = {c.site_id: r.question for c, r in asked if r.question != question}
        return cls(round=number, kind=rnd.kind, sites=tuple(c.site_id for c in rnd.calls), ms=round(rnd.wait_ms, 1),
                   bytes_out=sum(c.bytes_out for c in rnd.calls), bytes_in=sum(c.bytes_in for c in rnd.calls),
                   modes={c.site_id: r.mode for c, r in asked} if rnd.requests else None,
                   followups=followups or None, quality=quality)


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryTrace(_Traced):
    """The trace beside the answer, in the order its JSON lists it.

    What the gateway always had: the sites considered, excluded and called, the selection, each
    call (`per_site`), routing_ms (embedding the question included), calls_ms, fusion_ms,
    fusion_measured (the sentences fusion embedded to verify relevance), total_ms, bytes_out,
    bytes_in, and `note` (why there is no answer, when there is none). Then `embed_ms`,
    `stages_ms` {route, gate, call, assess, refine, fuse, synthesize} (a stage that did not run is
    absent), `rounds`, `waiting_ms` (wall time waiting for sites), `gateway_overhead_ms` (total
    minus waiting), `finish_reserve_ms`, the `assessment` of every answer, `stop_reason`, `budget`
    {given, spent} and the `policy`.

    How the request was taken: `origin`, and the `gate`'s decision on the `origin_assessment`, when
    an origin was given; `conversation_turns` and `standalone_question` for a follow-up turn (the
    question with its conversation's salient words, query.request.standalone_question: what was
    routed and retrieved); the `router` {name, model_version, ...}.

    How the answer was made: the factors fusion weighed each site's citations by (`site_prior`)
    and by how much of the question each site's answer uses (`answer_coverage`); with an LLM,
    `synthesis` (query.synthesize: which answer was used, the tokens spent, also counted in
    `budget.spent.tokens`); `abstained` and `abstention` {abstain, score, reason, threshold}
    (query.abstain); with a reader, `reading`; the sentences refused as evidence (`screened`:
    echoes, instructions, templates); the follow-ups second hops asked, in order (`second_hops`).

    With a tiered router, `tiers` {site: tier}; with a refiner that judges answers, `best_round`
    says whose answer was returned. The service adds the `query_id`."""

    sites_considered: tuple[SiteScore, ...]
    sites_excluded: tuple[Mapping[str, str], ...]
    selection: str  # "routed" or "explicit"
    sites_called: tuple[str, ...]
    per_site: tuple[SiteCall, ...]
    routing_ms: float
    calls_ms: float
    fusion_ms: float
    fusion_measured: int
    total_ms: float
    bytes_out: int
    bytes_in: int
    embed_ms: float
    stages_ms: Mapping[str, float]
    rounds: tuple[RoundTrace, ...]
    waiting_ms: float
    gateway_overhead_ms: float
    finish_reserve_ms: float
    assessment: Assessment
    stop_reason: str | None  # written even when None
    budget: BudgetUse
    policy: Mapping[str, str]
    origin: str | None = None
    gate: GateDecision | None = None
    origin_assessment: Assessment | None = None
    conversation_turns: int | None = None
    standalone_question: str | None = None
    router: Mapping[str, Any]
    note: str | None = None
    site_prior: Mapping[str, float] | None = None
    answer_coverage: Mapping[str, float] | None = None
    synthesis: SynthesisTrace | None = None
    abstained: bool
    abstention: AbstainDecision | None = None
    reading: Mapping[str, Any] | None = None
    screened: tuple[Screened, ...] = ()
    second_hops: tuple[str, ...] = ()
    tiers: Mapping[str, str] | None = None
    best_round: int | None = None
    query_id: str | None = None


@dataclass(frozen=True)
class QueryResult:
    answer: str
    citations: list[dict[str, Any]]
    trace: QueryTrace
    fused: FusedAnswer = field(repr=False)
    calls: tuple[SiteCall, ...] = field(default=(), repr=False)  # every call, all rounds
    decision: GateDecision | None = None
    assessment: Assessment | None = None
    abstention: AbstainDecision | None = None
    extractive_answer: str = ""  # the fused answer before synthesis (== answer without an LLM)
    sites: dict[str, Any] = field(default_factory=dict)  # the per-site summary (gateway.query.call.site_summary)
    routing: Routing | None = field(default=None, repr=False)  # how the sites were ranked (calibration reads it)

    @property
    def abstained(self) -> bool:
        return self.abstention is not None and self.abstention.abstain

    def to_json(self) -> dict[str, Any]:
        """The body of a POST /v1/query answer. `confidence` is the abstention score (higher: the
        evidence answers the question), for risk-coverage curves."""
        out = {"answer": self.answer, "citations": self.citations, "trace": self.trace.to_json(),
               "abstained": self.abstained, "sites": self.sites}
        if self.abstention is not None:
            out["confidence"] = round(self.abstention.score, 4)
        if self.fused.conflicts:
            out["conflicts"] = self.fused.conflicts_json()
        if self.fused.short_answer and not self.abstained:
            out["short_answer"] = self.fused.short_answer  # the reader's span in the leading sentence
        return out


class QueryEngine:
    def __init__(self, cfg: GatewayConfig, embedder: Embedder, index: SummaryIndex, registry: SiteRegistry,
                 transport: SiteTransport, calibration: Calibration | None = None,
                 reliability: SiteReliability | None = None, history: SiteHistory | None = None,
                 llm: Any = None, reading: ReadingStage | str | None = "config",
                 conduct: SiteConduct | None = None) -> None:
        """`reading`: the reader's stage; "config" opens what `[gateway] reader` names (gateway.query.reading).
        `conduct`: the sites' record (gateway.query.conduct; None: one kept in memory)."""
        if not 0.0 <= cfg.fusion_site_prior <= 1.0:
            raise ConfigError(f"[gateway] fusion_site_prior must lie in 0..1 (0: no routing prior), not {cfg.fusion_site_prior}")
        if cfg.finish_reserve_max_ms < 0:
            raise ConfigError(f"[gateway] finish_reserve_max_ms must be 0 (off) or more, not {cfg.finish_reserve_max_ms}")
        if not 0.0 <= cfg.fusion_answer_coverage <= 1.0:
            raise ConfigError("[gateway] fusion_answer_coverage must lie in 0..1 (0: answers' words not weighed), "
                              f"not {cfg.fusion_answer_coverage}")
        self.cfg = cfg
        self.llm = llm  # hansa.adapters.llm.LLM: answers are synthesized from the fused evidence (None: extractive)
        self.calibration = calibration or Calibration()
        self.embedder = embedder
        self.index = index
        self.registry = registry
        self.transport = transport
        self.reliability = reliability  # learned site weights for fusion (None: every site weighs the same)
        self.history = history  # which sites final answers cite (a tier signal); None: not kept
        self.early_measure = measure_early(embedder)  # fusion's measuring, done while calls are awaited
        self.finish = FinishReserve(cfg.finish_reserve_max_ms)  # what rounds keep back for the work after them
        self.reading = self._open_reading() if reading == "config" else reading
        # what each site answers against what it claims (routing discounts, templates, quarantine)
        self.conduct = conduct if conduct is not None else SiteConduct()

    def _open_reading(self) -> ReadingStage | None:
        """`[gateway] reader`, at the floor `[gateway] reader_floor` names, else the one the
        calibration fit for this reader (`hansa gateway calibrate`), else the model card's."""
        stage = open_reading(self.cfg.reader, self.cfg.reader_floor, self.cfg.reader_pool, self.cfg.reader_relative_floor,
                             self.cfg.topic_floor)
        if stage is None or self.cfg.reader_floor >= 0:
            return stage
        fitted = self.calibration.floor_for(stage.reader.model_sha256)  # the organization's own: one floor
        return replace(stage, floor=fitted, floors={}) if fitted is not None else stage

    def reading_for(self, policy: QueryPolicy) -> ReadingStage | None:
        """The reader a query runs with: the gateway's, unless the policy turns it off."""
        return None if policy.reading is False else self.reading

    def defaults(self, policy: QueryPolicy) -> tuple[Router, Gate, Refiner, Abstainer]:
        """The policy's stages, the gateway's where it names none. A calibration with an `escalate`
        model makes escalation the gateway's routing (query.escalate); a policy that names its own
        router or refiner keeps it."""
        router, refiner = policy.router, policy.refiner
        if router is None and refiner is None and self.calibration.escalate is not None:
            escalation = escalation_policy(self.calibration, self.cfg.site_margin, self.cfg.lexical_weight)
            router, refiner = escalation.router, escalation.refiner
        # With a reader, the reader decides abstention after fusion (nothing reaches its floor); the
        # calibrated abstainer was fit on cosine evidence, before there was one.
        abstainer = policy.abstainer or (EvidenceRule() if self.reading_for(policy) is not None
                                         else default_abstainer(self.calibration))
        return (router or SummaryRouter(self.cfg.site_margin, self.cfg.lexical_weight),
                policy.gate or default_gate(self.calibration), refiner or OneRound(), abstainer)

    def _records(self) -> tuple[dict[str, SiteRecord], set[str], dict[str, str]]:
        """Every enrolled site's record, the sites routable now, and those an operator quarantined
        (with the reason; never routable)."""
        records = {r.site_id: r for r in self.registry.list()}
        now = self.registry.clock()
        held = self.conduct.quarantined()
        return records, {sid for sid, r in records.items() if r.is_routable(now) and sid not in held}, held

    def _unproven(self, routable: Collection[str]) -> set[str] | None:
        """The routable sites without standing, none of whom routing asks alone (route.accompanied);
        None ([gateway] unproven_never_alone false, or no reliability, which alone knows who has standing)."""
        if self.reliability is None or not self.cfg.unproven_never_alone:
            return None
        return self.reliability.unproven(sorted(routable))

    def rank(self, question: str, router: Router) -> Routing:
        """Route `question` with `router` over the routable sites and call none: what a router
        sees of a question (calibration collects the tiered gaps of the fit split this way)."""
        records, routable, held = self._records()
        return route(question, embedder=self.embedder, index=self.index, records=records, routable=routable,
                     top_m=self.cfg.top_m_summaries, k=self.cfg.top_k_sites, router=router,
                     discounts=self.conduct.discounts(), held=held, levels=self.cfg.route_levels)

    def run(self, request: QueryRequest, *, policy: QueryPolicy | None = None,
            allowed_origins: Collection[str] | None = None, query_id: str | None = None) -> QueryResult:
        """Answer `request` under `policy` (default: the gateway's); `allowed_origins` are the
        origins the asking client may speak for (None: any); `query_id` is the service's, for the
        trace. The stages, in their fixed order."""
        q = self._route(request, policy or QueryPolicy(), allowed_origins)
        self._ask_origin(q)
        self._ask_routed(q)
        self._refine(q)
        self._answer(q)
        self._learn(q)
        fused, calls = q.answer_fused, q.calls
        answer = q.synthesis.answer if q.synthesis is not None else fused.answer
        return QueryResult(answer, fused.readable_citations(answer), _trace(q, query_id), fused, tuple(calls.calls),
                           q.decision, q.assessment, q.abstention, extractive_answer=fused.answer,
                           sites=site_summary(calls.calls, calls.skipped), routing=q.routing)

    def _route(self, request: QueryRequest, policy: QueryPolicy, allowed_origins: Collection[str] | None) -> "_Query":
        """Who may be asked, and the routing: a follow-up turn is routed as a standalone question."""
        asked = request
        standalone = standalone_question(request.question, request.conversation, self.cfg.conversation_carry_words,
                                         self.cfg.conversation_decay)
        if standalone != request.question:  # a follow-up: routed, retrieved and assessed as a standalone question
            request = replace(request, question=standalone)
        router, gate, refiner, abstainer = self.defaults(policy)
        started = time.perf_counter()  # the query's clock and budget start here
        records, routable, held = self._records()
        authorize_origin(request, records, allowed_origins)
        if request.sites is not None:
            check_sites(request.sites, records)
        for site_id in [*(request.sites or ()), *([request.origin] if request.origin else [])]:
            if site_id in held:
                raise VerificationError(f"query: site {site_id!r} is quarantined by this gateway's operator "
                                        f"({held[site_id]}); `hansa gateway quarantine {site_id} --release` lifts it")
        t = time.perf_counter()
        routing = route(request.question, embedder=self.embedder, index=self.index, records=records,
                        routable=routable, top_m=self.cfg.top_m_summaries,
                        k=request.top_k_sites or self.cfg.top_k_sites, router=router, explicit=request.sites,
                        discounts=self.conduct.discounts(), held=held, levels=self.cfg.route_levels,
                        unproven=self._unproven(routable))
        calls = Calls(request, request.retrieve_request(policy.mode), records, self.transport, self.cfg.site_timeout_s,
                      self.finish, self.early_measure, started)
        t = calls.add("route", t)
        prior_weight = self.cfg.fusion_site_prior if policy.site_prior is None else min(max(policy.site_prior, 0.0), 1.0)
        coverage_weight = (self.cfg.fusion_answer_coverage if policy.answer_coverage is None
                           else min(max(policy.answer_coverage, 0.0), 1.0))
        prior = partial(routing.site_prior, weight=prior_weight)
        coverage = AnswerCoverage.weighing(routing.words, coverage_weight)
        screen = Screen(request.question)  # each sentence screened once: for every assessment and fusion
        reading = self.reading_for(policy)  # at the floor of the question's kind (query.reading), for all its rounds
        return _Query(
            asked=asked, request=request, policy=policy, router=router, gate=gate, refiner=refiner,
            abstainer=abstainer, reading=reading.for_question(request.question) if reading is not None else None,
            records=records, routable=routable, t=t, routing=routing, routing_ms=calls.elapsed_ms(), calls=calls,
            prior=prior, coverage=coverage, screen=screen,
            judged=_Judged(refiner.quality if isinstance(refiner, JudgingRefiner) else None, request.question,
                           routing.question_vector, self.embedder, prior, coverage, screen),
            to_call=list(routing.selected))

    def _ask_origin(self, q: "_Query") -> None:
        """With an origin: ask it first; the gate decides whether its answer suffices."""
        request, routing = q.request, q.routing
        if request.origin is None:
            return
        origin = q.calls.round("origin", [request.origin])
        asked = origin.calls if origin else ()
        q.origin_assessment = routing.assess(request.question, asked, q.screen)
        decision = (q.gate.decide_with_evidence(request.question, routing.evidence(request.question, asked, q.screen),
                                                q.origin_assessment)
                    if isinstance(q.gate, EvidenceGate) else q.gate.decide(q.origin_assessment))
        if decision.answer and content_words(request.question):
            # never abstain on the origin's word alone: what it cannot answer, the federation may
            verdict = q.abstainer.judge(request.question, q.origin_assessment)
            if verdict.abstain:
                decision = replace(decision, answer=False, reason=f"the origin would abstain ({verdict.reason})")
        q.decision = decision
        q.stage("gate")
        if decision.answer:
            q.calls.skip(q.to_call)  # the origin answered: the routed sites are not asked
        q.to_call = [] if decision.answer else [s for s in q.to_call if s != request.origin]

    def _ask_routed(self, q: "_Query") -> None:
        """The routed sites, each in the mode its tier asks for (SCOUT-RAG's tiers)."""
        tier_modes = {s.site_id: s.mode for s in q.routing.considered if s.mode}
        q.calls.round("routed", q.to_call,
                      {s: q.request.retrieve_request(tier_modes[s]) for s in q.to_call if s in tier_modes})
        q.stage("call")
        q.judged.measure(q.calls)
        q.assessment = q.routing.assess(q.request.question, q.calls.calls, q.screen)
        q.stage("assess")

    def _refine(self, q: "_Query") -> None:
        """Further rounds while the refiner asks for them and the budget allows."""
        calls = q.calls
        if q.decision is not None and q.decision.answer:
            q.stop_reason = "answered by the origin"
            return
        if calls.out_of_budget or calls.out_of_time:
            q.stop_reason = "budget" if calls.out_of_budget else "deadline"
            return
        while q.stop_reason is None:
            q.stop_reason = self._next_round(q)
        q.stage("refine")

    def _next_round(self, q: "_Query") -> str | None:
        """One refinement round; why refinement stops, or None to go on."""
        calls, request = q.calls, q.request
        if len(calls.rounds) >= MAX_ROUNDS:
            return f"at most {MAX_ROUNDS} rounds"
        step = q.refiner.next_round(RefineState(
            request, q.routing.considered, frozenset(calls.called), tuple(calls.calls), q.evidence,
            len(calls.rounds), calls.sites_left(), tuple(q.judged.values), q.judged.latest, calls.time_left_ms(),
            tuple(r.wait_ms for r in calls.rounds)))
        fresh = [s for s in dict.fromkeys(step.sites)
                 if (s not in calls.called or s in step.followups) and s in q.records]
        if step.stop is not None or not fresh:
            return step.stop or "no new site to ask"
        followups = {s: _followup(request, step.followups[s]) for s in fresh if s in step.followups}
        if calls.round(step.kind, fresh, followups or None) is None:
            return "deadline" if calls.out_of_time else "budget"
        q.judged.measure(calls)
        q.assessment = q.routing.assess(q.request.question, q.calls.calls, q.screen)
        return None

    def _answer(self, q: "_Query") -> None:
        """The answer: an explanation when no site could answer, the best judged round's, an
        abstention, or the fused evidence (with second hops while the reader supports nothing)."""
        calls = q.calls
        q.fused = _unanswered(q)
        if q.fused is None and q.judged.best is not None and q.reading is None:
            q.fused = q.judged.best  # the best answer seen, whichever round gave it (a reader reads every round's)
        elif q.fused is None:
            self._abstain(q)
            if q.abstention.abstain and calls.calls:  # with no call at all, fusion explains why nobody was asked
                q.fused = FusedAnswer(answer=no_answer_text(calls.called, q.evidence.best_relevance), citations=(),
                                      sentences=(), note=q.abstention.reason)
            else:
                self._fuse(q)
        q.stage("fuse")
        if calls.cut_at_deadline:  # what this question's finishing added to its deadline
            self.finish.record(calls.elapsed_ms() - calls.finish_from_ms)
        if self.llm is not None:
            # the user's own words, not the routing text
            q.synthesis = synthesize(self.llm, q.asked.question, q.answer_fused, token_budget=q.asked.budget.tokens)
            q.stage("synthesize")

    def _abstain(self, q: "_Query") -> None:
        """The abstainer's verdict, then (when on) the rule that passages sharing no word of the
        question answer nothing: kept apart from the abstainers because the gate reads those too."""
        q.abstention = q.abstainer.judge(q.request.question, q.evidence)
        if not q.abstention.abstain and self.cfg.abstain_without_question_words:
            q.abstention = shares_no_word(q.request.question, q.evidence) or q.abstention
        q.stage("abstain")

    def _fuse(self, q: "_Query") -> None:
        """Fuse every answer seen; the reader's verdict replaces the abstainer's when there is one."""
        calls, request, reading = q.calls, q.request, q.reading
        q.fusion_prior = q.prior(calls.called)
        fused = fuse(q.routing.question_vector, calls.calls, self.embedder, reliability=self.reliability,
                            learn=False, site_prior=q.fusion_prior, coverage=q.coverage, reading=reading,
                            question=request.question, conduct=self.conduct, screen=q.screen)
        fused, q.second_hops = self._second_hops(request, fused, calls, q.records, q.routable, q.router, q.coverage,
                                                 q.fusion_prior, reading, q.screen)
        if self.reliability is not None and fused.observations:  # once per question, from its final answer
            self.reliability.observe(fused.observations)
        self.conduct.record_disputes(dispute_pairs(fused.conflicts))  # dispute breadth, from the same answer
        if fused.unsupported and reading is not None:  # the reader found nothing that answers
            best = float((fused.reading or {}).get("best", 0.0))
            q.abstention = AbstainDecision(True, best, fused.note or "no sentence reaches the reader's floor",
                                           reading.floor)
            fused = replace(fused, answer=no_answer_text(calls.called, best))
        elif fused.reading is not None and reading is not None and (model := self._read_abstain(reading)) is not None:
            q.abstention = read_abstain(model, q.evidence, fused.reading)
            if q.abstention.abstain:  # what it read answers, but too weakly for the calibrated model
                fused = replace(fused, answer=no_answer_text(calls.called, float(fused.reading.get("best", 0.0))),
                                sentences=(), short_answer="", conflicts=(), contributors=frozenset())
        elif fused.reading is not None and q.abstention is not None:
            q.abstention = replace(q.abstention, score=float(fused.reading.get("best", q.abstention.score)),
                                   reason="the reader supports the answer",
                                   threshold=reading.floor if reading is not None else None)
        q.fused = fused

    def _read_abstain(self, reading: ReadingStage) -> LogisticModel | None:
        """Abstention after reading, when on: the calibration's when fit for this reader (its
        threshold and weights are in that reader's score units), else the one the reader's card ships."""
        if not self.cfg.read_abstain:
            return None
        model = self.calibration.read_abstain
        return model if model is not None and model.fit.get("model_sha256") == reading.reader.model_sha256 \
            else reading.abstain

    def _learn(self, q: "_Query") -> None:
        """What this question teaches: the sites' conduct (gateway.query.conduct: who was routed and,
        when fusion measured the answers, each answering site's best summary similarity at routing
        against the best relevance measured among its sentences), a learning router, the citation
        history."""
        calls, fused, routing = q.calls.calls, q.answer_fused, q.routing
        claimed = {}
        if fused.measured:  # else nothing was measured (abstained before fusion, or no sentence)
            claimed = {c.site_id: best for c in calls
                       if c.status == OK and (best := routing.best_summary(c.site_id)) is not None}
        called = list(dict.fromkeys(q.calls.called))  # each site once, however many rounds asked it
        excess = self.conduct.observe(called if routing.selection == "routed" else None, claimed, fused.site_best)
        overrouted = {s: Observation.failed(OVERROUTED) for s, e in excess.items() if e > OVERROUTED_EXCESS}
        if overrouted and self.reliability is not None:  # its summaries promised what its answer did not hold
            self.reliability.observe(overrouted)
        if isinstance(q.router, LearningRouter):  # it logs what contributed
            q.router.observe(q.request.question, routing.considered, routing.selected, calls, fused)
        if self.history is not None and calls:
            self.history.record(q.calls.called, {s.site_id for s in fused.sentences})

    def _second_hops(self, request: QueryRequest, fused: FusedAnswer, calls: Calls, records: Mapping[str, SiteRecord],
                     routable: set[str], router: Router, coverage: AnswerCoverage | None,
                     prior: Mapping[str, float] | None, reading: ReadingStage | None,
                     screen: Screen) -> tuple[FusedAnswer, list[str]]:
        """query.hops: while the reader supports nothing, ask about what the best-read sentence names.
        Each hop fuses every answer again under `screen`, the question's own: a follow-up begins with
        the question, so an echo of either restates the question, while under the longer follow-up an
        echo of the question alone would fall short of the echo rule's share."""
        asked: list[str] = []
        # a request that names its sites is answered by them alone, as escalation never passes them
        for _ in range(self.cfg.second_hops if reading is not None and not request.sites else 0):
            if not fused.unsupported or calls.out_of_budget or calls.out_of_time:
                break
            names = bridge_entities(request.question, fused.best_read)
            follow = f"{request.question} {' '.join(names)}"
            if not names or follow in asked:
                break
            # routed by the names alone (what the second paragraph is about), asked with the question too
            hop = route(" ".join(names), embedder=self.embedder, index=self.index, records=records, routable=routable,
                        top_m=self.cfg.top_m_summaries, k=request.top_k_sites or self.cfg.top_k_sites, router=router,
                        discounts=self.conduct.discounts(), levels=self.cfg.route_levels,
                        unproven=self._unproven(routable))
            sites = _not_yet_asked(hop, set(calls.called))
            if not sites:
                break
            wire = _followup(request, follow)
            asked.append(follow)
            if calls.round("second_hop", sites, {s: wire for s in sites}) is None:
                break
            fused = fuse(hop.question_vector, calls.calls, self.embedder, reliability=self.reliability,
                                learn=False, site_prior=prior, coverage=coverage, reading=reading, question=follow,
                                conduct=self.conduct, screen=screen)
        return fused, asked



def _unanswered(q: "_Query") -> FusedAnswer | None:
    """An explanation instead of an answer when no site could answer at all: the budget or the
    deadline ran out before any call, or the time budget cut every call (not an abstention)."""
    calls, request = q.calls, q.request
    if not calls.calls and q.stop_reason in ("budget", "deadline"):
        note = ("the query's budget ran out before any site could be asked" if q.stop_reason == "budget" else
                "the gateway's own work took the whole site deadline (site_timeout_s) before any site could be asked")
        return FusedAnswer(answer=f"No answer: {note}.", citations=(), sentences=(), note=note)
    if request.budget.time_ms is not None and calls.calls and all(c.status == TIMEOUT for c in calls.calls):
        note = "the query's time budget cut the call to every site asked"
        return FusedAnswer(answer=budget_cut_text(calls.called, request.budget.time_ms), citations=(),
                           sentences=(), note=note)
    return None

@dataclass(eq=False)
class _Query:
    """One query's state as the stages fill it, in their order (QueryEngine.run): what was asked
    and under which stages, the routing, the calls, the gate's and the refiner's decisions, the
    answer. The trace is written once, from this, at the end (`_trace`)."""

    asked: QueryRequest  # as the client sent it
    request: QueryRequest  # as routed and retrieved (a follow-up turn made standalone)
    policy: QueryPolicy
    router: Router
    gate: Gate
    refiner: Refiner
    abstainer: Abstainer
    reading: ReadingStage | None
    records: dict[str, SiteRecord]
    routable: set[str]
    t: float  # where the stage now running began (stages_ms)
    routing: Routing
    routing_ms: float
    calls: Calls  # the clock, the budget and every call so far
    prior: Callable[[Collection[str]], Mapping[str, float] | None]  # the routing match fusion weighs sites by
    coverage: AnswerCoverage | None  # ... and how much of the question each answer uses
    screen: Screen
    judged: "_Judged"
    to_call: list[str]
    decision: GateDecision | None = None
    origin_assessment: Assessment | None = None
    assessment: Assessment | None = None  # of every answer so far (set once the routed round ran)
    stop_reason: str | None = None
    abstention: AbstainDecision | None = None
    fusion_prior: Mapping[str, float] | None = None
    second_hops: list[str] = field(default_factory=list)
    fused: FusedAnswer | None = None
    synthesis: Synthesis | None = None

    def stage(self, name: str) -> None:
        """The stage that ran since the last one ended is `name` (its time goes to stages_ms)."""
        self.t = self.calls.add(name, self.t)

    @property
    def evidence(self) -> Assessment:
        assert self.assessment is not None, "assessed once the routed round ran"
        return self.assessment

    @property
    def answer_fused(self) -> FusedAnswer:
        assert self.fused is not None, "answered once _answer ran"
        return self.fused


def _trace(q: _Query, query_id: str | None) -> QueryTrace:
    """The trace beside the answer, from the query's state once every stage ran."""
    request, calls, fused = q.request, q.calls, q.answer_fused
    total_ms = calls.elapsed_ms()
    bytes_out = sum(c.bytes_out for c in calls.calls)
    bytes_in = sum(c.bytes_in for c in calls.calls)
    spent = Spent(time_ms=round(total_ms, 1), sites=len(calls.calls), bytes=bytes_out + bytes_in,
                  tokens=q.synthesis.trace.tokens if q.synthesis is not None else 0)
    return QueryTrace(
        sites_considered=tuple(q.routing.considered),
        sites_excluded=tuple(q.routing.excluded),
        selection=q.routing.selection,
        sites_called=tuple(c.site_id for c in calls.calls),
        per_site=tuple(calls.calls),
        routing_ms=round(q.routing_ms, 1),  # includes embedding the question
        calls_ms=round(calls.waiting_ms, 1),
        fusion_ms=round(calls.stages.get("fuse", 0.0), 1),
        fusion_measured=fused.measured,
        total_ms=round(total_ms, 1),
        bytes_out=bytes_out,
        bytes_in=bytes_in,
        embed_ms=round(q.routing.embed_ms, 1),
        stages_ms={k: round(v, 1) for k, v in calls.stages.items()},
        rounds=tuple(RoundTrace.of(i, r, request.question, q.judged.measures.get(i))
                     for i, r in enumerate(calls.rounds)),
        waiting_ms=round(calls.waiting_ms, 1),
        gateway_overhead_ms=round(max(total_ms - calls.waiting_ms, 0.0), 1),
        finish_reserve_ms=round(calls.reserve_ms, 1),
        assessment=q.evidence,
        stop_reason=q.stop_reason,
        budget=BudgetUse(request.budget, spent),
        policy=q.policy.to_json(q.router, q.gate, q.refiner, q.abstainer),
        **_request_trace(q),
        **_answer_trace(q),
        tiers={s.site_id: s.tier for s in q.routing.considered if isinstance(s, TieredScore)} or None,
        best_round=q.judged.best_round,
        query_id=query_id,
    )


def _request_trace(q: _Query) -> dict[str, Any]:
    """How the request was taken: its origin and the gate, the conversation, the standalone question."""
    request, origin = q.request, q.request.origin
    return dict(origin=origin, gate=q.decision if origin is not None else None, origin_assessment=q.origin_assessment,
                conversation_turns=len(request.conversation) or None,
                standalone_question=request.question if request.question != q.asked.question else None,
                router=q.router.describe())


def _answer_trace(q: _Query) -> dict[str, Any]:
    """How the answer was made: fusion's weights, the reader, abstention, synthesis, second hops."""
    fused = q.answer_fused
    prior = q.fusion_prior  # the factors fusion weighed each site's citations by
    return dict(note=fused.note or None,
                site_prior={site: round(f, 4) for site, f in sorted(prior.items())} if prior is not None else None,
                # ... and by how much of the question each site's answer uses
                answer_coverage={site: round(f, 4) for site, f in sorted(fused.site_coverage.items())} or None,
                synthesis=q.synthesis.trace if q.synthesis is not None else None,
                abstained=q.abstention is not None and q.abstention.abstain, abstention=q.abstention,
                reading=dict(fused.reading) if fused.reading is not None else None,
                screened=tuple(fused.screened), second_hops=tuple(q.second_hops))


@dataclass(eq=False)
class _Judged:
    """Best-answer tracking for refiners that judge answers (a `quality(question, fused)` method):
    the answer fused after each round, its quality, and the best one seen."""

    quality: Any  # the refiner's judge (None: the refiner judges nothing, and nothing is tracked)
    question: str
    vector: Any  # the question's
    embedder: Embedder
    prior: Callable[[Collection[str]], Mapping[str, float] | None]  # fusion's site prior (Routing.site_prior)
    coverage: AnswerCoverage | None = None  # ... and the answers' word coverage (gateway.query.route.AnswerCoverage)
    screen: Screen | None = None  # the question's screen, shared with the assessment (gateway.query.fusion.Screen)
    values: list[float] = field(default_factory=list)
    measures: dict[int, Any] = field(default_factory=dict)  # round index -> quality measured after it
    latest: Any = None
    best: FusedAnswer | None = None
    best_round: int | None = None
    _best_value: float = float("-inf")

    def measure(self, calls: Calls) -> None:
        if self.quality is None or not calls.rounds:
            return
        fused = fuse(self.vector, calls.calls, self.embedder, site_prior=self.prior(calls.called),
                            coverage=self.coverage, question=self.question, screen=self.screen)
        self.latest = self.quality(self.question, fused)
        value = float(self.latest.value)
        self.values.append(value)
        self.measures[len(calls.rounds) - 1] = self.latest
        if value > self._best_value:  # ties keep the earlier, cheaper answer
            self._best_value, self.best, self.best_round = value, fused, len(calls.rounds) - 1


def _not_yet_asked(hop: Routing, called: set[str]) -> list[str]:
    """A second hop's sites: those it selected not yet asked, else its best-ranked one not yet asked."""
    return ([s for s in hop.selected if s not in called]
            or [s.site_id for s in hop.considered if s.site_id not in called][:1])


def _followup(request: QueryRequest, question: str) -> RetrieveRequest:
    """A Depth follow-up: local mode, the query's top_k; clipped to what a site accepts."""
    return replace(request.retrieve_request("local"), question=question[:MAX_QUESTION_CHARS].strip() or request.question)
