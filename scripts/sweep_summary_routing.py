#!/usr/bin/env python3
"""Routing-only sweep: how well do published summaries pick sites, per Leiden gamma and vector kind?

Builds (or reuses, under --workdir) the 16-site random split of MTRAG with install + ingest, then
for one Leiden gamma rebuilds every site's communities and ranks sites for all 511 questions by:
every chunk (full information: the reference hansa may not ship), one centroid per site, and the
community summary vectors as published ("blend", the default) or text-only / centroid-only.
Prints gold-site recall at k = 1..8 as JSON. No HTTP: this isolates routing from retrieval.

    python scripts/sweep_summary_routing.py --gamma 8 [--workdir /tmp/sweep16]
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from hansa.evaluation.mtrag import load_passages, load_questions, load_rewrites, split_sites
from hansa.federation.local import role_config
from hansa.plugin.chunking import chunk_text
from hansa.plugin.communities import build_communities, summary_vectors
from hansa.plugin.ingest import ingest_paths
from hansa.plugin.install import install_site
from hansa.plugin.readers import read_path
from hansa.plugin.site import CHUNKS, SiteContext


def recall_curve(scores: np.ndarray, gold: np.ndarray, max_k: int = 8) -> list[float]:
    order = np.argsort(-scores, axis=1)
    hits = np.take_along_axis(gold, order, axis=1)
    return [round(float((hits[:, :k].sum(1) / gold.sum(1)).mean()), 4) for k in range(1, max_k + 1)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "mtrag")
    ap.add_argument("--gamma", type=float, default=8.0)
    ap.add_argument("--sites", type=int, default=16)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="hansa-sweep-"))
    passages = load_passages(args.data)
    known = {p.id for ps in passages.values() for p in ps}
    questions = load_questions(args.data, known) + load_rewrites(args.data, known)
    sites = split_sites(passages, args.sites)
    site_of = {p.id: s for s, ps in sites.items() for p in ps}
    names = sorted(sites)
    per_site: dict[str, dict[str, np.ndarray]] = {}
    embedder = None
    started = time.perf_counter()
    for site_id in names:
        home = workdir / site_id
        docs = home / "docs"
        if not docs.is_dir():
            docs.mkdir(parents=True)
            (docs / f"{site_id}.jsonl").write_text("".join(json.dumps({"id": p.id, "title": p.title, "text": p.text}) + "\n"
                                                            for p in sites[site_id]), encoding="utf-8")
        env = {"HANSA_SITE_SITE_ID": site_id, "HANSA_SITE_LEIDEN_GAMMA": str(args.gamma)}
        with SiteContext.open(role_config(home, **env)) as ctx:
            install_site(ctx)
            ingest_paths(ctx, [docs])
            build_communities(ctx)
            embedder = ctx.embedder
            cfg = ctx.cfg.site
            ids = [c.id for d in read_path(docs) for c in chunk_text(d.id, d.text, cfg.chunk_size, cfg.chunk_overlap)]
            chunks = ctx.vectors.get(CHUNKS, ids)
            communities = ctx.graph.communities()
            vectors = {"chunks": np.vstack(list(chunks.values()))}
            for mode in ("blend", "text", "centroid"):
                ctx.cfg.site.summary_vector = mode
                vectors[mode] = summary_vectors(ctx, communities)
            per_site[site_id] = vectors
    assert embedder is not None
    q = embedder.embed([x.text for x in questions])
    gold = np.array([[any(site_of.get(g) == s for g in x.gold) for s in names] for x in questions], dtype=bool)

    def best(kind: str) -> np.ndarray:
        return np.column_stack([(per_site[s][kind] @ q.T).max(axis=0) for s in names])

    centroids = np.vstack([per_site[s]["chunks"].mean(0) / np.linalg.norm(per_site[s]["chunks"].mean(0)) for s in names])
    result = {
        "sites": args.sites, "gamma": args.gamma, "questions": len(questions),
        "summaries": int(sum(len(per_site[s]["blend"]) for s in names)),
        "chunks": int(sum(len(per_site[s]["chunks"]) for s in names)),
        "seconds": round(time.perf_counter() - started, 1),
        "gold_site_recall_at_k": {
            "full_information": recall_curve(best("chunks"), gold),
            "site_centroid": recall_curve(q @ centroids.T, gold),
            "summaries_blend": recall_curve(best("blend"), gold),
            "summaries_text": recall_curve(best("text"), gold),
            "summaries_centroid": recall_curve(best("centroid"), gold),
        },
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
