#!/usr/bin/env python3
"""Train the learned router on a real federation and compare it with summary matching.

Builds MTRAG's 16-site random split (evaluation.mtrag.split_sites) as a LocalFederation (real sites,
real gateway), then:
  1. fit half: asks each question through the gateway with the learned router in cold start
     (summary matching) plus exploration, so the gateway's own outcome log fills with labels
     (a site is relevant when one of its sentences survived fusion);
  2. trains from that log exactly as `hansa gateway router train` does;
  3. report half: routes each question (no site is called: routing only) with summary matching,
     the log-trained model, and — as a ceiling for the features — a model fit on the fit half's
     gold sites; prints gold-site recall, sites called and all-gold-sites-called for each.

The split is a fixed hash of the question id: fit when sha256(id)'s first byte < 128, else report
(about half each, stable across runs and machines; hansa.evaluation had no split on main then).
Exploration here is higher than a production gateway's default ([gateway] router_explore_share
0.05) because this log starts empty; it is a bootstrap, documented in the JSON.

    HF_HUB_OFFLINE=1 nice python scripts/train_router_mtrag.py --workdir /tmp/router16
"""
from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from hansa.evaluation.mtrag import Question, load_passages, load_questions, load_rewrites, split_sites
from hansa.evaluation.runner import cap_passages
from hansa.federation.local import API_KEY_NAME, LocalFederation
from hansa.gateway.query.policy import QueryPolicy
from hansa.gateway.query.request import QueryRequest
from hansa.gateway.query.route import SummaryRouter
from hansa.gateway.query.learned.features import site_features
from hansa.gateway.query.learned.model import fit
from hansa.gateway.query.learned.router import LearnedRouter, index_published, open_router, router_dir
from hansa.gateway.query.learned.train import summary, train_router

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "mtrag"


def is_fit(question_id: str) -> bool:
    """The fixed split: fit when the first byte of sha256(id) is below 128."""
    return hashlib.sha256(question_id.encode()).digest()[0] < 128


def scores(rows: Sequence[tuple[list[str], list[str]]], n_sites: int) -> dict[str, float]:
    """rows: (selected sites, gold sites) per question."""
    recall = [len(set(s) & set(g)) / len(g) for s, g in rows]
    called = [len(s) for s, _ in rows]
    return {"questions": len(rows), "gold_site_recall": round(statistics.fmean(recall), 4),
            "all_gold_sites_called": round(statistics.fmean(r == 1.0 for r in recall), 4),
            "sites_called_per_query": round(statistics.fmean(called), 3),
            "share_of_sites_called": round(statistics.fmean(called) / n_sites, 4)}


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sites", type=int, default=16)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--explore-share", type=float, default=0.5)
    ap.add_argument("--explore-sites", type=int, default=3)
    ap.add_argument("--site-timeout-s", type=float, default=120.0)
    ap.add_argument("--target-recall", type=float, default=0.95)
    ap.add_argument("--limit", type=int, default=0, help="at most N questions (0: all 511)")
    ap.add_argument("--fit-limit", type=int, default=0,
                    help="ask at most N fit questions through the gateway (0: all; each costs real site calls)")
    ap.add_argument("--max-passages", type=int, default=0, help="cap passages per domain (0: all)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/router_learned.json"))
    args = ap.parse_args(argv)
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731

    passages = load_passages(args.data)
    known = {p.id for ps in passages.values() for p in ps}
    questions: list[Question] = load_questions(args.data, known) + load_rewrites(args.data, known)
    if args.limit:
        questions = sorted(questions, key=lambda q: hashlib.sha256(q.id.encode()).hexdigest())[:args.limit]
    if args.max_passages:
        passages = cap_passages([p for ps in passages.values() for p in ps], questions, args.max_passages)
    sites = split_sites(passages, args.sites)
    site_of = {p.id: s for s, ps in sites.items() for p in ps}
    gold = {q.id: sorted({site_of[g] for g in q.gold if g in site_of}) for q in questions}
    questions = [q for q in questions if gold[q.id]]
    fit_qs = [q for q in questions if is_fit(q.id)]
    asked_qs = fit_qs[:args.fit_limit] if args.fit_limit else fit_qs
    report_qs = [q for q in questions if not is_fit(q.id)]
    docs = {s: [{"id": p.id, "title": p.title, "text": p.text} for p in ps] for s, ps in sites.items()}
    say(f"{len(questions)} questions: {len(fit_qs)} fit, {len(report_qs)} report; {len(sites)} sites")

    with tempfile.TemporaryDirectory(prefix="hansa-router-") as tmp:
        root = args.workdir or Path(tmp)
        # a generous site timeout: on a shared machine a 10 s deadline times calls out, and a
        # call that failed teaches nothing (it is logged without a label)
        env = {"HANSA_GATEWAY_SITE_TIMEOUT_S": str(args.site_timeout_s)}
        with LocalFederation(root / f"fed{args.sites}", docs, progress=say, gateway_env=env) as fed:
            gw = fed.gateway_service
            cfg = gw.cfg
            home = router_dir(gw.registry.path.parent)
            routable = set(fed.sites)
            k = cfg.top_k_sites

            # 1. the gateway's own log, in cold start with exploration
            boot = open_router(cfg, gw.index, gw.registry.path.parent, explore_share=args.explore_share, seed=0)
            boot.explore_sites = args.explore_sites
            policy = QueryPolicy(name="learned-bootstrap", router=boot)
            t0 = time.perf_counter()
            for i, q in enumerate(asked_qs):
                gw.query(QueryRequest(question=q.text), client=API_KEY_NAME, policy=policy)
                if (i + 1) % 10 == 0:
                    say(f"fit: {i + 1}/{len(asked_qs)} questions asked ({time.perf_counter() - t0:.0f} s)")
            ask_s = time.perf_counter() - t0

            # 2. train from the log, as `hansa gateway router train` does
            model, path = train_router(home, target_recall=args.target_recall)
            say(f"trained {model.version}: {model.rows} rows, threshold {model.threshold:.3f}")

            # ceiling for the features: gold labels on the fit half, every considered site
            embed = gw.embedder.embed_one
            published = index_published(gw.index)
            xs, ys, groups = [], [], []
            for q in fit_qs:
                for f in site_features(gw.index.search(embed(q.text), cfg.top_m_summaries), routable, published):
                    xs.append(f.vector)
                    ys.append(int(f.score.site_id in gold[q.id]))
                    groups.append(q.id)
            gold_model = fit(np.vstack(xs), np.asarray(ys), groups, target_recall=args.target_recall)

            # 3. report half: routing only
            routers = {"summary": SummaryRouter(cfg.site_margin),
                       "learned": LearnedRouter.from_model(model, published),
                       "learned_gold_labels": LearnedRouter.from_model(gold_model, published)}
            rows: dict[str, list[tuple[list[str], list[str]]]] = {name: [] for name in routers}
            sweep: dict[float, list[tuple[list[str], list[str]]]] = {t: [] for t in (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5)}
            for q in report_qs:
                vec = embed(q.text)
                hits = gw.index.search(vec, cfg.top_m_summaries)
                for name, r in routers.items():
                    rows[name].append(([s.site_id for s in r.select(r.rank(vec, hits, routable), k)], gold[q.id]))
                ranked = routers["learned"].rank(vec, hits, routable)
                for t in sweep:
                    chosen = [s.site_id for s in ranked[:k] if (s.probability or 0) >= t] or [ranked[0].site_id]
                    sweep[t].append((chosen, gold[q.id]))

    doc: dict[str, Any] = {
        "command": "HF_HUB_OFFLINE=1 nice python scripts/train_router_mtrag.py " + " ".join(argv or sys.argv[1:]),
        "split": "fit when sha256(question id)[0] < 128, else report",
        "sites": len(sites), "fit_questions": len(fit_qs), "fit_questions_asked": len(asked_qs), "report_questions": len(report_qs),
        "bootstrap": {"explore_share": args.explore_share, "explore_sites": args.explore_sites,
                      "ask_seconds": round(ask_s, 1)},
        "model": summary(model, path), "gold_label_model": {"threshold": round(gold_model.threshold, 4),
                                                            "version": gold_model.version},
        "report": {name: scores(r, len(sites)) for name, r in rows.items()},
        "learned_threshold_sweep": {str(t): scores(r, len(sites)) for t, r in sweep.items()},
        "target": "gold_site_recall >= 0.95 at share_of_sites_called <= 0.19",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(doc["report"], indent=2))


if __name__ == "__main__":
    main()
