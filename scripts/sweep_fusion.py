#!/usr/bin/env python3
"""One of fusion's cross-site weights swept: evidence recall@10 and MRR per weight, on one split.

Fusion ranks citations across sites by the sites' own scores, which compare poorly across sites;
`--param site_prior` (`[gateway] fusion_site_prior`) weighs each site's documents by its routing
match (CORI's result merging), `--param answer_coverage` (`[gateway] fusion_answer_coverage`) by how
much of the question its answer sentences use (gateway/query/route.py AnswerCoverage); the other keeps
the gateway's default. This asks the split's answerable questions once per weight, in one federation (the cached
sites `hansa eval` builds, `--dataset squad` or `mtrag`), as `exhaustive` (every site) and `hansa` (the gateway's own routing and
escalation), and as `oracle` (the gold sites alone: the reference issue 9 measures against), with the sites' answers replayed after the first ask (evaluation.shared_calls), so the
weights differ only in fusion. Weights are interleaved per question: the gateway's site
reliability, learned along the run, is the same for every weight. Fit on the fit split, then report
the chosen weight beside 0 on the report split, side by side in one run:

    python scripts/sweep_fusion.py --split fit --limit 300 --weights 0,0.2,0.4,0.6,0.8 --out benchmarks/site_prior_fit.json
    python scripts/sweep_fusion.py --split report --limit 600 --weights 0,W --out benchmarks/site_prior_report.json
    python scripts/sweep_fusion.py --param answer_coverage --split fit --limit 300 --weights 0,0.25,0.5,0.75 \
        --out benchmarks/answer_coverage_fit.json
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


def main() -> None:
    p = benchlib.parser("fusion", __doc__.splitlines()[0])
    p.add_argument("--param", default="site_prior", choices=("site_prior", "answer_coverage"),
                   help="the weight swept (QueryPolicy field; the other keeps the gateway's default)")
    p.add_argument("--dataset", default="squad", choices=("squad", "mtrag"))
    p.add_argument("--sites", type=int, default=16)
    p.add_argument("--split", default="fit", choices=("fit", "report"))
    p.add_argument("--limit", type=int, default=300, help="answerable questions of the split")
    p.add_argument("--weights", default="0,0.2,0.4,0.6,0.8")
    p.add_argument("--site-setting", action="append", default=None,
                   help="[site] KEY=VALUE the sites are built with (default: as hansa eval's runs of the dataset: "
                        "chunks_per_summary=64 for SQuAD, none for MTRAG)")
    p.add_argument("--calibration", type=Path, default=None,
                   help="the gateway's calibration (default: the dataset's no-abstention escalation calibration)")
    p.add_argument("--workers", type=int, default=4)
    args = benchlib.parse(p)
    if args.site_setting is None:
        args.site_setting = ["chunks_per_summary=64"] if args.dataset == "squad" else []
    if args.calibration is None:
        name = {"squad": "squad16", "mtrag": "mtrag16"}[args.dataset]
        args.calibration = benchlib.REPO_DIR / "benchmarks" / f"calibration-{name}-escalation-noabstain.json"
    report = benchlib.Report(args.param, args.smoke, libraries=("pymilvus", "milvus-lite"))
    weights = [float(w) for w in args.weights.split(",")]
    if args.smoke:
        args.dataset, args.sites, args.limit, weights = "mtrag", 4, 6, [0.0, 0.5]

    from hansa.evaluation import metrics
    from hansa.evaluation.datasets import load_dataset
    from hansa.evaluation.runner import ask, cap_passages, choose_questions, outcome_of, site_env
    from hansa.gateway.query.policy import QueryPolicy
    from hansa.evaluation.shared_calls import SharedSiteCalls
    from hansa.evaluation.sitecache import SiteCache, default_cache_dir
    from hansa.federation.local import LocalFederation
    from hansa.gateway.transport import HttpSiteTransport

    ds = load_dataset(args.dataset, benchlib.dataset_dir(args.dataset))
    questions = [q for q in choose_questions(ds, args.split, args.limit, -1) if q.answerable]
    passages = cap_passages(ds.passages, questions, 12) if args.smoke else ds.passages
    ds = replace(ds, passages=passages)
    sites = ds.sites(args.sites)
    site_of = {pa.id: s for s, ps in sites.items() for pa in ps}
    docs = {s: [pa.as_document() for pa in ps] for s, ps in sites.items()}
    gold_sites = [sorted({site_of[g] for g in q.gold if g in site_of}) for q in questions]
    settings = tuple(tuple(s.split("=", 1)) for s in args.site_setting)
    env = {"HANSA_GATEWAY_SITE_TIMEOUT_S": "60", "HANSA_GATEWAY_EMBEDDING_MEMO_ENTRIES": "0"}
    if args.calibration and not args.smoke:
        env["HANSA_GATEWAY_CALIBRATION_FILE"] = str(args.calibration.resolve())
    shared: list[Any] = []

    def transport(identity: Any, cfg: Any) -> Any:
        shared.append(SharedSiteCalls(HttpSiteTransport(identity, cfg.allow_private_addresses)))
        return shared[-1]

    cache = None if args.smoke else SiteCache(default_cache_dir(os.environ))
    results: dict[str, dict[float, list[float]]] = {name: {w: [] for w in weights} for name in ("exhaustive", "hansa", "oracle")}
    ranks: dict[str, dict[float, list[float]]] = {name: {w: [] for w in per} for name, per in results.items()}
    with tempfile.TemporaryDirectory(prefix="hansa-prior-") as root, \
            LocalFederation(Path(root) / f"fed{args.sites}", docs, progress=progress, gateway_env=env,
                            site_env=site_env(settings), site_cache=cache, gateway_transport=transport) as fed:

        def one(i: int) -> list[tuple[str, float, float, float]]:
            q, out = questions[i], []
            body = {"question": q.text}
            # the gateway's own policy with this weight; the reference: the gold sites alone (MTRAG's
            # evidence spans sites: fusion's weights matter there too)
            plans = [("exhaustive", {**body, "sites": sorted(fed.sites)}), ("hansa", body)]
            if gold_sites[i]:
                plans.append(("oracle", {**body, "sites": gold_sites[i]}))
            asks = [(w, name, request) for w in weights for name, request in plans]
            for w, name, request in asks:
                response, ms = ask(fed, request, QueryPolicy(**{args.param: w}))
                o = outcome_of(name, q, gold_sites[i], response, ms)
                out.append((name, w, metrics.evidence_recall_at(o.ranked_docs, q.gold, 10),
                            metrics.reciprocal_rank(o.ranked_docs, q.gold)))
            return out

        with ThreadPoolExecutor(max_workers=1 if args.smoke else args.workers) as pool:
            for n, rows in enumerate(pool.map(one, range(len(questions))), 1):
                for name, w, value, rr in rows:
                    results[name][w].append(value)
                    ranks[name][w].append(rr)
                if n % 50 == 0:
                    progress(f"{n}/{len(questions)} questions")
        calls = {"asked": shared[0].asked, "replayed": shared[0].replayed} if shared else {}
    if cache is not None:
        cache.close()
    mean = {name: {w: statistics.fmean(v) for w, v in per.items()} for name, per in results.items()}
    report.params.update({"param": args.param, "dataset": args.dataset, "sites": args.sites, "split": args.split, "questions": len(questions),
                          "weights": weights, "site_settings": args.site_setting,
                          "calibration": None if args.smoke else str(args.calibration)})
    report.results.update({
        "evidence_recall_at_10": {name: {str(w): round(v, 4) for w, v in per.items()} for name, per in mean.items()},
        "mrr": {name: {str(w): round(statistics.fmean(v), 4) for w, v in per.items()} for name, per in ranks.items()},
        # the weight with the best sum over both strategies; ties: the smaller weight (chosen on fit only)
        "best_weight": max(weights, key=lambda w: (round(mean["exhaustive"][w] + mean["hansa"][w], 4), -w)),
        "site_calls": calls,
    })
    report.emit(args.out)


if __name__ == "__main__":
    main()
