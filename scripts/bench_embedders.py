"""The catalog's embedders side by side on fair questions: what routing and retrieval each one buys.

Why: the default embedder is chosen by measurement on data none of the candidates was trained on.
all-MiniLM-L6-v2 was trained on SQuAD's train question-paragraph pairs, so SQuAD figures here use
**dev** questions only (v1.1 dev, with their dev articles as the corpus); MTRAG is the second data
set. Every model runs through hansa's own pieces: the chunker (900/150 characters, the `[site]`
defaults), the embedder port (passages with `embed`, questions with `embed_queries`, so each
model's prefixes apply) and the same sharding the evaluation uses (SQuAD: documents hashed over 16
sites; MTRAG: 16 sites, each domain split in 4). Nothing is tuned here; questions come from the
report split (evaluation.split), dev questions only for SQuAD.

Per model:
- `squad_dev`: `r_at_1` (the best chunk comes from the gold paragraph), `site_at_k` for k = 1..4
  (a router that sees every chunk vector asks the k sites with the best chunk: is the gold site
  among them?);
- `mtrag`: `evidence_recall_at_10` (share of gold passages among the passages of the 10 best chunks,
  centralized), `site_at_k` (mean share of a question's gold sites among the k best);
- `chunks_per_s` over the MTRAG chunks and `question_ms` (one question at a time, p50), on the
  same machine one model after another; `cosine_to_fp32` for int8 models (min/mean over MTRAG
  chunks, against the fp32 graph of the same model).

    nice python scripts/bench_embedders.py [--smoke] [--models a,b] [--out benchmarks/embedders.json]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402  (scripts/ is not a package)

# fp32 before int8 of the same model: the int8 row reports its cosine to the fp32 vectors.
DEFAULT_MODELS = ("all-MiniLM-L6-v2", "all-MiniLM-L6-v2-q", "bge-small-en-v1.5", "bge-small-en-v1.5-q",
                  "e5-small-v2", "e5-small-v2-q")
CHUNK_SIZE, CHUNK_OVERLAP = 900, 150
SITES = 16
MAX_K = 4


def _chunks(passages: Sequence[Any]) -> tuple[list[str], list[str]]:
    """(chunk texts, the passage id of each chunk), cut by hansa's chunker."""
    from hansa.plugin.chunking import chunk_text

    texts, owners = [], []
    for p in passages:
        for c in chunk_text(p.id, p.text, CHUNK_SIZE, CHUNK_OVERLAP):
            texts.append(c.text)
            owners.append(p.id)
    return texts, owners


def _site_curve(scores: np.ndarray, chunk_site: np.ndarray, sites: list[str], gold_sites: Sequence[set[str]]) -> list[float]:
    """Mean gold-site recall at k = 1..MAX_K of the full-information router (best chunk per site)."""
    best = np.column_stack([scores[:, chunk_site == i].max(axis=1) for i in range(len(sites))])
    order = np.argsort(-best, axis=1, kind="stable")
    curve = np.zeros(MAX_K)
    for row, gold in zip(order, gold_sites):
        for k in range(MAX_K):
            curve[k] += len({sites[i] for i in row[:k + 1]} & gold) / len(gold)
    return [round(float(v) / len(gold_sites), 4) for v in curve]


def _corpus(name: str, passages: Sequence[Any], site_of: dict[str, str], questions: Sequence[Any]) -> dict[str, Any]:
    texts, owners = _chunks(passages)
    sites = sorted(set(site_of.values()))
    index = {s: i for i, s in enumerate(sites)}
    return {"name": name, "texts": texts, "owners": np.asarray(owners),
            "chunk_site": np.asarray([index[site_of[o]] for o in owners]), "sites": sites,
            "questions": [q.text for q in questions], "gold": [set(q.gold) for q in questions],
            "gold_sites": [{site_of[g] for g in q.gold if g in site_of} for q in questions]}


def load(smoke: bool, squad_articles: int, mtrag_questions: int) -> tuple[dict[str, Any], dict[str, Any]]:
    from hansa.evaluation.datasets import shard_by_document, stable_hash
    from hansa.evaluation.mtrag import load_dataset as load_mtrag, split_sites
    from hansa.evaluation.split import select
    from hansa.evaluation.squad import load_passages, load_questions

    root = benchlib.dataset_dir("squad")
    dev_ids = _dev_passage_ids(root)
    dev = [p for p in load_passages(root) if p.id in dev_ids]
    articles = sorted({p.doc_id for p in dev}, key=lambda d: stable_hash("bench-embedders", d))[:squad_articles]
    dev = [p for p in dev if p.doc_id in set(articles)]
    site_of = {p.id: s for s, ps in shard_by_document(dev, SITES).items() for p in ps}
    qs = [q for q in select(load_questions(root), "report")
          if q.answerable and q.source.startswith("squad1.1-dev") and q.gold and q.gold[0] in site_of]
    qs = sorted(qs, key=lambda q: stable_hash("bench-embedders-q", q.id))[:(40 if smoke else 800)]
    squad = _corpus("squad_dev", dev, site_of, qs)

    mtrag = load_mtrag(benchlib.mtrag_dir())
    passages = list(mtrag.passages)
    if smoke:
        passages = passages[::25]
    site_of = {p.id: s for s, ps in split_sites(passages, SITES).items() for p in ps}
    mq = [q for q in select(mtrag.questions, "report") if q.answerable and q.gold and all(g in site_of for g in q.gold)]
    mq = sorted(mq, key=lambda q: stable_hash("bench-embedders-q", q.id))[:mtrag_questions]
    return squad, _corpus("mtrag", passages, site_of, mq)


def _dev_passage_ids(root: Path) -> set[str]:
    import gzip
    import json

    with gzip.open(root / "passages.jsonl.gz", "rt", encoding="utf-8") as fh:
        return {r["id"] for r in map(json.loads, fh) if r.get("source") == "squad1.1-dev"}


def measure(model: str, corpora: Sequence[dict[str, Any]], batch: int) -> tuple[dict[str, Any], np.ndarray]:
    from hansa.adapters.embedder.onnx import OnnxEmbedder

    embedder = OnnxEmbedder(model, batch_size=batch)
    embedder.warm()
    out: dict[str, Any] = {"model_id": embedder.model_id, "model_sha256": embedder.model_sha256,
                           "precision": embedder.precision, "pooling": embedder.recipe.pooling,
                           "max_length": embedder.recipe.max_length}
    mtrag_vectors = np.zeros((0, embedder.dim), dtype=np.float32)
    for corpus in corpora:
        t0 = time.perf_counter()
        vectors = embedder.embed(corpus["texts"])
        seconds = time.perf_counter() - t0
        qvecs = embedder.embed_queries(corpus["questions"])
        scores = qvecs @ vectors.T
        row: dict[str, Any] = {"chunks": len(vectors), "questions": len(qvecs),
                               "site_at_k": _site_curve(scores, corpus["chunk_site"], corpus["sites"], corpus["gold_sites"])}
        if corpus["name"] == "squad_dev":
            top = corpus["owners"][np.argmax(scores, axis=1)]
            row["r_at_1"] = round(float(np.mean([t in g for t, g in zip(top, corpus["gold"])])), 4)
        else:
            mtrag_vectors = vectors
            top10 = np.argsort(-scores, axis=1)[:, :10]
            row["evidence_recall_at_10"] = round(float(np.mean(
                [len(set(corpus["owners"][t]) & g) / len(g) for t, g in zip(top10, corpus["gold"])])), 4)
            out["chunks_per_s"] = round(len(vectors) / seconds, 2)
            samples = benchlib.time_each(embedder.embed_query, corpus["questions"][:60], warmup=3, min_calls=10)
            out["question_ms"] = benchlib.percentiles(samples)
        out[corpus["name"]] = row
    return out, mtrag_vectors


def main(argv: Sequence[str] | None = None) -> int:
    p = benchlib.parser("embedders", __doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated catalog names")
    p.add_argument("--squad-articles", type=int, default=32, help="SQuAD dev articles in the corpus (default 32)")
    p.add_argument("--mtrag-questions", type=int, default=400, help="MTRAG report questions (default 400)")
    p.add_argument("--batch", type=int, default=32)
    args = benchlib.parse(p, argv)
    from hansa.adapters.embedder.catalog import MODELS

    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    if args.smoke:
        models = models[:1]
    report = benchlib.Report("embedders", args.smoke, libraries=("onnxruntime", "tokenizers", "numpy"))
    squad, mtrag = load(args.smoke, 4 if args.smoke else args.squad_articles, 20 if args.smoke else args.mtrag_questions)
    report.params.update(models=models, sites=SITES, chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP, batch=args.batch,
                         squad_dev_chunks=len(squad["texts"]), squad_dev_questions=len(squad["questions"]),
                         mtrag_chunks=len(mtrag["texts"]), mtrag_questions=len(mtrag["questions"]),
                         split="report", squad_question_source="dev")
    fp32_vectors: dict[str, np.ndarray] = {}
    for model in models:
        benchlib.progress(f"embedders: {model}")
        row, vectors = measure(model, (squad, mtrag), args.batch)
        report.results[model] = row
        if MODELS[model].precision == "fp32":
            fp32_vectors[MODELS[model].model_id] = vectors
        elif MODELS[model].model_id in fp32_vectors:
            cos = np.sum(vectors * fp32_vectors[MODELS[model].model_id], axis=1)
            row["cosine_to_fp32"] = {"min": round(float(cos.min()), 4), "mean": round(float(cos.mean()), 4)}
    if "all-MiniLM-L6-v2" in report.results:
        base = report.results["all-MiniLM-L6-v2"]
        for model, row in report.results.items():
            report.ratios[f"{model}_chunks_per_s_vs_minilm"] = benchlib.ratio(row["chunks_per_s"], base["chunks_per_s"])
    report.note("SQuAD: dev articles and dev questions only (all-MiniLM-L6-v2 was trained on SQuAD train pairs).")
    report.emit(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
