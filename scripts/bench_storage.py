"""Gateway storage by part, and routing from int8 summary codes against float32 vectors, side by side.

The gateway holds each site's summary vectors (now int8 codes, gateway.index.codes), its term statistics
and the rest of its head. This builds the federation `hansa eval` builds (the same datasets, sharding
and site cache, so a full run reuses the eval's sites), lets every site publish to a real gateway,
and then reports, in one run:

- bytes held by part (vectors, terms, the rest of the heads), as the gateway holds them (int8) and as
  it held them before (float32 vectors), each as a share of the raw corpus (evaluation.runner's
  gateway_held_bytes); plus what the vectors take on disk in Milvus Lite, both ways;
- routing on the same report-split questions: the gateway's own index (int8 codes) against an exact
  float32 scan of the very vectors the sites published (read back from each site's store and checked
  to quantise to the gateway's codes byte for byte): gold-site recall at k of the router's summary
  scores (vectors alone, and blended with term statistics as the router does), top-k site agreement,
  and the largest score difference.

    python scripts/bench_storage.py [--smoke] [--out benchmarks/storage.json] [--dataset squad]
        [--data ../shared/datasets/squad] [--sites 16] [--limit 2000] [--max-documents 0]
        [--site-setting chunks_per_summary=64] [--cache ~/.cache/hansa/eval]
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402  (scripts/ is not a package)
from benchlib import progress  # noqa: E402

MAX_K = 4
AGREEMENT_K = (1, 2, 3)


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def float32_disk_bytes(vectors: np.ndarray, fields: list[dict[str, Any]], ids: list[str], root: Path) -> int:
    """What the previous layout (a 384-d FLOAT_VECTOR field with a FLAT index) takes in Milvus Lite."""
    from hansa.adapters.vector.base import CollectionSpec
    from hansa.adapters.vector.milvus import MilvusVectorStore
    from hansa.gateway.index.durable import LEGACY_COLLECTION

    path = root / "float32.db"
    with MilvusVectorStore(str(path)) as store:
        store.ensure_collection(CollectionSpec(LEGACY_COLLECTION, dim=vectors.shape[1], index="FLAT", fields={
            "site_id": "str", "summary_id": "str", "level": "int", "richness": "int"}))
        store.upsert(LEGACY_COLLECTION, ids, vectors, fields)
    return dir_bytes(path / "collections")


def published_float32(fed: Any) -> tuple[list[tuple[str, str, int]], np.ndarray]:
    """(site, summary id, richness) and the float32 vector of every summary the gateway holds,
    read back from the sites' own stores (what they published)."""
    from hansa.plugin.site import SUMMARIES

    index = fed.gateway_service.index
    meta: list[tuple[str, str, int]] = []
    rows: list[np.ndarray] = []
    for site_id in sorted(index.sites()):
        held = index.current(site_id)
        ids = sorted(held.rows)
        got = fed.sites[site_id].ctx.vectors.get(SUMMARIES, ids)
        if set(got) != set(ids):
            raise RuntimeError(f"site {site_id}: {len(set(ids) - set(got))} published summaries not in its store")
        meta.extend((site_id, sid, held.rows[sid][4]) for sid in ids)
        rows.extend(got[sid] for sid in ids)
    return meta, np.vstack(rows).astype(np.float32)


def check_codes(fed: Any, meta: list[tuple[str, str, int]], vectors: np.ndarray) -> int:
    """The gateway's durable codes equal the published float32 vectors quantised; how many checked."""
    from hansa.gateway.index.codes import quantise
    from hansa.gateway.index.durable import COLLECTION, row_key

    index = fed.gateway_service.index
    if not index.flush(120):  # the durable copy is written behind the in-memory swap
        raise RuntimeError("the gateway's durable copy was not written within 120 s")
    keys = []
    for site_id, sid, _ in meta:
        row = index.current(site_id).rows[sid]
        keys.append(row_key(site_id, sid, row[1], row[2]))
    held = fed.gateway_vectors.fields(COLLECTION, ["codes"], ids=keys)
    stored = np.array([held[k]["codes"] for k in keys], dtype=np.int8)
    if not np.array_equal(stored, quantise(vectors)):
        raise RuntimeError("the gateway's durable codes are not the published vectors quantised")
    return len(keys)


def rankings(fed: Any, text: str, hits: Sequence[Any], lexical: dict[str, float]) -> dict[str, list[str]]:
    from hansa.gateway.query.route import score_sites

    routable = set(fed.sites)
    weight = fed.gateway_config.gateway.lexical_weight
    return {"summaries": [s.site_id for s in score_sites(hits, routable, lexical=lexical, lexical_weight=weight)],
            "summary_vectors": [s.site_id for s in score_sites(hits, routable, lexical_weight=0.0)]}


def routing(fed: Any, texts: Sequence[str], qvecs: np.ndarray, gold: Sequence[Sequence[str]],
            meta: list[tuple[str, str, int]], vectors: np.ndarray) -> dict[str, Any]:
    from hansa.evaluation.metrics import recall_at_k_curve
    from hansa.gateway.query.route import site_term_scores
    from hansa.gateway.index.summaries import SummaryHit

    index = fed.gateway_service.index
    top_m = fed.gateway_config.gateway.top_m_summaries
    max_k = min(MAX_K, len(fed.sites))
    routers = ("summaries", "summary_vectors")
    recall = {f"{r}_{v}": np.zeros(max_k) for r in routers for v in ("float32", "int8")}
    agree = {f"{r}_top{k}": 0 for r in routers for k in AGREEMENT_K if k <= len(fed.sites)}
    worst_score = 0.0
    n = 0
    for text, q, gold_sites in zip(texts, qvecs, gold):
        if not gold_sites:
            continue
        scores = vectors @ q
        top = np.argsort(-scores, kind="stable")[:top_m]
        exact = [SummaryHit(meta[i][0], meta[i][1], float(scores[i]), meta[i][2]) for i in top]
        coded = index.search(q, top_m)
        by_key = {(m[0], m[1]): i for i, m in enumerate(meta)}
        worst_score = max(worst_score, max(abs(h.score - float(scores[by_key[(h.site_id, h.summary_id)]]))
                                           for h in coded))
        lexical = site_term_scores(text, index, set(fed.sites))
        ranked = {"float32": rankings(fed, text, exact, lexical), "int8": rankings(fed, text, coded, lexical)}
        for r in routers:
            for v in ("float32", "int8"):
                recall[f"{r}_{v}"] += recall_at_k_curve(ranked[v][r], gold_sites, max_k)
            for k in AGREEMENT_K:
                if f"{r}_top{k}" in agree:
                    agree[f"{r}_top{k}"] += set(ranked["float32"][r][:k]) == set(ranked["int8"][r][:k])
        n += 1
    return {
        "questions_with_gold": n,
        "top_m_summaries": top_m,
        "gold_site_recall_at_k": {key: {f"k={k + 1}": round(float(v[k]) / max(n, 1), 4) for k in range(max_k)}
                                  for key, v in recall.items()},
        "top_k_site_agreement": {key: round(v / max(n, 1), 4) for key, v in agree.items()},
        "max_abs_summary_score_difference": round(worst_score, 5),
    }


def storage(fed: Any, raw: int, meta: list[tuple[str, str, int]], vectors: np.ndarray, root: Path) -> dict[str, Any]:
    from hansa.evaluation.runner import gateway_held_bytes
    from hansa.gateway.index.durable import COLLECTION

    held = gateway_held_bytes(fed.gateway_service.index)
    as_float32 = {**held, "vectors": held["vectors"] * 4}
    as_float32["total"] = sum(as_float32[p] for p in ("vectors", "terms", "head"))
    share = {name: {part: round(b / raw, 4) for part, b in parts.items()}
             for name, parts in (("int8", held), ("float32", as_float32))}
    lite = Path(fed.gateway_config.milvus_uri) / "collections" / (fed.gateway_config.milvus.collection_prefix + COLLECTION)
    ids = [f"{s}/{sid}" for s, sid, _ in meta]
    fields = [{"site_id": s, "summary_id": sid, "richness": r} for s, sid, r in meta]
    return {
        "raw_corpus_bytes": raw,
        "summaries": len(meta),
        "bytes": {"int8": held, "float32": as_float32},
        "share_of_raw": share,
        "milvus_lite_vector_disk_bytes": {"int8": dir_bytes(lite),
                                          "float32": float32_disk_bytes(vectors, fields, ids, root)},
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = benchlib.parser("storage", __doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="squad")
    p.add_argument("--data", type=Path, default=benchlib.SHARED_DIR / "datasets" / "squad")
    p.add_argument("--sites", type=int, default=16)
    p.add_argument("--limit", type=int, default=2000, help="report-split answerable questions")
    p.add_argument("--max-documents", type=int, default=0, help="sample this many documents (0: all)")
    p.add_argument("--site-setting", action="append", default=[], metavar="KEY=VALUE",
                   help="a [site] setting every site is built with (as `hansa eval --site-setting`)")
    p.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "hansa" / "eval",
                   help="the eval's site cache (sites built with the same documents and settings are reused)")
    args = benchlib.parse(p, argv)
    if args.smoke:
        args.sites, args.limit, args.max_documents = 3, 20, 2  # two non-empty sites (24 + 48 paragraphs)

    from hansa.evaluation.datasets import load_dataset
    from hansa.evaluation.runner import choose_questions, sample_documents, site_env
    from hansa.evaluation.sitecache import SiteCache
    from hansa.federation.local import LocalFederation

    settings = tuple(tuple(s.split("=", 1)) for s in args.site_setting)
    report = benchlib.Report("storage", args.smoke, libraries=("pymilvus", "milvus-lite", "faiss-cpu"))
    report.params.update(dataset=args.dataset, sites=args.sites, split="report", limit=args.limit,
                         max_documents=args.max_documents, site_settings=[list(s) for s in settings])
    ds = load_dataset(args.dataset, args.data)
    if args.max_documents:
        ds = sample_documents(ds, args.max_documents)
    questions = choose_questions(ds, "report", args.limit, -1)  # answerable only: routing needs a gold site
    sites = ds.sites(args.sites)
    site_of = {p.id: s for s, ps in sites.items() for p in ps}
    docs = {s: [p.as_document() for p in ps] for s, ps in sites.items()}
    raw = sum(len(p.text.encode("utf-8")) for ps in sites.values() for p in ps)
    with tempfile.TemporaryDirectory(prefix="hansa-bench-storage-") as tmp:
        cache = None if args.smoke else SiteCache(args.cache)
        try:
            with LocalFederation(Path(tmp) / "fed", docs, progress=progress, site_env=site_env(settings),
                                 site_cache=cache) as fed:
                meta, vectors = published_float32(fed)
                report.results["codes_checked_against_published_vectors"] = check_codes(fed, meta, vectors)
                report.results["storage"] = storage(fed, raw, meta, vectors, Path(tmp))
                embedder = next(iter(fed.sites.values())).ctx.embedder
                texts = [q.text for q in questions]
                gold = [sorted({site_of[g] for g in q.gold if g in site_of}) for q in questions]
                progress(f"routing {len(texts)} questions over {len(meta)} summaries, float32 and int8")
                report.results["routing"] = routing(fed, texts, embedder.embed_queries(texts), gold, meta, vectors)
                report.results["sites_reused_from_cache"] = sum(1 for h in fed.sites.values() if h.info.get("cached"))
        finally:
            if cache is not None:
                cache.close()
    share = report.results["storage"]["share_of_raw"]
    report.target("gateway_storage_share_of_raw", "<= 0.05 (issue 31)", share["int8"]["total"],
                  share["int8"]["total"] <= 0.05)
    curves = report.results["routing"]["gold_site_recall_at_k"]
    for r in ("summaries", "summary_vectors"):
        for k in curves[f"{r}_int8"]:
            report.ratios[f"{r}_recall_{k}_int8_vs_float32"] = benchlib.ratio(curves[f"{r}_int8"][k],
                                                                             curves[f"{r}_float32"][k])
    report.note("float32 bytes are what the gateway held before int8 codes (4 bytes a dimension); terms and "
                "head are held alike both ways. The int8 routing is the gateway's own index; float32 is an "
                "exact scan of the published vectors through the same site scoring (gateway.query.route.score_sites).")
    report.emit(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
