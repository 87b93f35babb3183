"""One evaluation run: build (or reuse) each federation, ask every question through every strategy,
and turn the answers into per-question outcomes.

Strategies, all against the same sites in the same run, each asked through the federation's
Gateway service (`Gateway.query`, in-process; the sites answer over real signed HTTP). The
baselines differ only by the request (`sites`, `top_k_sites`), the engine strategies by a policy:
  hansa            the gateway as configured (summary routing, fusion)
  exhaustive       every site is asked (the cost ceiling)
  centralized      one site holding every passage (the quality a federation gives up)
  top1             DGRAG's m = k = 1: only the best-matching summary's site
  oracle           only the gold site(s) (the cost floor; answerable questions only)
  full_information sites ranked by their single best chunk, under hansa's selection rule — needs
                   every chunk embedding at the gateway, so hansa may not ship it.
The query engine's strategies take a policy per call (a client may not pick a policy over HTTP; see
gateway/query/policy.py):
  gated            DGRAG: the user's own site (`origin`) answers first, the calibrated gate decides
                   whether to escalate. Each answerable question is asked twice: with a gold site as
                   origin (in-domain) and with a site holding none of its gold (out-of-domain);
                   records carry escalation_in_domain / escalation_out_of_domain (DGRAG's Table 2).
  tiers / refine   SCOUT-RAG: relevance tiers (global/local retrieval), then budgeted refinement.
  learned          RAGRoute: the learned router over site-agnostic features (summary matching
                   until a model is trained; `router_model`: a model trained on the fit split's
                   router rows, `hansa gateway router train --rows`).
  escalate         DGRAG's gate round by round (gateway/query/escalate.py): the ranking's best site(s)
                   first, more only while the calibrated evidence is not confident; needs a
                   calibration with an `escalate` model (--calibration).
  one_round        summary routing's margin rule, one round, whatever the calibration holds (with an
                   escalation model, `hansa` escalates: this is the comparison in the same run).
  refine[KEY=N]    `budgets`: refine again under each budget point ({KEY: N} in the request, KEY
                   one of time_ms, sites, bytes), so quality can be read against budget as a curve
                   (report.budget_curve); records carry the budget.

Speed: question vectors for the reference routers are embedded in one batch; routing curves are
computed without calling sites; the questions themselves are asked by a thread pool (`workers`),
since a question mostly waits on sites.

`conversation`: MTRAG-UN questions are asked as their last turn with the earlier user turns as
`QueryRequest.conversation` (the engine makes the turn standalone: gateway/query/request.py), and the
routing curves are also computed for a small grid of carried-word settings, the last turn alone
and all turns joined (`conversation_routing`), so the setting can be chosen on the fit split.
`llm`: the gateway synthesizes answers with the OpenAI-compatible endpoint; every outcome keeps
both the written and the extractive answer, so the report scores both on the same questions.
"""
from __future__ import annotations

import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from hansa.core.errors import HansaError, InputError
from hansa.evaluation import metrics
from hansa.evaluation.datasets import OUT_OF_SCOPE, OUT_OF_SCOPE_ID, Dataset, Passage, Question, load_dataset
from hansa.evaluation.split import sample, select

STRATEGIES = ("hansa", "exhaustive", "centralized", "top1", "oracle", "full_information")
ENGINE_STRATEGIES = ("gated", "tiers", "refine", "learned", "escalate", "one_round", "hansa_noreader")  # run in-process with a QueryPolicy (policy_for)
EVAL_CLIENT = "eval"  # the in-process client name: no API key record, so no origin allow-list
Progress = Callable[[str], None]


@dataclass(frozen=True)
class EvalSettings:
    dataset: str
    data: Path
    federations: tuple[int, ...]
    strategies: tuple[str, ...] = STRATEGIES
    split: str = "report"
    limit: int = 0  # answerable questions (0: all in the split)
    limit_unanswerable: int = 0  # unanswerable questions (0: all in the split; -1: none)
    out_of_scope: int = 0  # questions of the other dataset, which no site holds (out_of_scope_questions)
    # "dev" / "train" (SQuAD): only questions of that part; "all" mixes them. all-MiniLM-L6-v2 was
    # trained on SQuAD's train questions, so train figures flatter it: headline figures use dev.
    question_source: str = "all"
    max_passages: int = 0  # per domain (SQuAD: overall), gold passages kept: the CI smoke run
    max_documents: int = 0  # whole documents, a stable hash sample; questions follow their gold
    top_k_sites: int = 0  # 0: the gateway's configured default
    conversation: bool = False
    routing_only: bool = False  # only the routing curves (no site is asked): cheap routing studies
    llm_base_url: str = ""  # an OpenAI-compatible endpoint: answers are synthesized, both answers scored
    llm_model: str = ""
    llm_api_key: str = field(default="", repr=False)  # never written to the report (report.document)
    # Seconds the gateway waits for a site. Above the deployment default (10 s) because a shared
    # 2-core machine under load makes sites slow, and a timed-out site would be scored as a routing
    # or abstention result; failed calls are still counted per record.
    site_timeout_s: float = 60.0
    workers: int = 4
    cache: Path | None = None  # None: build into the work directory, nothing reused
    workdir: Path | None = None
    # [site] settings every site is built with, e.g. (("chunks_per_summary", "32"),): a sweep of
    # how sites are built, each value its own cached build
    site_settings: tuple[tuple[str, str], ...] = ()
    # [gateway] settings the gateway runs with, e.g. (("lexical_weight", "2"),): a sweep of how the
    # gateway routes; sites are reused as built
    gateway_settings: tuple[tuple[str, str], ...] = ()
    # [embedder] settings both the sites and the gateway run with, e.g. (("model", "bge-small-en-v1.5-q"),):
    # one federation, one space; the gateway's cosine-unit defaults follow the model (scales.toml)
    embedder_settings: tuple[tuple[str, str], ...] = ()
    # the gate's and abstention's calibration the gateway loads (`hansa gateway calibrate --out`)
    calibration: Path | None = None
    # write the gate and abstain rows of the asked (fit-split) questions here, one file per
    # federation (<stem>_fed<N><suffix>), for `hansa gateway calibrate --data` (evaluation.calibration)
    calibration_rows: Path | None = None
    # which kinds of rows each asked question gives (evaluation.calibration.ROW_KINDS); empty: all
    calibration_kinds: tuple[str, ...] = ()
    # ask each (site, request) pair once per run and replay its verified answer to the strategies
    # asking it again (evaluation.shared_calls): same figures, a fraction of the sites' time
    share_site_calls: bool = False
    # budget points, e.g. (("sites", 2), ("sites", 4)): the refine strategy asked once more under
    # each, as `refine[sites=2]` ... (budget_strategies)
    budgets: tuple[tuple[str, int], ...] = ()
    # the learned strategy's model (`hansa gateway router train --rows` on fit-split router rows);
    # None: the gateway's own model, or summary matching without one
    router_model: Path | None = None


def budget_strategies(budgets: Sequence[tuple[str, int]]) -> dict[str, dict[str, int]]:
    """Strategy name -> the request budget of each budget point: `refine[sites=4]` -> {"sites": 4}.
    Each point is checked as the gateway checks a request's budget, so a sweep fails before any
    site is built rather than on its first question."""
    from hansa.gateway.query.request import Budget

    out = {}
    for key, value in budgets:
        Budget.from_json({key: value})
        out[f"refine[{key}={value}]"] = {key: value}
    return out


def setting_env(section: str, settings: Sequence[tuple[str, str]]) -> dict[str, str]:
    """`[site]`, `[gateway]` or `[embedder]` settings as the environment overrides that role's
    configuration reads; an unknown key is an error, not a silently ignored sweep."""
    from dataclasses import fields

    from hansa.core.config import EmbedderConfig, GatewayConfig, SiteConfig

    known = {f.name for f in fields({"site": SiteConfig, "gateway": GatewayConfig, "embedder": EmbedderConfig}[section])}
    out = {}
    for key, value in settings:
        if key not in known:
            raise HansaError(f"unknown [{section}] setting {key!r}: one of {', '.join(sorted(known))}")
        out[f"HANSA_{section.upper()}_{key.upper()}"] = value
    return out


def site_env(settings: Sequence[tuple[str, str]]) -> dict[str, str]:
    return setting_env("site", settings)


@dataclass
class Outcome:
    """One question asked through one strategy, as the gateway answered it."""

    strategy: str
    question: Question
    gold_sites: list[str]
    asked_sites: list[str]  # distinct sites called, in the order first called
    ranked_docs: list[str]
    answer: str
    abstained: bool
    confidence: float
    bytes: int
    gateway_ms: float
    e2e_ms: float
    failed_calls: int = 0  # sites that timed out or failed
    origin_kind: str = ""  # gated: "in" (origin holds gold) or "out" (it holds none)
    escalated: bool | None = None  # gated: did the gate send the question past its origin
    extractive_answer: str = ""  # the fused answer before synthesis (== answer without an LLM)
    synthesis: str = ""  # with an LLM: "llm" or "extractive" (which answer the gateway gave)
    llm_tokens: int = 0  # tokens synthesis spent
    site_calls: int = 0  # calls made (a refine round's follow-up asks a site again: more than asked_sites)
    router: str = ""  # the router the engine ranked sites with (the trace's router name)
    budget: dict[str, int] = field(default_factory=dict)  # the request's budget (empty: none given)
    short_answer: str = ""  # with a reader: its span in the answer's leading sentence
    used_docs: list[str] = field(default_factory=list)  # documents of the answer's sentences
    reader: str = ""  # the reader's name (empty: none)
    second_hop_rounds: int = 0  # follow-up rounds that asked a bridge entity (query.hops)
    reading_ms: float | None = None  # the gateway's reader time (None: no reader)


@dataclass
class FederationRun:
    n_sites: int
    outcomes: list[Outcome] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


QUESTION_SOURCES = ("all", "dev", "train")


def question_source(question: Question) -> str:
    """"dev", "train" (SQuAD's parts, from the question's `source`), or the dataset's own source."""
    source = question.source or ""
    if source.startswith("squad"):
        return "train" if "train" in source else "dev"
    return source.split("-")[0] or "unknown"


def choose_questions(ds: Dataset, split: str, limit: int, limit_unanswerable: int, source: str = "all") -> list[Question]:
    """The split's answerable questions (first `limit` in hash order) and unanswerable ones, of
    one question source (`source`: dev / train) or all."""
    if source not in QUESTION_SOURCES:
        raise InputError(f"question source {source!r} is not one of {', '.join(QUESTION_SOURCES)}")
    chosen = [q for q in select(ds.questions, split) if source == "all" or question_source(q) == source]
    answerable = sample([q for q in chosen if q.answerable], limit)
    unanswerable = [] if limit_unanswerable < 0 else sample([q for q in chosen if not q.answerable], limit_unanswerable)
    return answerable + unanswerable


# The other dataset's questions asked of a federation (out_of_scope_questions). MTRAG's Wikipedia
# domain (clapnq) is left out of those asked of SQuAD, whose sites hold Wikipedia too.
OUT_OF_SCOPE_FROM = {"squad": ("mtrag", ("fiqa", "govt", "cloud")), "mtrag": ("squad", ())}


def out_of_scope_questions(dataset: str, data: Path, split: str, n: int) -> list[Question]:
    """`n` answerable questions of the other dataset (its `split`, in hash order), as questions no
    site of this federation can answer: what a new user asks of an organization's documents that
    they do not cover. Unlike SQuAD 2.0's unanswerable questions (written against a paragraph the
    sites hold, one detail changed), these share little but common words with the sites' text,
    so a gateway that still answers them answers with filler. Looked for beside `data` (the folder
    that holds both datasets, as $HANSA_EVAL_DATA does)."""
    other, domains = OUT_OF_SCOPE_FROM[dataset]
    root = data.parent / other
    if not root.is_dir():
        raise InputError(f"--out-of-scope asks {other} questions of a {dataset} federation: {root} is missing "
                         f"(keep {other}/ beside {data.name}/, as in ../shared/datasets)")
    ds = load_dataset(other, root)
    pool = [q for q in select(ds.questions, split) if q.answerable and not q.conversation[1:]
            and (not domains or q.domain in domains) and (other != "squad" or question_source(q) == "dev")]
    return [Question(f"{OUT_OF_SCOPE_ID}{q.id}", q.text, kind=OUT_OF_SCOPE, source=f"{other}:{q.source or q.domain}")
            for q in sample(pool, n)]


def sample_documents(ds: Dataset, max_documents: int, source: str = "all") -> Dataset:
    """A smaller corpus that keeps sites realistic: `max_documents` whole documents (every passage,
    distractors included) chosen by a stable hash of `doc_id`, and only the answerable questions
    whose gold passages all stay (unanswerable ones are kept: they have no gold). With a question
    `source` (dev / train), every document those questions were written on is kept first (SQuAD's
    48 dev articles hold all of its unanswerable questions: without them an unanswerable question
    would be trivially unanswerable), then the hash sample fills up to `max_documents`."""
    from hansa.evaluation.datasets import stable_hash

    by_passage = {p.id: p.doc_id for p in ds.passages}
    written_on = ({by_passage[g] for q in ds.questions if question_source(q) == source for g in q.gold if g in by_passage}
                  if source != "all" else set())
    doc_ids = sorted({p.doc_id for p in ds.passages}, key=lambda d: stable_hash("hansa-eval-docs/v1", d))
    keep = set(sorted(written_on)) | set([d for d in doc_ids if d not in written_on][:max(0, max_documents - len(written_on))])
    passages = tuple(p for p in ds.passages if p.doc_id in keep)
    ids = {p.id for p in passages}
    questions = tuple(q for q in ds.questions if not q.answerable or (q.gold and set(q.gold) <= ids))
    return Dataset(ds.name, passages, questions, ds.caveat, ds.sharder, ds.federation_sizes)


def cap_passages(passages: Sequence[Passage], questions: Sequence[Question], per_domain: int) -> tuple[Passage, ...]:
    """At most `per_domain` passages per domain (SQuAD has one, ""): the questions' gold passages
    first, then the rest in their stable order, so every question keeps its evidence."""
    gold = {g for q in questions for g in q.gold}
    out: list[Passage] = []
    for domain in sorted({p.domain for p in passages}):
        mine = [p for p in passages if p.domain == domain]
        keep = [p for p in mine if p.id in gold]
        keep += [p for p in mine if p.id not in gold][: max(0, per_domain - len(keep))]
        out += sorted(keep, key=lambda p: p.id)
    return tuple(out)


def _gateway_overhead_ms(trace: dict[str, Any]) -> float:
    """Everything but waiting for sites: total minus calls where the trace has both, else the
    routing and fusion stages."""
    if "total_ms" in trace and "calls_ms" in trace:
        return max(0.0, float(trace["total_ms"]) - float(trace["calls_ms"]))
    return float(trace.get("routing_ms", 0.0)) + float(trace.get("fusion_ms", 0.0))


def outcome_of(strategy: str, q: Question, gold_sites: list[str], response: dict[str, Any], e2e_ms: float,
               origin_kind: str = "") -> Outcome:
    trace = response.get("trace", {})
    gate = trace.get("gate") if isinstance(trace.get("gate"), dict) else None
    docs: list[str] = []
    for c in response.get("citations", []):
        if c["doc_id"] not in docs:
            docs.append(c["doc_id"])
    synthesis = trace.get("synthesis") if isinstance(trace.get("synthesis"), dict) else {}
    return Outcome(
        strategy=strategy, question=q, gold_sites=gold_sites,
        asked_sites=list(dict.fromkeys(c["site_id"] for c in trace.get("per_site", []))),
        site_calls=len(trace.get("per_site", [])), ranked_docs=docs,
        answer=str(response.get("answer", "")), abstained=metrics.abstained(response),
        confidence=metrics.confidence(response),
        bytes=int(trace.get("bytes_in", 0)) + int(trace.get("bytes_out", 0)),
        gateway_ms=_gateway_overhead_ms(trace), e2e_ms=e2e_ms,
        failed_calls=sum(1 for c in trace.get("per_site", []) if c.get("status") != "ok"),
        origin_kind=origin_kind, escalated=None if gate is None else gate.get("decision") == "escalate",
        extractive_answer=str(response.get("extractive_answer", response.get("answer", ""))),
        synthesis=str(synthesis.get("answer", "")), llm_tokens=int((synthesis.get("tokens") or {}).get("total", 0)),
        router=str((trace.get("router") or {}).get("name", "")),
        budget=dict((trace.get("budget") or {}).get("given") or {}),
        short_answer=str(response.get("short_answer", "")),
        used_docs=[str(c["doc_id"]) for c in response.get("citations", []) if c.get("used")],
        reader=str((trace.get("reading") or {}).get("name", "")),
        second_hop_rounds=sum(1 for r in trace.get("rounds", []) if r.get("kind") == "second_hop"),
        reading_ms=(trace.get("reading") or {}).get("ms"),
    )


def policy_for(strategy: str, gateway: Any, router_model: Path | None = None) -> Any:
    """The QueryPolicy of an engine strategy: the same one `[gateway] strategy` serves
    (gateway.query.policy.named_policy), built against the federation's gateway."""
    from hansa.gateway.query.policy import named_policy

    if strategy not in ENGINE_STRATEGIES:
        raise InputError(f"not an engine strategy: {strategy!r}")
    return named_policy(strategy, gateway, router_model=router_model)


def ask(fed: Any, body: dict[str, Any], policy: Any = None) -> tuple[dict[str, Any], float]:
    """Ask the federation's Gateway service in-process (`body` as POST /v1/query takes it; `policy`
    None: the gateway's configured one, as HTTP clients get). The sites still answer over HTTP."""
    from hansa.gateway.query.request import QueryRequest

    t0 = time.perf_counter()
    result = fed.gateway_service.query(QueryRequest.from_json(body), EVAL_CLIENT, policy=policy)
    return {**result.to_json(), "extractive_answer": result.extractive_answer}, (time.perf_counter() - t0) * 1000


def other_site(q: Question, sites: Sequence[str], gold_sites: Sequence[str]) -> str | None:
    """An out-of-domain origin for `q`: a site holding none of its gold passages, chosen by a stable
    hash (MTRAG: preferably a site of another domain, as DGRAG's out-of-domain questions)."""
    from hansa.evaluation.datasets import stable_hash

    candidates = [s for s in sites if s not in gold_sites]
    domains = {g.split("-")[0] for g in gold_sites}
    other_domain = [s for s in candidates if s.split("-")[0] not in domains]
    pool = other_domain or candidates
    return min(pool, key=lambda s: stable_hash("hansa-eval-origin/v1", f"{q.id}/{s}")) if pool else None


def asked_body(q: Question, use_conversation: bool) -> dict[str, Any]:
    """What is asked for `q`: its text, with the earlier user turns as the conversation."""
    from hansa.gateway.query.request import MAX_CONVERSATION_TURNS

    earlier = q.conversation[:-1] if q.conversation and q.conversation[-1] == q.text else q.conversation
    if use_conversation and earlier:
        return {"question": q.text, "conversation": list(earlier[-MAX_CONVERSATION_TURNS:])}
    return {"question": q.text}


# Carried-word settings compared by `conversation_routing` (words, decay): choose on the fit split.
CONVERSATION_GRID = ((0, 0.5), (4, 0.5), (8, 0.5), (16, 0.5), (8, 1.0), (16, 1.0), (32, 1.0))


def routed_text(q: Question, carry_words: int, decay: float) -> str:
    """The text the gateway routes for `q` under a carried-word setting (gateway/query/request.py)."""
    from hansa.gateway.query.request import standalone_question

    body = asked_body(q, True)
    return standalone_question(q.text, body.get("conversation", ()), carry_words, decay)


def _conversation_routing(fed: Any, full: Any, embedder: Any, questions: Sequence[Question],
                          gold_sites: Sequence[Sequence[str]], top_m: int) -> dict[str, Any]:
    """Routing curves per way of asking a follow-up: the last turn alone, each carried-word setting,
    and every turn joined (the old `--conversation`), on the same questions and sites."""
    from hansa.evaluation.routers import routing_curves

    variants = {f"carry={w},decay={d}": [routed_text(q, w, d) for q in questions] for w, d in CONVERSATION_GRID}
    variants["last_turn"] = variants.pop(f"carry=0,decay={CONVERSATION_GRID[0][1]}")
    variants["all_turns_joined"] = [q.asked(True) for q in questions]
    out = {}
    for name, texts in variants.items():
        qvecs = embedder.embed_queries(texts)
        out[name] = routing_curves(fed, full, texts, qvecs, gold_sites, full.rank_many(qvecs), top_m)
    return out


def gateway_held_bytes(index: Any) -> dict[str, int]:
    """What the gateway keeps per site, by part: its summary vectors as int8 codes (`dim` bytes
    each, gateway.index.codes: in memory and in the durable Milvus copy), the site's term statistics,
    and the rest of its head as the durable store writes it (JSON: sequence, expiry, digests, per
    summary its version, sha256, level and richness); "total" is their sum."""
    from hansa.core.jsonsafe import dumps
    from hansa.gateway.index.codes import CODE_BYTES_PER_DIM
    from hansa.gateway.index.durable import HeadFile

    held = {"vectors": 0, "terms": 0, "head": 0}
    for site_id in index.sites():
        current = index.current(site_id)
        if current is None:
            continue
        held["vectors"] += len(current.rows) * index.space.dim * CODE_BYTES_PER_DIM
        head = HeadFile.of(current.stored()).to_json()
        whole = len(dumps(head))  # with the term statistics, base64 as the head keeps them
        held["terms"] += 0 if head["terms"] is None else len(dumps(head["terms"]))
        held["head"] += whole - (0 if head["terms"] is None else len(dumps(head["terms"])))
    return {**held, "total": sum(held.values())}


def _federation_meta(fed: Any, sites: dict[str, list[Passage]]) -> dict[str, Any]:
    infos = [h.info for h in fed.sites.values()]
    summaries = sum(int(i.get("published_summaries") or 0) for i in infos)
    dim = int(next(iter(fed.sites.values())).ctx.embedder.dim)
    raw = sum(len(p.text.encode("utf-8")) for ps in sites.values() for p in ps)
    published = sum(int(i.get("publication_bytes") or 0) for i in infos)
    held = gateway_held_bytes(fed.gateway_service.index)
    storage = held["total"]
    embedder = next(iter(fed.sites.values())).ctx.embedder
    return {
        "embedder": {"model_id": embedder.model_id, "model_sha256": embedder.model_sha256, "dim": dim},
        "sites": {s: len(ps) for s, ps in sites.items()},
        "passages_total": sum(len(ps) for ps in sites.values()),
        "chunks": sum(int(i.get("chunks") or 0) for i in infos),
        "setup_seconds": round(fed.setup_seconds, 1),
        "sites_built": sum(1 for i in infos if not i.get("cached")),
        "sites_reused": sum(1 for i in infos if i.get("cached")),
        "build_seconds_sum": round(sum(float(i.get("build_seconds") or 0.0) for i in infos), 1),
        "published_summaries": summaries,
        # what crossed from the sites to the gateway: the signed publications (base64 vectors, JSON)
        "publication_bytes": published,
        # what the gateway holds: int8 summary codes + each site's head (gateway_held_bytes)
        "gateway_storage_bytes": storage,
        "gateway_vector_bytes": held["vectors"],
        "gateway_head_bytes": held["head"],  # the heads without their term statistics
        "gateway_terms_bytes": sum(t.stored_bytes() for t in fed.gateway_service.index.term_sketches(sites).values()),
        "published_terms": sum(len(t) for t in fed.gateway_service.index.term_sketches(sites).values()),
        "raw_corpus_bytes": raw,
        "gateway_storage_share_of_raw": round(storage / raw, 4) if raw else None,
        "publication_share_of_raw": round(published / raw, 4) if raw else None,
    }


def run_federation(ds: Dataset, passages: tuple[Passage, ...], questions: Sequence[Question], n_sites: int,
                   settings: EvalSettings, root: Path, cache: Any, progress: Progress) -> FederationRun:
    from hansa.evaluation.routers import FullInformationRouter, routing_curves, routing_selection
    from hansa.federation.local import LocalFederation

    subset = Dataset(ds.name, passages, ds.questions, ds.caveat, ds.sharder, ds.federation_sizes)
    sites = subset.sites(n_sites)
    site_of = {p.id: s for s, ps in sites.items() for p in ps}
    docs = {s: [p.as_document() for p in ps] for s, ps in sites.items()}
    central = n_sites == 1
    strategies = ["centralized"] if central else [s for s in settings.strategies if s != "centralized"]
    # The gateway's embedding memo off: each question is asked once per strategy, and with the memo
    # only the first strategy asked would pay for embedding the question and the sentences fusion
    # measures, so gateway_overhead_ms would rank strategies by the order they are asked in.
    gateway_env = {"HANSA_GATEWAY_SITE_TIMEOUT_S": str(settings.site_timeout_s),
                   "HANSA_GATEWAY_EMBEDDING_MEMO_ENTRIES": "0",
                   **setting_env("gateway", settings.gateway_settings),
                   **setting_env("embedder", settings.embedder_settings)}
    if settings.top_k_sites:
        gateway_env["HANSA_GATEWAY_TOP_K_SITES"] = str(settings.top_k_sites)
    if settings.calibration is not None:
        gateway_env["HANSA_GATEWAY_CALIBRATION_FILE"] = str(Path(settings.calibration).resolve())
    run = FederationRun(n_sites)
    llm = None
    if settings.llm_base_url and not settings.routing_only:
        from hansa.adapters.llm.openai_compat import OpenAICompatibleLLM

        llm = OpenAICompatibleLLM(settings.llm_base_url, model=settings.llm_model, api_key=settings.llm_api_key,
                                  timeout_s=settings.site_timeout_s, max_retries=0)
    shared: list[Any] = []
    transport = None
    if settings.share_site_calls:
        from hansa.evaluation.shared_calls import SharedSiteCalls
        from hansa.gateway.transport import HttpSiteTransport

        def transport(identity: Any, cfg: Any) -> Any:
            shared.append(SharedSiteCalls(HttpSiteTransport(identity, cfg.allow_private_addresses)))
            return shared[-1]
    with LocalFederation(root / f"fed{n_sites}", docs, progress=progress, gateway_env=gateway_env,
                         site_env={**site_env(settings.site_settings), **setting_env("embedder", settings.embedder_settings)},
                         site_cache=cache, llm=llm,
                         gateway_transport=transport) as fed:
        run.meta = _federation_meta(fed, sites)
        progress(f"fed{n_sites}: ready in {run.meta['setup_seconds']} s "
                 f"({run.meta['sites_built']} sites built, {run.meta['sites_reused']} reused)")
        gw = fed.gateway_config.gateway
        bodies = [asked_body(q, settings.conversation) for q in questions]
        # what the gateway routes: the standalone question under the configured carried words
        texts = [routed_text(q, gw.conversation_carry_words, gw.conversation_decay) if settings.conversation
                 else q.text for q in questions]
        gold_sites = [sorted({site_of[g] for g in q.gold if g in site_of}) for q in questions]
        plans: list[dict[str, dict[str, Any]]] = [{} for _ in questions]
        if not central:
            t0 = time.perf_counter()
            embedder = next(iter(fed.sites.values())).ctx.embedder
            qvecs = embedder.embed_queries(texts)
            full = FullInformationRouter(fed)
            full_ranked = full.rank_many(qvecs)
            run.meta["routing_gold_site_recall_at_k"] = routing_curves(
                fed, full, texts, qvecs, gold_sites, full_ranked, gw.top_m_summaries)
            if settings.conversation:
                run.meta["conversation_routing"] = _conversation_routing(
                    fed, full, embedder, questions, gold_sites, gw.top_m_summaries)
                run.meta["conversation_setting"] = {"carry_words": gw.conversation_carry_words,
                                                    "decay": gw.conversation_decay}
            top_k = settings.top_k_sites or gw.top_k_sites
            run.meta["routing_selection"] = routing_selection(fed, texts, qvecs, gold_sites, gw.top_m_summaries, top_k)
            run.meta["routing_curves_seconds"] = round(time.perf_counter() - t0, 1)
            for plan, body, gold, ranked in zip(plans, bodies, gold_sites, full_ranked):
                floor = ranked[0][1] - gw.site_margin  # hansa's selection rule over the full ranking
                plan.update({
                    "hansa": body,
                    "exhaustive": {**body, "sites": sorted(fed.sites)},
                    # DGRAG's m = k = 1: one site, so no second hop either (a budget of one site)
                    "top1": {**body, "top_k_sites": 1, "budget": {**body.get("budget", {}), "sites": 1}},
                    "full_information": {**body, "sites": [s for s, sc in ranked[:top_k] if sc >= floor]},
                })
                if gold:
                    plan["oracle"] = {**body, "sites": gold}
        else:
            for plan, body in zip(plans, bodies):
                plan["centralized"] = {**body, "sites": ["central"]}
        rows: list[Any] = []
        collect = settings.calibration_rows is not None and not central
        if collect:  # tiers and router rows call no site, so --routing-only collects them too
            from hansa.evaluation.calibration import collect_routing_rows

            rows.extend(collect_routing_rows(fed.gateway_service, questions, texts, gold_sites))
        if settings.routing_only:
            if collect:
                _write_rows(settings, run, rows, progress)
            return run

        engine = {s: policy_for(s, fed.gateway_service, settings.router_model) for s in strategies
                  if s in ENGINE_STRATEGIES}
        budgeted = budget_strategies(settings.budgets) if not central else {}
        engine.update({name: policy_for("refine", fed.gateway_service) for name in budgeted})
        site_ids = sorted(fed.sites)

        def ask_engine(i: int, strategy: str) -> list[Outcome]:
            q, gold, body = questions[i], gold_sites[i], bodies[i]
            if strategy in budgeted:
                body = {**body, "budget": budgeted[strategy]}
            if strategy != "gated":
                return [outcome_of(strategy, q, gold, *ask(fed, body, engine[strategy]))]
            origins = [("in", gold[0])] if gold else []
            ood = other_site(q, site_ids, gold)
            if ood is not None:  # an unanswerable question has no domain: its asks count for abstention
                origins.append(("out" if q.answerable else "", ood))
            return [outcome_of(strategy, q, gold, *ask(fed, {**body, "origin": origin}, engine[strategy]),
                               origin_kind=kind) for kind, origin in origins]

        def ask_all(i: int) -> list[Outcome]:
            out = [outcome_of(s, questions[i], gold_sites[i], *ask(fed, plans[i][s]))
                   for s in strategies if s in plans[i]]
            if not central:
                for s in [*strategies, *budgeted]:
                    if s in engine:
                        out += ask_engine(i, s)
            if collect:
                from hansa.evaluation.calibration import collect_rows

                q, gold = questions[i], gold_sites[i]
                rows.extend(collect_rows(fed.gateway_service, q, texts[i], gold, other_site(q, site_ids, gold),
                                         **({"kinds": settings.calibration_kinds} if settings.calibration_kinds else {})))
            return out

        t0 = time.perf_counter()
        done = 0
        with ThreadPoolExecutor(max_workers=max(1, settings.workers)) as pool:
            for result in pool.map(ask_all, range(len(questions))):
                run.outcomes.extend(result)
                done += 1
                if done % 50 == 0:
                    progress(f"fed{n_sites}: {done}/{len(questions)} questions")
        wall = time.perf_counter() - t0
        run.meta["ask_seconds"] = round(wall, 1)
        if shared:
            run.meta["site_calls"] = {"asked": shared[0].asked, "replayed": shared[0].replayed}
        run.meta["questions_per_second"] = round(len(questions) / wall, 3) if wall else None
        if collect:
            _write_rows(settings, run, rows, progress)
    return run


def _write_rows(settings: EvalSettings, run: FederationRun, rows: Sequence[Any], progress: Progress) -> None:
    from hansa.gateway.query.calibrate import write_rows

    assert settings.calibration_rows is not None
    target = rows_path(settings.calibration_rows, run.n_sites)
    write_rows(target, sorted(rows, key=lambda r: (r.model, r.example.question_id, r.origin, r.step, r.site)))
    run.meta["calibration_rows"] = {"path": str(target), "rows": len(rows)}
    progress(f"fed{run.n_sites}: {len(rows)} calibration rows written to {target}")


def rows_path(path: Path, n_sites: int) -> Path:
    """Where one federation's calibration rows go: `rows.jsonl` -> `rows_fed16.jsonl`."""
    return path.with_name(f"{path.stem}_fed{n_sites}{path.suffix}")


def run(settings: EvalSettings, progress: Progress = lambda m: None) -> dict[str, Any]:
    """Every federation of `settings`, then the centralized site; returns runs and inputs."""
    unknown = set(settings.strategies) - set(STRATEGIES) - set(ENGINE_STRATEGIES)
    if unknown or not settings.strategies:
        raise InputError(f"unknown strategies {sorted(unknown)}; choose from {', '.join(STRATEGIES + ENGINE_STRATEGIES)}")
    budget_strategies(settings.budgets)  # a bad budget point fails here, before any site is built
    ds = load_dataset(settings.dataset, settings.data)
    if settings.max_documents:
        ds = sample_documents(ds, settings.max_documents, settings.question_source)
    if settings.calibration_rows is not None and settings.split != "fit":
        raise InputError("calibration rows are collected on the fit split only (--split fit): "
                         "a gate fit on report questions would be reported on what it was fit on")
    if settings.calibration_kinds:
        from hansa.evaluation.calibration import ROW_KINDS

        if settings.calibration_rows is None or not set(settings.calibration_kinds) <= set(ROW_KINDS):
            raise InputError(f"--calibration-kinds names kinds of --calibration-rows, each one of {', '.join(ROW_KINDS)}")
    if settings.calibration is not None:
        from hansa.gateway.query.calibration import read_calibration

        read_calibration(Path(settings.calibration))  # the gateway would fall back to defaults, unmeasured
    if settings.router_model is not None:
        from hansa.gateway.query.learned.model import load_model

        if load_model(Path(settings.router_model)) is None:  # the router would fall back, unmeasured
            raise InputError(f"router model {settings.router_model} is unusable (missing, corrupt or trained on "
                             "other features; the log says which): the learned strategy would measure summary matching")
    questions = choose_questions(ds, settings.split, settings.limit, settings.limit_unanswerable, settings.question_source)
    if settings.out_of_scope > 0:
        questions += out_of_scope_questions(settings.dataset, settings.data, settings.split, settings.out_of_scope)
    if not questions:
        raise InputError(f"no {settings.split} questions selected")
    passages = cap_passages(ds.passages, questions, settings.max_passages) if settings.max_passages else ds.passages
    progress(f"{ds.name}: {len(passages)} passages, {len(questions)} {settings.split} questions "
             f"({sum(q.answerable for q in questions)} answerable), strategies {list(settings.strategies)}")
    sizes = [n for n in settings.federations if n > 1]
    if "centralized" in settings.strategies:
        sizes.append(1)
    runs: list[FederationRun] = []
    with ExitStack() as stack:
        root = settings.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hansa-eval-")))
        cache = None
        if settings.cache is not None:
            from hansa.evaluation.sitecache import SiteCache

            cache = SiteCache(settings.cache)
            stack.callback(cache.close)
        for n in sizes:
            runs.append(run_federation(ds, passages, questions, n, settings, root, cache, progress))
    return {"dataset": ds, "questions": questions, "passages": passages, "runs": runs}
