"""The per-question cost, before and after the hot-path changes, side by side in one run.

What a question costs besides waiting: the gateway's own time (`gateway_overhead_ms` of the trace:
everything but waiting for sites; target p50 <= 5 ms on this machine) and a site's retrieval time
per call. Three arms, their order rotated question by question so all see the same load:
- `before`: sites embed their ~40 candidate sentences per request (their stored sentence vectors
  hidden, as on a site ingested before plugin/sentence_vectors.py), and fusion measures every
  fused sentence (fusion.EAGER_BELOW raised above any candidate count), after the calls;
- `after_late`: stored sentence vectors, and fusion verifying only what it uses
  (gateway/query/fusion.py), still measured after the calls;
- `after`: the gateway as it ships: as `after_late`, and an answer that arrives while slower sites
  are awaited has its sentences measured then (gateway.query.fusion.measure_early).
The gateway's LRU (gateway.embedding_memo_entries) is cleared before every question of either arm, so
each question is asked cold; `after_repeat` asks the same question again (an LRU hit).

Data: MTRAG, `--per-domain` passages per domain (the questions' gold passages first: the evaluation's
cap_passages) on `--sites` sites (the evaluation's sharding), report-split questions. The federation
is the one `hansa eval` builds (federation/local.py LocalFederation, sites over loopback HTTP); queries
go to the Gateway service in-process, routed (`routed`) and to every site (`all_sites`, the most
sentences to fuse). Site retrieval is also timed alone (`retrieve()` on each site per question),
and both arms' chosen sentences are compared.

    python scripts/bench_query.py [--smoke] [--out benchmarks/query.json] [--per-domain 30] [--questions 30]
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402  (scripts/ is not a package)
from benchlib import progress  # noqa: E402

TARGET_OVERHEAD_P50_MS = 5.0
ARMS = ("before", "after_late", "after")
MODES = ("routed", "all_sites")


def p50_p95(samples_ms: Sequence[float]) -> dict[str, float | int]:
    ms = np.asarray(samples_ms, dtype=np.float64)
    p50, p95 = np.percentile(ms, [50, 95])
    return {"n": int(ms.size), "p50_ms": round(float(p50), 3), "p95_ms": round(float(p95), 3),
            "mean_ms": round(float(ms.mean()), 3)}


class HiddenSentences:
    """The site's vector store with its stored sentence vectors hidden: a site as it was before
    they existed (retrieval embeds its candidates per request). Delegates everything else."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def get(self, collection: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        from hansa.core.errors import NotFoundError
        from hansa.plugin.site import SENTENCES

        if collection == SENTENCES:
            raise NotFoundError("hidden: the `before` arm embeds candidate sentences per request")
        return self.inner.get(collection, ids)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Arms:
    """Switches the whole federation between the arms."""

    def __init__(self, fed: Any) -> None:
        from hansa.gateway.query import fusion

        self.fusion = fusion
        self.eager_below = fusion.EAGER_BELOW
        self.engine = fed.gateway_service.engine
        self.early = self.engine.early_measure
        self.sites = {s: h.ctx for s, h in fed.sites.items()}
        self.stores = {s: ctx.vectors for s, ctx in self.sites.items()}
        self.hidden = {s: HiddenSentences(store) for s, store in self.stores.items()}

    def use(self, arm: str) -> None:
        before = arm == "before"
        self.fusion.EAGER_BELOW = sys.maxsize if before else self.eager_below
        self.engine.early_measure = self.early if arm == "after" else None
        for site_id, ctx in self.sites.items():
            ctx.vectors = self.hidden[site_id] if before else self.stores[site_id]

    def restore(self) -> None:
        self.use("after")


def federation_inputs(per_domain: int, n_questions: int, n_sites: int) -> tuple[dict[str, list[dict[str, str]]], list[str]]:
    from hansa.evaluation.datasets import Dataset
    from hansa.evaluation.mtrag import load_dataset
    from hansa.evaluation.runner import cap_passages, choose_questions

    ds = load_dataset(benchlib.mtrag_dir())
    questions = choose_questions(ds, "report", n_questions, -1)  # answerable ones only
    passages = cap_passages(ds.passages, questions, per_domain)
    sites = Dataset(ds.name, passages, ds.questions, ds.caveat, ds.sharder, ds.federation_sizes).sites(n_sites)
    return {s: [p.as_document() for p in ps] for s, ps in sites.items()}, [q.text for q in questions]


def ask(fed: Any, question: str, mode: str) -> dict[str, Any]:
    from hansa.gateway.query.request import QueryRequest

    body: dict[str, Any] = {"question": question}
    if mode == "all_sites":
        body["sites"] = sorted(fed.sites)
    result = fed.gateway_service.query(QueryRequest.from_json(body), "bench")
    t = result.trace
    return {"overhead": t.gateway_overhead_ms, "fusion": t.fusion_ms, "routing": t.routing_ms,
            "measured": t.fusion_measured, "calls": [round(c.latency_ms, 1) for c in t.per_site],
            "answer": result.answer, "sentences": [x.text for x in result.fused.sentences]}


def gateway_section(fed: Any, arms: Arms, questions: Sequence[str]) -> dict[str, Any]:
    memo = fed.gateway_service.embedder
    out: dict[str, Any] = {}
    for mode in MODES:
        rows: dict[str, list[dict[str, Any]]] = {arm: [] for arm in (*ARMS, "after_repeat")}
        same = same_sentences = same_early = 0
        for i, q in enumerate(questions):
            got: dict[str, dict[str, Any]] = {}
            for arm in ARMS[i % len(ARMS):] + ARMS[:i % len(ARMS)]:  # rotate which arm goes first
                arms.use(arm)
                memo.clear()
                got[arm] = ask(fed, q, mode)
                rows[arm].append(got[arm])
            rows["after_repeat"].append(ask(fed, q, mode))  # still the `after` arm: the LRU answers
            same += got["before"]["answer"] == got["after"]["answer"]  # sentences, [n] markers and notes
            same_sentences += got["before"]["sentences"] == got["after"]["sentences"]
            same_early += got["after_late"]["answer"] == got["after"]["answer"]
        out[mode] = {
            arm: {
                "gateway_overhead": p50_p95([r["overhead"] for r in rs]),
                "fusion": p50_p95([r["fusion"] for r in rs]),
                "routing_incl_question_embedding": p50_p95([r["routing"] for r in rs]),
                "sentences_measured_mean": round(float(np.mean([r["measured"] for r in rs])), 2),
                "site_call_latency": p50_p95([c for r in rs for c in r["calls"]] or [0.0]),
            }
            for arm, rs in rows.items()
        }
        out[mode]["same_answer_share"] = round(same / len(questions), 4)
        out[mode]["same_sentences_share"] = round(same_sentences / len(questions), 4)
        out[mode]["same_answer_share_after_late_vs_after"] = round(same_early / len(questions), 4)
    return out


def site_section(arms: Arms, questions: Sequence[str]) -> dict[str, Any]:
    from hansa.plugin.retrieval import retrieve
    from hansa.sync.wire import RetrieveRequest

    site_arms = ("before", "after")  # the gateway's measuring does not change what a site does
    times: dict[str, list[float]] = {arm: [] for arm in site_arms}
    same = total = 0
    for i, q in enumerate(questions):
        for site_id, ctx in arms.sites.items():
            picked: dict[str, Any] = {}
            for arm in (site_arms if i % 2 == 0 else site_arms[::-1]):
                arms.use(arm)
                start = time.perf_counter()
                answer = retrieve(ctx, RetrieveRequest(question=q, top_k=5))
                times[arm].append((time.perf_counter() - start) * 1000)
                picked[arm] = [s[:2] for s in answer.sentences]
            total += 1
            same += picked["before"] == picked["after"]
    return {**{arm: p50_p95(ms) for arm, ms in times.items()},
            "calls": total, "same_sentences_share": round(same / total, 4)}


def main(argv: list[str] | None = None) -> int:
    p = benchlib.parser("query", __doc__.splitlines()[0])
    p.add_argument("--per-domain", type=int, default=30, help="MTRAG passages per domain (gold first)")
    p.add_argument("--questions", type=int, default=30, help="report-split questions asked")
    p.add_argument("--sites", type=int, default=4)
    args = benchlib.parse(p, argv)
    if args.smoke:
        args.per_domain, args.questions = 6, 3
    report = benchlib.Report("query", args.smoke, libraries=("onnxruntime", "pymilvus", "milvus-lite"))
    report.params.update({"per_domain": args.per_domain, "questions": args.questions, "sites": args.sites,
                          "arms": list(ARMS), "modes": list(MODES)})
    from hansa.federation.local import LocalFederation

    docs, questions = federation_inputs(args.per_domain, args.questions, args.sites)
    report.params["passages"] = sum(len(d) for d in docs.values())
    with tempfile.TemporaryDirectory(prefix="bench-query-") as work:
        started = time.perf_counter()
        # No site call may time out: a timed-out call keeps computing in the background and would
        # slow the next question's gateway work (and change which sites answered).
        with LocalFederation(Path(work), docs, progress=progress, gateway_env={"HANSA_GATEWAY_SITE_TIMEOUT_S": "300"}) as fed:
            report.results["build_seconds"] = round(time.perf_counter() - started, 1)
            arms = Arms(fed)
            try:
                progress(f"{len(questions)} questions x {len(MODES)} modes x {len(ARMS)} arms")
                report.results["gateway"] = gateway_section(fed, arms, questions)
                progress("site retrieval alone")
                report.results["site_retrieval"] = site_section(arms, questions)
            finally:
                arms.restore()
    import os

    report.results["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    gw, site = report.results["gateway"], report.results["site_retrieval"]
    for mode in MODES:
        report.ratios[f"gateway_overhead_p50_before_over_after_{mode}"] = benchlib.ratio(
            gw[mode]["before"]["gateway_overhead"]["p50_ms"], gw[mode]["after"]["gateway_overhead"]["p50_ms"])
    for mode in MODES:
        report.ratios[f"gateway_overhead_p50_after_late_over_after_{mode}"] = benchlib.ratio(
            gw[mode]["after_late"]["gateway_overhead"]["p50_ms"], gw[mode]["after"]["gateway_overhead"]["p50_ms"])
    report.ratios["site_retrieval_p50_before_over_after"] = benchlib.ratio(site["before"]["p50_ms"], site["after"]["p50_ms"])
    for mode in MODES:
        observed = gw[mode]["after"]["gateway_overhead"]["p50_ms"]
        report.target(f"gateway_overhead_p50_ms_{mode}", f"<= {TARGET_OVERHEAD_P50_MS} ms (cold question)",
                      observed, observed <= TARGET_OVERHEAD_P50_MS)
    report.note("Each question is asked cold (the gateway's LRU cleared); after_repeat is the same question again.")
    report.note("Times are wall clock on a shared 2-core machine: compare the arms (alternated per question), "
                "and read machine.load_average_at_start / results.load_average_at_end.")
    report.emit(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
