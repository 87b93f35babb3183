"""From outcomes to the report: one record per (dataset, federation, strategy, split), the JSON
document, a Markdown table and two PNGs (evidence recall vs sites called; routing curves).

Which questions each figure is over (so no number mixes populations):
- routing and evidence (gold-site recall, all gold sites called, evidence recall@10, MRR) and
  answer quality: answerable questions with gold passages (SQuAD short answers; MTRAG-UN reference
  responses where a question has them);
- `abstain_unanswerable`: unanswerable (and MTRAG-UN underspecified) questions;
  `answered_answerable`: answerable ones;
- `abstain_out_of_scope`: questions of the other dataset (`hansa eval --out-of-scope N`), which no
  site holds; they count in no other figure, so a record with them compares with one without;
- cost and latency: every question asked.
`answer_f1` scores the reader's span (`short_answer`) where the gateway has a reader, else the
whole answer; `offtopic_sentence_share` is the share of a non-abstaining answer's sentences from
neither a gold passage nor its article (evaluation.metrics.offtopic_share).
A figure with no question to stand on is null, never 0.

With an LLM (`hansa eval --llm`), `answer_*` score the answer the gateway gave (synthesized when the
check kept a sentence) and `extractive_answer_*` the fused extractive answer of the same query, on
the same questions; `answers_per_question` in the JSON holds both answers' scores per question.
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from hansa.evaluation import metrics
from hansa.evaluation.datasets import OUT_OF_SCOPE
from hansa.evaluation.runner import FederationRun, Outcome, question_source
from hansa.core.logs import get_logger

log = get_logger(__name__)

RECORD_COLUMNS = (
    "federation_sites", "strategy", "questions", "gold_site_recall", "all_gold_sites_called", "all_gold_sites_called_spanning",
    "evidence_recall_at_10", "mrr", "answer_contains", "answer_f1", "answer_rouge_l", "abstain_unanswerable", "answered_answerable",
    "abstain_out_of_scope", "offtopic_sentence_share", "sites_called_per_query", "bytes_per_query", "gateway_overhead_ms_p50", "latency_ms_p50", "latency_ms_p95",
)


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return round(statistics.fmean(values), 4) if values else None


def _pct(values: Sequence[float], q: float) -> float | None:
    return round(float(np.percentile(np.asarray(values, dtype=float), q)), 2) if values else None


def correct(o: Outcome) -> bool:
    """Right for selective answering: answered, answerable, and (SQuAD) containing a reference answer
    or (no short answers: MTRAG) citing a gold passage."""
    q = o.question
    if o.abstained or not q.answerable:
        return False
    if q.answers:
        return bool(metrics.contains_answer(metrics.answer_text(o.answer), q.answers))
    return bool(set(q.gold) & set(o.ranked_docs))


def answer_scores(answer: str, q: Any) -> dict[str, float | None]:
    """Token F1, contains-answer and ROUGE-L of one answer (None where the question has no reference
    of that kind: SQuAD has short answers, MTRAG-UN reference responses)."""
    text = metrics.answer_text(answer)
    refs = q.answers or q.references
    return {"f1": metrics.token_f1(text, refs) if refs else None,
            "contains": metrics.contains_answer(text, q.answers) if q.answers else None,
            "rouge_l": metrics.rouge_l(text, q.references) if q.references else None}


def _rounded(scores: dict[str, float | None]) -> dict[str, float | None]:
    return {k: None if v is None else round(v, 4) for k, v in scores.items()}


def llm_fields(answerable: Sequence[Outcome], outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """The extractive answers' quality beside the written ones, and what synthesis cost (LLM runs)."""
    if not any(o.synthesis for o in outcomes):
        return {}
    scored = [answer_scores(o.extractive_answer, o.question) for o in answerable]
    answered = [o for o in outcomes if o.synthesis]
    return {
        "extractive_answer_f1": _mean(x["f1"] for x in scored if x["f1"] is not None),
        "extractive_answer_contains": _mean(x["contains"] for x in scored if x["contains"] is not None),
        "extractive_answer_rouge_l": _mean(x["rouge_l"] for x in scored if x["rouge_l"] is not None),
        "llm_answer_share": _mean(float(o.synthesis == "llm") for o in answered),
        "llm_tokens_per_query": _mean(float(o.llm_tokens) for o in answered),
    }


def answers_per_question(runs: Sequence[FederationRun]) -> list[dict[str, Any]]:
    """Both answers' scores for every answerable question asked with an LLM."""
    return [{"federation_sites": run.n_sites, "strategy": o.strategy, "question_id": o.question.id,
             "origin_kind": o.origin_kind, "synthesis": o.synthesis, "llm_tokens": o.llm_tokens,
             "answer": _rounded(answer_scores(o.answer, o.question)),
             "extractive": _rounded(answer_scores(o.extractive_answer, o.question))}
            for run in runs for o in run.outcomes if o.synthesis and o.question.answerable and o.question.gold]


def summarize(dataset: str, split: str, n_sites: int, outcomes: Sequence[Outcome], passages_total: int) -> dict[str, Any]:
    """One record. With an origin (gated), answer quality and routing are read from the in-domain
    asks; the out-of-domain asks only give escalation_out_of_domain."""
    gate_in = [o for o in outcomes if o.origin_kind == "in"]
    gate_out = [o for o in outcomes if o.origin_kind == "out"]
    escalation_in = _mean(float(bool(o.escalated)) for o in gate_in)
    escalation_out = _mean(float(bool(o.escalated)) for o in gate_out)
    if gate_out:
        outcomes = [o for o in outcomes if o.origin_kind != "out"] or list(gate_out)
    out_of_scope = [o for o in outcomes if o.question.kind == OUT_OF_SCOPE]
    outcomes = [o for o in outcomes if o.question.kind != OUT_OF_SCOPE] or out_of_scope
    answerable = [o for o in outcomes if o.question.answerable and o.question.gold]
    unanswerable = [o for o in outcomes if not o.question.answerable]
    spanning = [o for o in answerable if len(o.gold_sites) > 1]  # the question's evidence lies at several sites
    short = [o for o in answerable if o.question.answers]
    long_ref = [o for o in answerable if o.question.references]
    text = {id(o): metrics.answer_text(o.answer) for o in short + long_ref}
    # Against short references, F1 of what answers: the reader's span where there is one (a 4-sentence
    # answer is not a short answer); against reference responses (MTRAG), the whole answer.
    brief = {id(o): (o.short_answer if o.question.answers else "") or text[id(o)] for o in short + long_ref}
    rc = metrics.risk_coverage([0.0 if o.abstained else o.confidence for o in outcomes], [correct(o) for o in outcomes])
    return {
        "dataset": dataset,
        "federation_sites": n_sites,
        "strategy": outcomes[0].strategy,
        "split": split,
        "questions": len(outcomes),
        "answerable_questions": len([o for o in outcomes if o.question.answerable]),
        "unanswerable_questions": len(unanswerable),
        "passages_total": passages_total,
        "gold_site_recall": _mean(metrics.gold_site_recall(o.asked_sites, o.gold_sites) for o in answerable),
        "all_gold_sites_called": _mean(metrics.all_gold_sites_called(o.asked_sites, o.gold_sites) for o in answerable),
        # the gate's third target: every gold site asked where the evidence spans sites
        "spanning_questions": len(spanning),
        "all_gold_sites_called_spanning": _mean(metrics.all_gold_sites_called(o.asked_sites, o.gold_sites) for o in spanning),
        "evidence_recall_at_10": _mean(metrics.evidence_recall_at(o.ranked_docs, o.question.gold, 10) for o in answerable),
        "mrr": _mean(metrics.reciprocal_rank(o.ranked_docs, o.question.gold) for o in answerable),
        "answer_contains": _mean(metrics.contains_answer(text[id(o)], o.question.answers) for o in short),
        "answer_em": _mean(metrics.exact_match(brief[id(o)], o.question.answers) for o in short),
        "answer_f1": _mean([metrics.token_f1(brief[id(o)], o.question.answers) for o in short]
                           or [metrics.token_f1(brief[id(o)], o.question.references) for o in long_ref]),
        "offtopic_sentence_share": _mean(metrics.offtopic_share(o.used_docs, o.question.gold)
                                         for o in answerable if not o.abstained and o.used_docs),
        "reader": outcomes[0].reader or None,
        "second_hop_rounds": _mean(float(o.second_hop_rounds) for o in outcomes),
        "reading_ms_p50": _pct([o.reading_ms for o in outcomes if o.reading_ms is not None], 50),
        "reading_ms_p95": _pct([o.reading_ms for o in outcomes if o.reading_ms is not None], 95),
        "answer_rouge_l": _mean(metrics.rouge_l(text[id(o)], o.question.references) for o in long_ref),
        "answer_words_mean": _mean(len(metrics.answer_text(o.answer).split()) for o in outcomes if not o.abstained),
        "abstain_unanswerable": _mean(float(o.abstained) for o in unanswerable),
        "out_of_scope_questions": len(out_of_scope),
        "abstain_out_of_scope": _mean(float(o.abstained) for o in out_of_scope),
        "answered_answerable": _mean(float(not o.abstained) for o in outcomes if o.question.answerable),
        "abstention_auroc": metrics.auroc([0.0 if o.abstained else o.confidence for o in outcomes],
                                          [o.question.answerable for o in outcomes]),
        "risk_coverage": rc,
        "sites_called_per_query": round(statistics.fmean(len(o.asked_sites) for o in outcomes), 3),  # distinct
        # calls, a site asked again (a refine round's follow-up) counted again: what the sites served
        "site_calls_per_query": round(statistics.fmean(max(o.site_calls, len(o.asked_sites)) for o in outcomes), 3),
        # the routing target's denominator (answerable questions), and what "no answer here" costs
        "sites_called_per_answerable": _mean(float(len(o.asked_sites)) for o in answerable),
        "sites_called_per_unanswerable": _mean(float(len(o.asked_sites)) for o in unanswerable),
        "bytes_per_query": round(statistics.fmean(o.bytes for o in outcomes), 1),
        "failed_site_calls_per_query": round(statistics.fmean(o.failed_calls for o in outcomes), 3),
        "gateway_overhead_ms_p50": _pct([o.gateway_ms for o in outcomes], 50),
        "gateway_overhead_ms_p95": _pct([o.gateway_ms for o in outcomes], 95),
        "latency_ms_p50": _pct([o.e2e_ms for o in outcomes], 50),
        "latency_ms_p95": _pct([o.e2e_ms for o in outcomes], 95),
        "latency_ms_mean": round(statistics.fmean(o.e2e_ms for o in outcomes), 1),
        "escalation_in_domain": escalation_in,
        "escalation_out_of_domain": escalation_out,
        # in-domain asks split by where the evidence lies: at the origin alone (DGRAG's setting, where
        # escalating is a cost) or at several sites (where not escalating leaves evidence unasked)
        "escalation_in_domain_one_site": _mean(float(bool(o.escalated)) for o in gate_in if len(o.gold_sites) == 1),
        "escalation_in_domain_spanning": _mean(float(bool(o.escalated)) for o in gate_in if len(o.gold_sites) > 1),
        "router": outcomes[0].router or None,
        "budget": outcomes[0].budget or None,
        **llm_fields(answerable, outcomes),
    }


def records_of(dataset: str, split: str, runs: Sequence[FederationRun]) -> list[dict[str, Any]]:
    out = []
    for run in runs:
        by_strategy: dict[str, list[Outcome]] = {}
        for o in run.outcomes:
            by_strategy.setdefault(o.strategy, []).append(o)
        for outcomes in by_strategy.values():
            record = summarize(dataset, split, run.n_sites, outcomes, run.meta["passages_total"])
            for key in ("gateway_storage_bytes", "publication_bytes", "raw_corpus_bytes", "gateway_storage_share_of_raw",
                        "embedder"):
                record[key] = run.meta.get(key)
            record["question_source"] = "+".join(sorted({question_source(o.question) for o in outcomes}))
            out.append(record)
    return out


# What a budget curve shows of each point: cost, then quality.
CURVE_FIELDS = ("sites_called_per_query", "site_calls_per_query", "bytes_per_query", "latency_ms_p50", "gold_site_recall",
                "all_gold_sites_called", "all_gold_sites_called_spanning", "evidence_recall_at_10", "answer_f1")


def budget_curve(records: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """SCOUT-RAG's quality against budget: per federation and budget key, the refine strategy's
    records under each budget point (`hansa eval --budget`), cheapest first, then refine without
    a budget (the curve's end: what refinement spends when nothing stops it but quality or gain)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for n in sorted({r["federation_sites"] for r in records}):
        mine = [r for r in records if r["federation_sites"] == n]
        unbounded = [r for r in mine if r["strategy"] == "refine"]
        for key in sorted({k for r in mine if r["strategy"].startswith("refine[") for k in r["budget"] or {}}):
            points = sorted((r for r in mine if r["strategy"].startswith("refine[") and key in (r["budget"] or {})),
                            key=lambda r: r["budget"][key])
            out[f"fed{n}:{key}"] = [{"budget": r["budget"], **{f: r.get(f) for f in CURVE_FIELDS}}
                                    for r in points + unbounded]
    return out


def plot_budget_curve(curves: dict[str, list[dict[str, Any]]], title: str, path: Path) -> None:
    """Evidence recall@10 and the share of spanning questions with every gold site asked, against
    the sites actually called, one line per federation and budget key."""
    plt = _pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, points in curves.items():
        xs = [p["sites_called_per_query"] for p in points]
        for metric, style in (("evidence_recall_at_10", "-o"), ("all_gold_sites_called_spanning", "--s")):
            ys = [p[metric] for p in points]
            if all(y is not None for y in ys):
                ax.plot(xs, ys, style, label=f"{name} {metric}")
        for x, y, p in zip(xs, [p["evidence_recall_at_10"] for p in points], points):
            if y is not None:
                ax.annotate(",".join(f"{k}={v}" for k, v in (p["budget"] or {"no budget": ""}).items()).rstrip("="),
                            (x, y), fontsize=7, xytext=(3, -10), textcoords="offset points")
    ax.set_xlabel("sites called per question")
    ax.set_ylabel("share")
    ax.set_title(f"{title}: refine under a budget", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def table(records: Sequence[dict[str, Any]]) -> str:
    head = "| " + " | ".join(RECORD_COLUMNS) + " |\n|" + "---|" * len(RECORD_COLUMNS) + "\n"
    return head + "".join("| " + " | ".join("–" if r.get(c) is None else str(r[c]) for c in RECORD_COLUMNS) + " |\n"
                          for r in records)


def _pyplot() -> Any:
    """pyplot, or None where matplotlib is not installed (the `bench` extra): the report's JSON and
    tables do not need it, so `hansa eval` on a default install writes them and skips the plots."""
    try:
        import matplotlib
    except ImportError:
        log.warning("eval.plots_skipped", reason="matplotlib is not installed: pip install 'hansa[bench]' for plots")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_tradeoff(records: Sequence[dict[str, Any]], title: str, caveat: str, path: Path) -> None:
    plt = _pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sizes = sorted({r["federation_sites"] for r in records})
    markers = dict(zip(sizes, "*osD^v"))
    for r in records:
        if r["evidence_recall_at_10"] is None:
            continue
        ax.scatter(r["sites_called_per_query"], r["evidence_recall_at_10"], marker=markers[r["federation_sites"]], s=60)
        ax.annotate(f"{r['strategy']} ({r['federation_sites']})", (r["sites_called_per_query"], r["evidence_recall_at_10"]),
                    fontsize=8, xytext=(4, 3), textcoords="offset points")
    ax.set_xlabel("sites called per question")
    ax.set_ylabel("evidence recall@10")
    ax.set_title(title + " — " + ", ".join(f"{m} = {n} site{'s' * (n > 1)}" for n, m in markers.items()), fontsize=9)
    ax.grid(alpha=0.3)
    fig.text(0.01, 0.01, caveat, fontsize=6, wrap=True)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_routing_curves(federations: dict[str, dict[str, Any]], title: str, path: Path) -> None:
    curves = {name: meta["routing_gold_site_recall_at_k"] for name, meta in federations.items()
              if meta.get("routing_gold_site_recall_at_k")}
    plt = _pyplot()
    if plt is None:
        return
    fig, axes = plt.subplots(1, max(1, len(curves)), figsize=(4.5 * max(1, len(curves)), 3.8), squeeze=False)
    for ax, (name, by_router) in zip(axes[0], curves.items()):
        for router, points in by_router.items():
            ks = [int(k.split("=")[1]) for k in points]
            ax.plot(ks, list(points.values()), marker="o", label=router)
        ax.set_title(f"{title}, {name}", fontsize=9)
        ax.set_xlabel("sites called (k)")
        ax.set_ylabel("gold-site recall")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def document(result: dict[str, Any], settings: Any) -> dict[str, Any]:
    """The JSON a run writes: what was asked of what, build costs per federation, one record per
    (dataset, federation, strategy, split)."""
    import os
    import platform

    from hansa.evaluation import split as split_rule

    ds = result["dataset"]
    questions = result["questions"]
    runs: Sequence[FederationRun] = result["runs"]
    return {
        "dataset": ds.name,
        "caveat": ds.caveat,
        "split": settings.split,
        "split_rule": split_rule.__doc__.strip().split("\n\n")[1].replace("\n", " "),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(settings).items() if k != "llm_api_key"},
        "machine": {"cpu_count": os.cpu_count(), "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
                    "python": platform.python_version()},
        "questions": {"total": len(questions), "answerable": sum(q.answerable for q in questions),
                      "by_kind": {k: sum(q.kind == k for q in questions) for k in sorted({q.kind for q in questions})}},
        "passages_total": len(result["passages"]),
        "raw_corpus_bytes": sum(len(p.text.encode("utf-8")) for p in result["passages"]),
        "federations": {f"fed{r.n_sites}": r.meta for r in runs},
        "records": (records := records_of(ds.name, settings.split, runs)),
        **({"budget_curve": curve} if (curve := budget_curve(records)) else {}),
        **({"answers_per_question": per_question} if (per_question := answers_per_question(runs)) else {}),
    }
