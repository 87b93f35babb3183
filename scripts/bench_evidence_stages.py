#!/usr/bin/env python3
"""Where a federation loses gold evidence, per embedder: evidence recall at each stage of one answer.

Why: `hansa eval` reports evidence@10 of the fused answer only, so a model that loses there (issue 31:
bge-small-en-v1.5 on MTRAG's report split) could lose it at routing, at the sites' own retrieval or in
fusion. This asks each question twice per model, routed (`hansa`: the gateway's own routing) and at its
gold sites only (`oracle`: routing taken out), and measures on the same questions, both models side by
side on the same sites' data:

- raw_union: share of the gold documents any called site cites (a site cites the documents its
  answer sentences come from, plugin/answer_policy.py): what the sites' retrieval and sentence choice kept;
- raw_merged10: the same cut at 10 documents ranked by the sites' own scores;
- fused10: evidence@10 of the gateway's answer (what `hansa eval` reports), and fused_all (no cut):
  fused10 below fused_all is fusion's ranking; fused_all below raw_union is what the gateway dropped
  (an abstention cites nothing);
- n_raw, n_fused: documents cited by the sites, and in the answer;
- paired: the mean per-question difference of each model from the first, with its standard error;
- by_domain: raw_union and fused10 per question domain (MTRAG's four), routed and at the gold sites.

    nice python scripts/bench_evidence_stages.py --split fit --limit 200 --out benchmarks/evidence_stages_mtrag16_fit.json
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402  (scripts/ is not a package)
from benchlib import progress  # noqa: E402

STAGES = ("raw_union", "raw_merged10", "fused10", "fused_all", "n_raw", "n_fused", "rr")


def stages(gold: set[str], calls: Any, citations: list[dict[str, Any]]) -> dict[str, float]:
    """One answer's evidence at each stage (the module's list)."""
    from hansa.evaluation import metrics

    raw = sorted(((c.score, d.site_id, c.doc_id) for d in calls if d.answer is not None for c in d.answer.citations),
                 key=lambda x: -x[0])
    raw_docs = list(dict.fromkeys(doc for _, _, doc in raw))
    fused = list(dict.fromkeys(c["doc_id"] for c in citations))
    return {"raw_union": len(gold & set(raw_docs)) / len(gold),
            "raw_merged10": metrics.evidence_recall_at(raw_docs, sorted(gold), 10),
            "fused10": metrics.evidence_recall_at(fused, sorted(gold), 10),
            "fused_all": len(gold & set(fused)) / len(gold),
            "n_raw": float(len(raw_docs)), "n_fused": float(len(fused)),
            "rr": metrics.reciprocal_rank(fused, sorted(gold))}


def main() -> None:
    p = benchlib.parser("evidence_stages", __doc__.splitlines()[0])
    p.add_argument("--dataset", default="mtrag", choices=("squad", "mtrag"))
    p.add_argument("--sites", type=int, default=16)
    p.add_argument("--split", default="fit", choices=("fit", "report"))
    p.add_argument("--limit", type=int, default=200, help="answerable questions of the split")
    p.add_argument("--models", default="all-MiniLM-L6-v2,bge-small-en-v1.5-q",
                   help="catalog embedders, the first the reference of the paired differences")
    p.add_argument("--workers", type=int, default=4)
    args = benchlib.parse(p)
    models = args.models.split(",")
    if args.smoke:
        args.dataset, args.sites, args.limit, models = "mtrag", 4, 6, models[:1]
    report = benchlib.Report("evidence_stages", args.smoke, libraries=("pymilvus", "milvus-lite"))

    from hansa.evaluation.datasets import load_dataset
    from hansa.evaluation.runner import EVAL_CLIENT, cap_passages, choose_questions, setting_env
    from hansa.evaluation.sitecache import SiteCache, default_cache_dir
    from hansa.federation.local import LocalFederation
    from hansa.gateway.query.request import QueryRequest

    ds = load_dataset(args.dataset, benchlib.dataset_dir(args.dataset))
    questions = [q for q in choose_questions(ds, args.split, args.limit, -1) if q.answerable]
    if args.smoke:
        ds = replace(ds, passages=cap_passages(ds.passages, questions, 12))
    sites = ds.sites(args.sites)
    site_of = {pa.id: s for s, ps in sites.items() for pa in ps}
    docs = {s: [pa.as_document() for pa in ps] for s, ps in sites.items()}
    per_model: dict[str, list[dict[str, dict[str, float]]]] = {}
    for model in models:
        embedder = setting_env("embedder", [("model", model)])
        env = {"HANSA_GATEWAY_SITE_TIMEOUT_S": "60", "HANSA_GATEWAY_EMBEDDING_MEMO_ENTRIES": "0", **embedder}
        cache = None if args.smoke else SiteCache(default_cache_dir(os.environ))
        with tempfile.TemporaryDirectory(prefix="hansa-stages-") as root, \
                LocalFederation(Path(root) / f"fed{args.sites}", docs, progress=progress, gateway_env=env,
                                site_env=embedder, site_cache=cache) as fed:

            def one(i: int) -> dict[str, dict[str, float]]:
                q = questions[i]
                gold = set(q.gold)
                gold_sites = sorted({site_of[g] for g in gold if g in site_of})
                out = {}
                for name, body in (("hansa", {"question": q.text}), ("oracle", {"question": q.text, "sites": gold_sites})):
                    result = fed.gateway_service.query(QueryRequest.from_json(body), EVAL_CLIENT)
                    out[name] = stages(gold, result.trace.per_site, result.to_json()["citations"])
                    out[name]["sites_called"] = float(len(result.trace.per_site))
                return out

            with ThreadPoolExecutor(max_workers=1 if args.smoke else args.workers) as pool:
                per_model[model] = list(pool.map(one, range(len(questions))))
            progress(f"{model}: {len(questions)} questions")
        if cache is not None:
            cache.close()

    keys = (*STAGES, "sites_called")
    reference = per_model[models[0]]
    results: dict[str, Any] = {}
    for model, rows in per_model.items():
        results[model] = {name: {k: round(statistics.fmean(r[name][k] for r in rows), 4) for k in keys}
                          for name in ("hansa", "oracle")}
        if model != models[0]:
            paired = {}
            for name in ("hansa", "oracle"):
                for k in ("raw_union", "fused10"):
                    d = [r[name][k] - ref[name][k] for r, ref in zip(rows, reference)]
                    paired[f"{name}.{k}"] = {"mean": round(statistics.fmean(d), 4),
                                             "se": round(statistics.stdev(d) / len(d) ** 0.5, 4) if len(d) > 1 else None,
                                             "better": sum(x > 0 for x in d), "worse": sum(x < 0 for x in d)}
            results[model]["paired_vs_" + models[0]] = paired
        domains = sorted({q.domain for q in questions})
        results[model]["by_domain"] = {
            domain: {"questions": sum(q.domain == domain for q in questions),
                     **{f"{name}.{k}": round(statistics.fmean(r[name][k] for r, q in zip(rows, questions) if q.domain == domain), 4)
                        for name in ("hansa", "oracle") for k in ("raw_union", "fused10")}}
            for domain in domains}
    report.params.update({"dataset": args.dataset, "sites": args.sites, "split": args.split,
                          "questions": len(questions), "models": models})
    report.results.update(results)
    report.emit(args.out)


if __name__ == "__main__":
    main()
