"""The query engine: route -> gate -> call -> assess -> refine -> fuse -> synthesize, one traced pipeline.

Why one composer with small stages: each stage has one contract (see its module) and can be
replaced alone — a calibrated gate, a tiered or learned router, a budgeted refiner, a new fusion —
while the engine keeps what must hold for all of them: the registry decides who may be called,
the budget is enforced here (not by stages), every answer seen is fused (the best answer found is
never lost), and the trace shows each stage's time and each round.

Trace (beside the answer): the fields the gateway always had (sites_considered, sites_excluded,
sites_called, selection, per_site, routing_ms, calls_ms, fusion_ms, total_ms, bytes_out,
bytes_in, note) plus `stages_ms` {route, gate, call, assess, refine, fuse, synthesize} (a stage that did not
run is absent), `embed_ms`, `rounds` [{round, kind, sites, ms, bytes_out, bytes_in}],
`waiting_ms` (wall time waiting for sites), `gateway_overhead_ms` (total minus waiting),
`origin`/`gate` when an origin was given, `assessment`, `stop_reason`, `budget` {given, spent},
`policy`, `standalone_question` (a follow-up turn with its conversation's salient words,
engine.conversation: what was routed and retrieved), `origin_assessment` (the gate's input) with an
origin, `synthesis` with an LLM (engine.synthesize: which answer was used, the tokens spent, also
counted in `budget.spent.tokens`), `abstained` and `abstention` {abstain, score, reason, threshold}
(engine.abstain), `router` {name, model_version, ...}.
With a tiered router: `tiers` {site: tier} and each considered site's tier and signals;
a round whose sites were asked differently carries `modes` {site: local|global} and `followups`
{site: question}; with a refiner that judges answers each round carries the fused answer's
`quality` and `best_round` says whose answer was returned.

The result carries what a reader needs beside the answer (gateway.answers): readable citations
(title, snippet, page, source, `n`, `used`) and the per-site summary `sites` {total, successful,
skipped, failed, timed_out, partial}. `skipped` counts the sites the engine chose to ask (routed,
named in `sites`, or picked by a refiner) and then did not call: the budget ran out before them, or
the gate let the origin answer alone. Sites routing never selected are not skipped, only unasked.
"""
from __future__ import annotations

import time
from functools import partial
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Collection, Mapping, Sequence

from hansa.adapters.embedder.base import Embedder
from hansa.core.config import GatewayConfig
from hansa.core.errors import ConfigError, VerificationError
from hansa.core.jsonsafe import dumps
from hansa.gateway.answers import readable_citations, site_summary
from hansa.gateway.client import MAX_RESPONSE_BYTES, OK, TIMEOUT, SiteCall
from hansa.gateway.engine.abstain import AbstainDecision, Abstainer, EvidenceRule, budget_cut_text, no_answer_text
from hansa.gateway.engine.assess import Assessment
from hansa.gateway.engine.calibration import Calibration
from hansa.gateway.engine.conversation import standalone_question
from hansa.gateway.engine.call import Round, call_round
from hansa.gateway.engine.finish import FinishReserve
from hansa.gateway.engine.fuse import fuse_answer, measure_early
from hansa.gateway.engine.gate import Gate, GateDecision
from hansa.gateway.engine.hops import bridge_entities
from hansa.gateway.engine.policy import QueryPolicy, default_abstainer, default_gate, escalation_policy
from hansa.gateway.engine.refine import MAX_ROUNDS, OneRound, RefineState, Refiner
from hansa.gateway.engine.request import QueryRequest, authorize_origin, check_sites
from hansa.gateway.engine.route import Router, Routing, SummaryRouter, route, router_json, trace_json
from hansa.gateway.engine.synthesize import synthesize_answer, tokens_spent
from hansa.gateway.engine.tiers import tiers_of
from hansa.gateway.fusion import FusedAnswer
from hansa.gateway.history import SiteHistory
from hansa.gateway.index import SummaryIndex
from hansa.gateway.lexical import AnswerCoverage
from hansa.gateway.reading import ReadingStage, open_reading
from hansa.gateway.registry import SiteRecord, SiteRegistry, utc_now
from hansa.gateway.conduct import OVERROUTED_EXCESS, SiteConduct
from hansa.gateway.reliability import OVERROUTED, Observation, SiteReliability
from hansa.gateway.screening import Screen
from hansa.gateway.transport import SiteTransport
from hansa.core.text import content_words  # the sites' own notion of a content word
from hansa.sync.wire import MAX_QUESTION_CHARS, RetrieveRequest


@dataclass(frozen=True)
class QueryResult:
    answer: str
    citations: list[dict[str, Any]]
    trace: dict[str, Any]
    fused: FusedAnswer = field(repr=False)
    calls: tuple[SiteCall, ...] = field(default=(), repr=False)  # every call, all rounds
    decision: GateDecision | None = None
    assessment: Assessment | None = None
    abstention: AbstainDecision | None = None
    extractive_answer: str = ""  # the fused answer before synthesis (== answer without an LLM)
    sites: dict[str, Any] = field(default_factory=dict)  # the per-site summary (gateway.answers.site_summary)
    routing: Routing | None = field(default=None, repr=False)  # how the sites were ranked (calibration reads it)

    @property
    def abstained(self) -> bool:
        return self.abstention is not None and self.abstention.abstain

    def to_json(self) -> dict[str, Any]:
        """The body of a POST /v1/query answer. `confidence` is the abstention score (higher: the
        evidence answers the question), for risk-coverage curves."""
        out = {"answer": self.answer, "citations": self.citations, "trace": self.trace, "abstained": self.abstained,
               "sites": self.sites}
        if self.abstention is not None:
            out["confidence"] = round(self.abstention.score, 4)
        if self.fused.conflicts:
            out["conflicts"] = self.fused.conflicts_json()
        if self.fused.short_answer and not self.abstained:
            out["short_answer"] = self.fused.short_answer  # the reader's span in the leading sentence
        return out


class _Clock:
    """Stage timings and the time spent waiting for sites."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.stages: dict[str, float] = {}
        self.waiting_ms = 0.0

    def add(self, stage: str, since: float) -> float:
        now = time.perf_counter()
        self.stages[stage] = self.stages.get(stage, 0.0) + (now - since) * 1000
        return now

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.t0) * 1000


class _Calls:
    """One query's calls across rounds, each round cut to what the budget has left."""

    def __init__(self, engine: "QueryEngine", request: QueryRequest, retrieve: RetrieveRequest,
                 records: Mapping[str, SiteRecord], clock: _Clock) -> None:
        self.engine, self.budget, self.retrieve, self.records, self.clock = engine, request.budget, retrieve, records, clock
        self.request_bytes = len(dumps(retrieve.to_json()))  # what each call sends (bytes_out)
        self.rounds: list[Round] = []
        self.calls: list[SiteCall] = []
        self.out_of_budget = False
        self.out_of_time = False
        self._skipped: list[str] = []  # chosen, then not called (budget, gate); see `skipped`
        # When the gateway began working toward the next round: the query's arrival, then the end of
        # each round. A round's deadline counts from here, so routing, the gate's assessment and a
        # refiner's choice come out of the sites' time instead of being added to the user's wait.
        self._since_ms = 0.0
        # What the last round kept back for the gateway's work after it (engine.finish), and where
        # that work began (the round's end, or its deadline when the round ended late).
        self.reserve_ms = 0.0
        self.finish_from_ms = 0.0

    def skip(self, site_ids: Sequence[str]) -> None:
        self._skipped.extend(site_ids)

    @property
    def skipped(self) -> list[str]:
        called = set(self.called)
        return [s for s in dict.fromkeys(self._skipped) if s not in called]

    @property
    def cut_at_deadline(self) -> bool:
        """Whether the last round cut a call at its deadline (its finishing added to the deadline)."""
        return bool(self.rounds) and any(c.status == TIMEOUT for c in self.rounds[-1].calls)

    @property
    def called(self) -> list[str]:
        return [c.site_id for c in self.calls]

    def sites_left(self) -> int | None:
        """Distinct sites the budget still allows (a follow-up to a site already asked is free)."""
        return None if self.budget.sites is None else self.budget.sites - len(set(self.called))

    def time_left_ms(self) -> float | None:
        return None if self.budget.time_ms is None else self.budget.time_ms - self.clock.elapsed_ms()

    def round(self, kind: str, site_ids: Sequence[str],
              requests: Mapping[str, RetrieveRequest] | None = None) -> Round | None:
        """Call `site_ids` (at most as many new sites as the budget has left) with the time left of
        the round's deadline and of the budget, and the bytes left, each with its own request from
        `requests` (default: the query's); None when nothing is left to call them with (then
        `out_of_budget`, or `out_of_time` when the deadline alone ran out) or nobody to call."""
        left = self.sites_left()
        wanted = bool(site_ids)
        if left is not None:
            seen = set(self.called)
            new = [s for s in site_ids if s not in seen][:max(left, 0)]
            self.skip([s for s in site_ids if s not in seen and s not in new])
            site_ids = [s for s in site_ids if s in seen or s in new]
        site_ids = list(site_ids)
        self.reserve_ms = self.engine.finish.reserve_ms()
        started_ms = self.clock.elapsed_ms()
        deadline_s = self.engine.cfg.site_timeout_s - (started_ms - self._since_ms + self.reserve_ms) / 1000
        timeout_s = deadline_s
        if self.budget.time_ms is not None:
            timeout_s = min(timeout_s, (self.budget.time_ms - self.clock.elapsed_ms()) / 1000)
        wire = [(requests or {}).get(s, self.retrieve) for s in site_ids]
        cap = MAX_RESPONSE_BYTES
        if self.budget.bytes is not None and site_ids:  # what is left, shared by the round's answers
            spent = sum(c.bytes_out + c.bytes_in for c in self.calls)
            sent = max(len(dumps(r.to_json())) for r in wire) if requests else self.request_bytes
            cap = min(cap, (self.budget.bytes - spent) // len(site_ids) - sent)
        if not site_ids or timeout_s <= 0 or cap <= 0:
            if deadline_s <= 0 and site_ids and cap > 0 and timeout_s == deadline_s:
                self.out_of_time = True  # the gateway's own work took the whole site_timeout_s
            else:
                self.out_of_budget = self.out_of_budget or wanted
            self.skip(site_ids)
            return None
        rnd = call_round(self.engine.transport, kind, site_ids, self.records, wire if requests else self.retrieve,
                         timeout_s, cap, self.engine.early_measure)
        self.clock.waiting_ms += rnd.wait_ms
        self._since_ms = self.clock.elapsed_ms()
        self.finish_from_ms = min(self._since_ms, started_ms + timeout_s * 1000)
        self.rounds.append(rnd)
        self.calls.extend(rnd.calls)
        return rnd


class QueryEngine:
    def __init__(self, cfg: GatewayConfig, embedder: Embedder, index: SummaryIndex, registry: SiteRegistry,
                 transport: SiteTransport, calibration: Calibration | None = None,
                 reliability: SiteReliability | None = None, history: SiteHistory | None = None,
                 llm: Any = None, reading: ReadingStage | str | None = "config",
                 conduct: SiteConduct | None = None) -> None:
        """`reading`: the reader's stage; "config" opens what `[gateway] reader` names (gateway.reading).
        `conduct`: the sites' record (gateway.conduct; None: one kept in memory)."""
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
        stage = open_reading(self.cfg.reader, self.cfg.reader_floor, self.cfg.reader_pool, self.cfg.reader_relative_floor)
        if stage is None or self.cfg.reader_floor >= 0:
            return stage
        fitted = self.calibration.floor_for(stage.reader.model_sha256)
        return replace(stage, floor=fitted) if fitted is not None else stage

    def reading_for(self, policy: QueryPolicy) -> ReadingStage | None:
        """The reader a query runs with: the gateway's, unless the policy turns it off."""
        return None if policy.reading is False else self.reading

    def defaults(self, policy: QueryPolicy) -> tuple[Router, Gate, Refiner, Abstainer]:
        """The policy's stages, the gateway's where it names none. A calibration with an `escalate`
        model makes escalation the gateway's routing (engine.escalate); a policy that names its own
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
        now = utc_now()
        held = self.conduct.quarantined()
        return records, {sid for sid, r in records.items() if r.is_routable(now) and sid not in held}, held

    def rank(self, question: str, router: Router) -> Routing:
        """Route `question` with `router` over the routable sites and call none: what a router
        sees of a question (calibration collects the tiered gaps of the fit split this way)."""
        records, routable, held = self._records()
        return route(question, embedder=self.embedder, index=self.index, records=records, routable=routable,
                     top_m=self.cfg.top_m_summaries, k=self.cfg.top_k_sites, router=router,
                     discounts=self.conduct.discounts(), held=held)

    def run(self, request: QueryRequest, *, policy: QueryPolicy | None = None,
            allowed_origins: Collection[str] | None = None) -> QueryResult:
        """Answer `request` under `policy` (default: the gateway's); `allowed_origins` are the
        origins the asking client may speak for (None: any)."""
        policy = policy or QueryPolicy()
        asked = request
        standalone = standalone_question(request.question, request.conversation, self.cfg.conversation_carry_words,
                                         self.cfg.conversation_decay)
        if standalone != request.question:  # a follow-up: routed, retrieved and assessed as a standalone question
            request = replace(request, question=standalone)
        router, gate, refiner, abstainer = self.defaults(policy)
        reading = self.reading_for(policy)
        clock = _Clock()
        records, routable, held = self._records()
        authorize_origin(request, records, allowed_origins)
        if request.sites is not None:
            check_sites(request.sites, records)
        for site_id in [*(request.sites or ()), *([request.origin] if request.origin else [])]:
            if site_id in held:
                raise VerificationError(f"query: site {site_id!r} is quarantined by this gateway's operator "
                                        f"({held[site_id]}); `hansa gateway quarantine {site_id} --release` lifts it")

        prior_weight = self.cfg.fusion_site_prior if policy.site_prior is None else min(max(policy.site_prior, 0.0), 1.0)
        t = time.perf_counter()
        routing = route(request.question, embedder=self.embedder, index=self.index, records=records,
                        routable=routable, top_m=self.cfg.top_m_summaries,
                        k=request.top_k_sites or self.cfg.top_k_sites, router=router, explicit=request.sites,
                        discounts=self.conduct.discounts(), held=held)
        t = clock.add("route", t)
        routing_ms = clock.elapsed_ms()
        calls = _Calls(self, request, request.retrieve_request(policy.mode), records, clock)
        # SCOUT-RAG's tiers: a tiered router's sites carry the mode their tier asks for.
        tier_modes = {s.site_id: s.mode for s in routing.considered if getattr(s, "mode", None)}
        prior = partial(routing.site_prior, weight=prior_weight)
        coverage_weight = (self.cfg.fusion_answer_coverage if policy.answer_coverage is None
                           else min(max(policy.answer_coverage, 0.0), 1.0))
        coverage = AnswerCoverage.weighing(routing.words, coverage_weight)
        screen = Screen(request.question)  # each sentence screened once: for every assessment and fusion
        judged = _Judged(getattr(refiner, "quality", None), request.question, routing.question_vector, self.embedder,
                         prior, coverage, screen)

        def assessed() -> Assessment:
            return routing.assess(request.question, calls.calls, screen)

        decision: GateDecision | None = None
        origin_assessment: Assessment | None = None
        to_call = list(routing.selected)
        if request.origin is not None:
            origin = calls.round("origin", [request.origin])
            origin_assessment = routing.assess(request.question, origin.calls if origin else (), screen)
            with_evidence = getattr(gate, "decide_with_evidence", None)  # a gate that reads the evidence (LLM)
            decision = (with_evidence(request.question,
                                      routing.evidence(request.question, origin.calls if origin else (), screen),
                                      origin_assessment)
                        if callable(with_evidence) else gate.decide(origin_assessment))
            if decision.answer and content_words(request.question):
                # never abstain on the origin's word alone: what it cannot answer, the federation may
                verdict = abstainer.judge(request.question, origin_assessment)
                if verdict.abstain:
                    decision = replace(decision, answer=False, reason=f"the origin would abstain ({verdict.reason})")
            t = clock.add("gate", t)
            if decision.answer:
                calls.skip(to_call)  # the origin answered: the routed sites are not asked
            to_call = [] if decision.answer else [s for s in to_call if s != request.origin]

        calls.round("routed", to_call, {s: request.retrieve_request(tier_modes[s]) for s in to_call if s in tier_modes})
        t = clock.add("call", t)
        judged.measure(calls)
        assessment = assessed()
        t = clock.add("assess", t)

        stop_reason: str | None = None
        if decision is not None and decision.answer:
            stop_reason = "answered by the origin"
        elif calls.out_of_budget or calls.out_of_time:
            stop_reason = "budget" if calls.out_of_budget else "deadline"
        else:
            while True:
                if len(calls.rounds) >= MAX_ROUNDS:
                    stop_reason = f"at most {MAX_ROUNDS} rounds"
                    break
                step = refiner.next_round(RefineState(
                    request, routing.considered, frozenset(calls.called), tuple(calls.calls), assessment,
                    len(calls.rounds), calls.sites_left(), tuple(judged.values), judged.latest, calls.time_left_ms(),
                    tuple(r.wait_ms for r in calls.rounds)))
                fresh = [s for s in dict.fromkeys(step.sites)
                         if (s not in calls.called or s in step.followups) and s in records]
                if step.stop is not None or not fresh:
                    stop_reason = step.stop or "no new site to ask"
                    break
                followups = {s: _followup(request, step.followups[s]) for s in fresh if s in step.followups}
                if calls.round(step.kind, fresh, followups or None) is None:
                    stop_reason = "deadline" if calls.out_of_time else "budget"
                    break
                judged.measure(calls)
                assessment = assessed()
            t = clock.add("refine", t)

        abstention: AbstainDecision | None = None
        fusion_prior: Mapping[str, float] | None = None
        second_hops: list[str] = []
        if not calls.calls and stop_reason in ("budget", "deadline"):
            note = ("the query's budget ran out before any site could be asked" if stop_reason == "budget" else
                    "the gateway's own work took the whole site deadline (site_timeout_s) before any site could be asked")
            fused = FusedAnswer(answer=f"No answer: {note}.", citations=(), sentences=(), note=note)
        elif request.budget.time_ms is not None and calls.calls and all(c.status == TIMEOUT for c in calls.calls):
            note = "the query's time budget cut the call to every site asked"  # no site could answer: no abstaining
            fused = FusedAnswer(answer=budget_cut_text(calls.called, request.budget.time_ms), citations=(),
                                sentences=(), note=note)
        elif judged.best is not None and reading is None:
            fused = judged.best  # the best answer seen, whichever round gave it (a reader reads every round's)
        else:
            abstention = abstainer.judge(request.question, assessment)
            t = clock.add("abstain", t)
            if abstention.abstain and calls.calls:  # with no call at all, fusion explains why nobody was asked
                fused = FusedAnswer(answer=no_answer_text(calls.called, assessment.best_relevance), citations=(),
                                    sentences=(), note=abstention.reason)
            else:
                fusion_prior = prior(calls.called)
                fused = fuse_answer(routing.question_vector, calls.calls, self.embedder, reliability=self.reliability,
                                    learn=False, site_prior=fusion_prior, coverage=coverage, reading=reading,
                                    question=request.question, conduct=self.conduct, screen=screen)
                fused, hops = self._second_hops(request, fused, calls, records, routable, router, coverage,
                                                fusion_prior, reading)
                if hops:
                    second_hops = hops
                if self.reliability is not None and fused.observations:  # once per question, from its final answer
                    self.reliability.observe(fused.observations)
                if fused.unsupported and reading is not None:  # the reader found nothing that answers
                    best = float((fused.reading or {}).get("best", 0.0))
                    abstention = AbstainDecision(True, best, fused.note or "no sentence reaches the reader's floor",
                                                 reading.floor)
                    fused = replace(fused, answer=no_answer_text(calls.called, best))
                elif fused.reading is not None and abstention is not None:
                    abstention = replace(abstention, score=float(fused.reading.get("best", abstention.score)),
                                         reason="the reader supports the answer",
                                         threshold=reading.floor if reading is not None else None)
        t = clock.add("fuse", t)
        if calls.cut_at_deadline:  # what this question's finishing added to its deadline
            self.finish.record(clock.elapsed_ms() - calls.finish_from_ms)
        synthesis = None
        if self.llm is not None:
            synthesis = synthesize_answer(self.llm, asked, fused)  # the user's own words, not the routing text
            clock.add("synthesize", t)
        self._observe_conduct(routing, calls.calls, fused)
        observe = getattr(router, "observe", None)  # a learning router logs what contributed
        if callable(observe):
            observe(request.question, routing.considered, routing.selected, calls.calls, fused)
        if self.history is not None and calls.calls:
            self.history.record(calls.called, {s.site_id for s in fused.sentences})
        total_ms = clock.elapsed_ms()
        trace = self._trace(request, policy.to_json(router, gate, refiner, abstainer), routing, routing_ms,
                            calls.rounds, calls.calls, clock, total_ms, decision, assessment, stop_reason, fused,
                            calls.reserve_ms)
        if standalone != asked.question:
            trace["standalone_question"] = standalone
        if fusion_prior is not None:  # the factors fusion weighed each site's citations by
            trace["site_prior"] = {site: round(f, 4) for site, f in sorted(fusion_prior.items())}
        if fused.site_coverage:  # ... and by how much of the question each site's answer uses
            trace["answer_coverage"] = {site: round(f, 4) for site, f in sorted(fused.site_coverage.items())}
        if synthesis is not None:
            trace["synthesis"] = synthesis.trace
            trace["budget"]["spent"]["tokens"] = tokens_spent(synthesis)
        _trace_refinement(trace, request.question, routing, calls.rounds, judged)
        if origin_assessment is not None:
            trace["origin_assessment"] = origin_assessment.to_json()  # what the gate decided on
        trace["abstained"] = abstention is not None and abstention.abstain
        if abstention is not None:
            trace["abstention"] = abstention.to_json()
        trace["router"] = router_json(router)
        if fused.reading is not None:
            trace["reading"] = dict(fused.reading)
        if fused.screened:  # sentences refused as evidence: echoes, instructions, templates (gateway.screening)
            trace["screened"] = [s.to_json() for s in fused.screened]
        if second_hops:
            trace["second_hops"] = second_hops  # the follow-ups asked, in order
        answer = synthesis.answer if synthesis is not None else fused.answer
        return QueryResult(answer, readable_citations(fused, answer), trace, fused, tuple(calls.calls), decision, assessment,
                           abstention, extractive_answer=fused.answer, sites=site_summary(calls.calls, calls.skipped),
                           routing=routing)

    def _second_hops(self, request: QueryRequest, fused: FusedAnswer, calls: _Calls, records: Mapping[str, SiteRecord],
                     routable: set[str], router: Router, coverage: AnswerCoverage | None,
                     prior: Mapping[str, float] | None, reading: ReadingStage | None) -> tuple[FusedAnswer, list[str]]:
        """engine.hops: while the reader supports nothing, ask about what the best-read sentence names."""
        asked: list[str] = []
        for _ in range(self.cfg.second_hops if reading is not None else 0):
            if not fused.unsupported or calls.out_of_budget or calls.out_of_time:
                break
            names = bridge_entities(request.question, fused.best_read)
            follow = f"{request.question} {' '.join(names)}"
            if not names or follow in asked:
                break
            # routed by the names alone (what the second paragraph is about), asked with the question too
            hop = route(" ".join(names), embedder=self.embedder, index=self.index, records=records, routable=routable,
                        top_m=self.cfg.top_m_summaries, k=request.top_k_sites or self.cfg.top_k_sites, router=router,
                        discounts=self.conduct.discounts())
            called = set(calls.called)
            sites = [s for s in hop.selected if s not in called] or [s.site_id for s in hop.considered
                                                                     if s.site_id not in called][:1]
            if not sites:
                break
            wire = _followup(request, follow)
            asked.append(follow)
            if calls.round("second_hop", sites, {s: wire for s in sites}) is None:
                break
            fused = fuse_answer(hop.question_vector, calls.calls, self.embedder, reliability=self.reliability,
                                learn=False, site_prior=prior, coverage=coverage, reading=reading, question=follow,
                                conduct=self.conduct)
        return fused, asked

    def _observe_conduct(self, routing: Routing, calls: Sequence[SiteCall], fused: FusedAnswer) -> None:
        """Teach the sites' conduct (gateway.conduct) what this question showed: who was routed,
        and, when fusion measured the answers, each answering site's best summary similarity at
        routing against the best relevance measured among its sentences."""
        called = list(dict.fromkeys(c.site_id for c in calls))
        if routing.selection == "routed":
            self.conduct.routed(called)
        if not fused.measured:
            return  # nothing was measured (abstained before fusion, or no sentence): nothing to compare
        claimed = {c.site_id: best for c in calls
                   if c.status == OK and (best := routing.best_summary(c.site_id)) is not None}
        excess = self.conduct.observe_claims(claimed, fused.site_best)
        overrouted = {s: Observation.failed(OVERROUTED) for s, e in excess.items() if e > OVERROUTED_EXCESS}
        if overrouted and self.reliability is not None:  # its summaries promised what its answer did not hold
            self.reliability.observe(overrouted)

    @staticmethod
    def _trace(request: QueryRequest, policy: dict[str, Any], routing: Routing, routing_ms: float,
               rounds: list[Round], calls: list[SiteCall], clock: _Clock, total_ms: float,
               decision: GateDecision | None, assessment: Assessment, stop_reason: str | None,
               fused: FusedAnswer, reserve_ms: float) -> dict[str, Any]:
        bytes_out = sum(c.bytes_out for c in calls)
        bytes_in = sum(c.bytes_in for c in calls)
        trace: dict[str, Any] = {
            **trace_json(routing),
            "sites_called": [c.site_id for c in calls],
            "per_site": [c.trace_json() for c in calls],
            "routing_ms": round(routing_ms, 1),  # includes embedding the question
            "calls_ms": round(clock.waiting_ms, 1),
            "fusion_ms": round(clock.stages.get("fuse", 0.0), 1),
            "fusion_measured": fused.measured,  # sentences fusion embedded to verify relevance
            "total_ms": round(total_ms, 1),
            "bytes_out": bytes_out,
            "bytes_in": bytes_in,
            "embed_ms": round(routing.embed_ms, 1),
            "stages_ms": {k: round(v, 1) for k, v in clock.stages.items()},
            "rounds": [r.trace_json(i) for i, r in enumerate(rounds)],
            "waiting_ms": round(clock.waiting_ms, 1),
            "gateway_overhead_ms": round(max(total_ms - clock.waiting_ms, 0.0), 1),
            "finish_reserve_ms": round(reserve_ms, 1),
            "assessment": assessment.to_json(),
            "stop_reason": stop_reason,
            "budget": {"given": request.budget.to_json(),
                       "spent": {"time_ms": round(total_ms, 1), "sites": len(calls), "bytes": bytes_out + bytes_in,
                                 "tokens": 0}},
            "policy": policy,
        }
        if request.origin is not None:
            trace["origin"] = request.origin
            if decision is not None:
                trace["gate"] = decision.to_json()
        if request.conversation:
            trace["conversation_turns"] = len(request.conversation)
        if fused.note:
            trace["note"] = fused.note
        return trace


class _Judged:
    """Best-answer tracking for refiners that judge answers (a `quality(question, fused)` method):
    the answer fused after each round, its quality, and the best one seen."""

    def __init__(self, quality: Any, question: str, question_vector: Any, embedder: Embedder,
                 prior: Callable[[Collection[str]], Mapping[str, float] | None],
                 coverage: AnswerCoverage | None = None, screen: Screen | None = None) -> None:
        self.quality, self.question, self.vector, self.embedder = quality, question, question_vector, embedder
        self.prior = prior  # the site prior fusion weighs citations by (Routing.site_prior)
        self.coverage = coverage  # ... and the answers' word coverage (gateway.lexical.AnswerCoverage)
        self.screen = screen  # the question's screen, shared with the assessment (gateway.screening.Screen)
        self.values: list[float] = []
        self.measures: dict[int, Any] = {}  # round index -> quality measured after it
        self.latest: Any = None
        self.best: FusedAnswer | None = None
        self.best_round: int | None = None
        self._best_value = float("-inf")

    def measure(self, calls: _Calls) -> None:
        if self.quality is None or not calls.rounds:
            return
        fused = fuse_answer(self.vector, calls.calls, self.embedder, site_prior=self.prior(calls.called),
                            coverage=self.coverage, question=self.question, screen=self.screen)
        self.latest = self.quality(self.question, fused)
        value = float(self.latest.value)
        self.values.append(value)
        self.measures[len(calls.rounds) - 1] = self.latest
        if value > self._best_value:  # ties keep the earlier, cheaper answer
            self._best_value, self.best, self.best_round = value, fused, len(calls.rounds) - 1


def _followup(request: QueryRequest, question: str) -> RetrieveRequest:
    """A Depth follow-up: local mode, the query's top_k; clipped to what a site accepts."""
    return replace(request.retrieve_request("local"), question=question[:MAX_QUESTION_CHARS].strip() or request.question)


def _trace_refinement(trace: dict[str, Any], question: str, routing: Routing, rounds: Sequence[Round],
                      judged: _Judged) -> None:
    """Tiers, each round's modes/follow-ups and quality, and which round's answer was returned."""
    tiers = tiers_of(routing.considered)
    if tiers:
        trace["tiers"] = tiers
    for i, (entry, rnd) in enumerate(zip(trace["rounds"], rounds)):
        if rnd.requests:
            entry["modes"] = {c.site_id: r.mode for c, r in zip(rnd.calls, rnd.requests)}
            followups = {c.site_id: r.question for c, r in zip(rnd.calls, rnd.requests) if r.question != question}
            if followups:
                entry["followups"] = followups
        if i in judged.measures:
            entry["quality"] = judged.measures[i].to_json()
    if judged.best_round is not None:
        trace["best_round"] = judged.best_round
