#!/usr/bin/env python3
"""Routing only, on a federation already built: summary matching vs the learned router's model.

Opens a copy of a built federation's gateway directory (its signed registry and the durable copy of
its summary index, e.g. the `fed16/gateway` a `hansa eval --workdir DIR` run leaves), embeds MTRAG's
questions and, without calling any site:
  - fit half: computes every considered site's features and labels them with the question's gold
    sites (the label `hansa gateway router train` learns from the log is "contributed to the
    answer"; gold sites are its noise-free version, so this measures what the features can do);
  - report half: routes each question with summary matching ([gateway] defaults) and with the
    model, and reports gold-site recall, all-gold-sites-called and sites called.
Split: fit when sha256(question id)[0] < 128, else report (scripts/train_router_mtrag.is_fit).

    HF_HUB_OFFLINE=1 nice python scripts/route_learned_offline.py --gateway-dir COPY/fed16/gateway
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_router_mtrag import DEFAULT_DATA, is_fit, scores  # noqa: E402

from hansa.adapters.embedder import open_embedder  # noqa: E402
from hansa.adapters.vector.milvus import MilvusVectorStore  # noqa: E402
from hansa.evaluation.mtrag import split_sites  # noqa: E402
from hansa.evaluation.mtrag import load_passages, load_questions, load_rewrites  # noqa: E402
from hansa.core.config import Config, GatewayConfig  # noqa: E402
from hansa.gateway.query.route import SummaryRouter  # noqa: E402
from hansa.gateway.query.learned.features import site_features  # noqa: E402
from hansa.gateway.query.learned.model import fit  # noqa: E402
from hansa.gateway.query.learned.router import LearnedRouter, index_published  # noqa: E402
from hansa.gateway.trust.registry import SiteRegistry, utc_now  # noqa: E402
from hansa.gateway.service import Gateway  # noqa: E402


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gateway-dir", type=Path, required=True, help="a COPY of a built federation's gateway dir")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sites", type=int, default=16)
    ap.add_argument("--target-recall", type=float, default=0.95)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/router_learned_offline.json"))
    args = ap.parse_args(argv)
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731

    passages = load_passages(args.data)
    known = {p.id for ps in passages.values() for p in ps}
    questions = load_questions(args.data, known) + load_rewrites(args.data, known)
    site_of = {p.id: s for s, ps in split_sites(passages, args.sites).items() for p in ps}
    gold = {q.id: sorted({site_of[g] for g in q.gold if g in site_of}) for q in questions}
    questions = [q for q in questions if gold[q.id]]

    cfg = GatewayConfig()
    registry = SiteRegistry(args.gateway_dir / "registry.json")
    embedder = open_embedder(Config())
    with MilvusVectorStore(str(args.gateway_dir / "milvus.db")) as store, \
            Gateway.open(cfg, embedder=embedder, vector_store=store, registry=registry) as gw:
        routable = {r.site_id for r in registry.list() if r.is_routable(utc_now())}
        say(f"{len(questions)} questions, {len(routable)} routable sites, {gw.index.count()} summaries")
        published = index_published(gw.index)
        t0 = time.perf_counter()
        hits = {q.id: gw.index.search(embedder.embed_one(q.text), cfg.top_m_summaries) for q in questions}
        embed_s = time.perf_counter() - t0
        xs, ys, groups = [], [], []
        for q in questions:
            if is_fit(q.id):
                for f in site_features(hits[q.id], routable, published):
                    xs.append(f.vector)
                    ys.append(int(f.score.site_id in gold[q.id]))
                    groups.append(q.id)
        model = fit(np.vstack(xs), np.asarray(ys), groups, target_recall=args.target_recall)
        summary, learned = SummaryRouter(cfg.site_margin), LearnedRouter.from_model(model, published)
        rows: dict[str, list[tuple[list[str], list[str]]]] = {"summary": [], "learned": []}
        sweep: dict[float, list[tuple[list[str], list[str]]]] = {t: [] for t in (0.05, 0.1, 0.15, 0.2, 0.3, 0.4)}
        zero = np.zeros(1)
        for q in questions:
            if is_fit(q.id):
                continue
            for name, r in (("summary", summary), ("learned", learned)):
                rows[name].append(([s.site_id for s in r.select(r.rank(zero, hits[q.id], routable), cfg.top_k_sites)],
                                   gold[q.id]))
            ranked = learned.rank(zero, hits[q.id], routable)
            for t in sweep:
                sweep[t].append(([s.site_id for s in ranked[:cfg.top_k_sites] if (s.probability or 0) >= t]
                                 or [ranked[0].site_id], gold[q.id]))
    n = len(routable)
    doc: dict[str, Any] = {
        "command": "HF_HUB_OFFLINE=1 nice python scripts/route_learned_offline.py " + " ".join(argv or sys.argv[1:]),
        "split": "fit when sha256(question id)[0] < 128, else report",
        "labels": "gold sites of the fit half (routing only, no site called)",
        "sites": n, "fit_questions": len(set(groups)), "report_questions": len(rows["summary"]),
        "embed_seconds": round(embed_s, 1),
        "model": {"version": model.version, "threshold": round(model.threshold, 4), "rows": model.rows,
                  "weights": {k: round(w, 4) for k, w in zip(model.feature_names, model.weights)}},
        "report": {name: scores(r, n) for name, r in rows.items()},
        "learned_threshold_sweep": {str(t): scores(r, n) for t, r in sweep.items()},
        "target": "gold_site_recall >= 0.95 at share_of_sites_called <= 0.19",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({"report": doc["report"], "sweep": doc["learned_threshold_sweep"]}, indent=2))


if __name__ == "__main__":
    main()
