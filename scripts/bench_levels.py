"""Community levels: does routing over the hierarchy beat the finest level alone, and what does it cost?

Builds a SQuAD federation (dev articles plus a stable hash sample of others, `--max-documents`;
sites by `shard_by_document`, as `hansa eval` builds them) on the embedded store with
`[site] community_levels = --levels`, then ranks sites for the report split's answerable dev
questions by the published summary vectors alone (no term statistics, no HTTP: this isolates the
summaries' part of routing) under each way of using the levels:

- `level0`: the finest level only (today's single level);
- `levelN`: level N only (what a gateway holding only coarse summaries would route on);
- `max_levels`: every level's summaries in one top-m search (a coarse summary votes like a fine one);
- `descend`: GraphRAG-style coarse-to-fine: the top `--descend-parents` level-1 summaries of the
  federation are kept and only their children (level 0) are matched;
- `fine_plus_coarse`: a site's level-0 score plus `--coarse-weight` x its best level-1 similarity.

Sites are scored by the gateway's DGRAG rule (gateway.query.route.score_sites over the top-m hits) and
gold-site recall is read at k = 1..8 sites asked (the same number of sites for every variant).
Storage per level: summaries and bytes of float32 vectors the gateway holds, and their share of the
raw corpus text.

    python scripts/bench_levels.py --sites 16 --max-documents 64 --levels 4 --out benchmarks/levels.json
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402  (scripts/ is not a package)

from hansa.evaluation.datasets import load_dataset  # noqa: E402
from hansa.evaluation.runner import choose_questions, sample_documents  # noqa: E402
from hansa.federation.local import role_config  # noqa: E402
from hansa.gateway.index.summaries import SummaryHit  # noqa: E402
from hansa.gateway.query.route import score_sites  # noqa: E402
from hansa.plugin.communities import build_communities  # noqa: E402
from hansa.plugin.ingest import ingest_paths  # noqa: E402
from hansa.plugin.install import install_site  # noqa: E402
from hansa.plugin.site import SUMMARIES, SiteContext  # noqa: E402

MAX_K = 8
BUILT = "levels-built.json"  # written in a site's home once it is built: what --reuse reads back


def build_sites(ds, n_sites: int, levels: int, workdir: Path, reuse: bool) -> tuple[dict, object, dict]:
    """Every site built (or, with `reuse`, read back where an earlier run under `workdir` built it,
    and left out where it did not); per site its communities (id -> (level, parent, size)) and
    summary vectors."""
    out: dict[str, dict] = {}
    embedder = None
    timings: dict[str, float] = {}
    for site_id, passages in sorted(ds.sites(n_sites).items()):
        home = workdir / site_id
        docs = home / "docs"
        if reuse and not (home / BUILT).is_file():
            benchlib.progress(f"{site_id}: not built under {workdir}, left out (--reuse)")
            continue
        docs.mkdir(parents=True, exist_ok=True)
        (docs / f"{site_id}.jsonl").write_text("".join(json.dumps({"id": p.id, "title": p.title, "text": p.text}) + "\n"
                                                        for p in passages), encoding="utf-8")
        started = time.perf_counter()
        env = {"HANSA_SITE_SITE_ID": site_id, "HANSA_SITE_COMMUNITY_LEVELS": str(levels)}
        with SiteContext.open(role_config(home, **env)) as ctx:
            if reuse:
                report = json.loads((home / BUILT).read_text(encoding="utf-8"))
            else:
                install_site(ctx)
                ingest_paths(ctx, [docs])
                built = build_communities(ctx)
                report = {"communities": built.communities, "coarser": list(built.coarser)}
                (home / BUILT).write_text(json.dumps(report), encoding="utf-8")
            communities = ctx.graph.communities()
            vectors = ctx.vectors.get(SUMMARIES, [c.id for c in communities])
            embedder = ctx.embedder
        timings[site_id] = round(time.perf_counter() - started, 1)
        out[site_id] = {
            "communities": {c.id: (c.level, c.parent, len(c.entity_ids)) for c in communities},
            "vectors": vectors,
            "passages": {p.id for p in passages},
            "coarser": report["coarser"],
        }
        benchlib.progress(f"{site_id}: {len(passages)} passages, level 0 {report['communities']}, coarser {report['coarser']}, "
                          f"{timings[site_id]} s")
    return out, embedder, timings


def recall(ranked: list[list[str]], gold: list[set[str]]) -> list[float]:
    return [round(float(np.mean([len(set(r[:k]) & g) / len(g) for r, g in zip(ranked, gold)])), 4)
            for k in range(1, MAX_K + 1)]


def main() -> None:
    p = benchlib.parser("levels", __doc__.split("\n")[0])
    p.add_argument("--sites", type=int, default=16, help="sites the corpus is sharded into (by document)")
    p.add_argument("--max-documents", type=int, default=64,
                   help="articles: SQuAD's 48 dev articles, then a stable hash sample of others up to this many")
    p.add_argument("--levels", type=int, default=4, help="[site] community_levels the sites are built with")
    p.add_argument("--top-m", type=int, default=128, help="summaries matched per question ([gateway] top_m_summaries)")
    p.add_argument("--descend-parents", type=int, default=16,
                   help="level-1 summaries kept federation-wide before descending to their children")
    p.add_argument("--coarse-weight", type=float, default=0.5, help="weight of a site's best level-1 match in fine_plus_coarse")
    p.add_argument("--workdir", type=Path, default=None, help="where the sites are built (default: a fresh temporary folder)")
    p.add_argument("--reuse", action="store_true",
                   help="read back the sites an earlier run built under --workdir instead of building (others are left out)")
    args = benchlib.parse(p)
    report = benchlib.Report("levels", args.smoke, libraries=("igraph", "leidenalg"))
    source = "dev"
    if args.smoke:  # four articles of any source: seconds, not SQuAD dev's 48 articles
        args.sites, args.max_documents, source = 4, 4, "all"
    ds = sample_documents(load_dataset("squad", benchlib.dataset_dir("squad")), args.max_documents, source)
    questions = [q for q in choose_questions(ds, "report", 0, -1, source) if q.answerable]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="hansa-levels-"))
    sites, embedder, timings = build_sites(ds, args.sites, args.levels, workdir, args.reuse)
    names = sorted(sites)
    gold = [{s for s in names if set(q.gold) & sites[s]["passages"]} for q in questions]
    keep = [i for i, g in enumerate(gold) if g]
    questions, gold = [questions[i] for i in keep], [gold[i] for i in keep]
    q = embedder.embed([x.text for x in questions])

    rows = [(s, cid, level, parent, size) for s in names for cid, (level, parent, size) in sites[s]["communities"].items()]
    matrix = np.vstack([sites[s]["vectors"][cid] for s, cid, *_ in rows]).astype(np.float32)
    sims = q @ matrix.T
    level_of = np.array([r[2] for r in rows])
    top_level = int(level_of.max())

    def ranked_by(mask: np.ndarray, i: int) -> list[str]:
        idx = np.flatnonzero(mask)
        scores = sims[i, idx]
        top = idx[np.argsort(-scores)[: args.top_m]]
        hits = [SummaryHit(rows[j][0], rows[j][1], float(sims[i, j]), rows[j][4]) for j in top]
        return [s.site_id for s in score_sites(hits, names)]

    variants: dict[str, list[list[str]]] = defaultdict(list)
    index_of = {(r[0], r[1]): j for j, r in enumerate(rows)}
    children: dict[int, list[int]] = defaultdict(list)
    for j, (s, _cid, _level, parent, _size) in enumerate(rows):
        if parent:
            children[index_of[(s, parent)]].append(j)
    for i in range(len(questions)):
        for level in range(top_level + 1):
            variants[f"level{level}"].append(ranked_by(level_of == level, i))
        variants["max_levels"].append(ranked_by(np.ones(len(rows), dtype=bool), i))
        if top_level >= 1:
            parents = np.flatnonzero(level_of == 1)
            best = parents[np.argsort(-sims[i, parents])[: args.descend_parents]]
            mask = np.zeros(len(rows), dtype=bool)
            mask[[c for b in best for c in children[b]]] = True
            variants["descend"].append(ranked_by(mask, i))
            fine = {s.site_id: s.score for s in score_sites(
                [SummaryHit(rows[j][0], rows[j][1], float(sims[i, j]), rows[j][4])
                 for j in np.flatnonzero(level_of == 0)[np.argsort(-sims[i, level_of == 0])[: args.top_m]]], names)}
            coarse: dict[str, float] = {}
            for j in parents:
                coarse[rows[j][0]] = max(coarse.get(rows[j][0], -1.0), float(sims[i, j]))
            blend = {s: fine.get(s, 0.0) + args.coarse_weight * coarse.get(s, 0.0) for s in names}
            variants["fine_plus_coarse"].append(sorted(names, key=lambda s: (-blend[s], s)))

    raw = sum(len(p.text.encode("utf-8")) for p in ds.passages)
    dim = matrix.shape[1]
    storage = {}
    for level in range(top_level + 1):
        n = int((level_of == level).sum())
        storage[f"level{level}"] = {"summaries": n, "vector_bytes": n * dim * 4,
                                    "share_of_raw": round(n * dim * 4 / raw, 4)}
    report.params = {"dataset": "squad", "sites": args.sites, "max_documents": args.max_documents, "split": "report",
                     "question_source": source, "sites_built": len(names), "levels": args.levels, "top_m": args.top_m,
                     "descend_parents": args.descend_parents, "coarse_weight": args.coarse_weight,
                     "passages": len(ds.passages), "questions": len(questions), "raw_bytes": raw}
    report.results = {"gold_site_recall_at_k": {k: recall(v, gold) for k, v in variants.items()},
                      "storage": storage, "build_seconds": timings,
                      "coarser_per_site": {s: list(sites[s]["coarser"]) for s in names}}
    report.note("summary vectors only (no term statistics): the gateway's DGRAG site score over the top-m hits")
    report.note("recall at k = 1..8: the same number of sites asked for every variant")
    if len(names) < args.sites:
        report.note(f"only {len(names)} of {args.sites} sites were built (--reuse): questions whose gold passages "
                    "lie on the others are left out, and recall is over the built sites")
    report.emit(args.out)


if __name__ == "__main__":
    main()
