"""Embedding backends side by side: chunks/s, question latency, start-up and resident memory.

Embedding is ~90% of a site's ingest and almost all of the gateway's own per-query time (issues 8
and 10), so this picks the default `[embedder] backend` by measurement. Each backend runs in its
own fresh process (as `hansa site serve` or `hansa gateway serve` would), one after the other:

- `st_fp32`: sentence-transformers, fp32 (the reference vectors).
- `st_bf16`: the same under bf16 autocast (what "auto" picks on CPUs with native bf16; emulated,
  and so slower, elsewhere: `machine.cpu_native_bf16` says which).
- `onnx_fp32`: ONNX Runtime on the catalog's all-MiniLM-L6-v2 graph (Maven Central; no torch).
- `onnx_fp32_1t`: the same with one intra-op thread (`[embedder] threads = 1`): on a shared machine a
  thread pool that waits for a busy second core can cost more than it parallelizes.
- `onnx_int8`: the catalog's int8 graph of the same model (`all-MiniLM-L6-v2-q`): another space.

Per backend: `startup_s` (imports + model load + first vector, the cost every command that
embeds used to pay), `rss_mib` after that first vector, `chunks_per_s` over 900-character chunks of
MTRAG passages (hansa's own chunker, batches of `--batch`), `question_ms` (one short MTRAG question
at a time: p50/p95, what the gateway pays per query), and `cosine_to_reference` (min/mean over
every chunk and question, against st_fp32: the space-compatibility bar is min >= 0.999).
`memo_hit` is the cost of a question answered by adapters/embedder/memo.py's LRU.

    nice python scripts/bench_embed.py [--smoke] [--out benchmarks/embed.json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402  (scripts/ is not a package)

BACKENDS = ("st_fp32", "st_bf16", "onnx_fp32", "onnx_fp32_1t", "onnx_int8")
REFERENCE = "st_fp32"
CHUNK_SIZE, CHUNK_OVERLAP = 900, 150  # [site] chunk_size / chunk_overlap defaults


def open_backend(name: str) -> Any:
    if name.startswith("st_"):
        from hansa.adapters.embedder.sentence_transformers import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(precision=name[3:], batch_size=BATCH)
    from hansa.adapters.embedder.onnx import OnnxEmbedder

    variant, _, threads = name[5:].partition("_")
    model = "all-MiniLM-L6-v2" if variant == "fp32" else "all-MiniLM-L6-v2-q"  # the catalog's graphs
    return OnnxEmbedder(model, batch_size=BATCH, threads=int(threads.rstrip("t") or 0))


BATCH = int(os.environ.get("HANSA_BENCH_EMBED_BATCH", "64"))


def p95(samples_s: Sequence[float]) -> float:
    return round(float(np.percentile(np.asarray(samples_s) * 1000.0, 95)), 4)


def worker(name: str, data_path: Path, out_dir: Path) -> None:
    """One backend in this fresh process: prints its measurements as JSON, saves its vectors."""
    data = json.loads(data_path.read_text(encoding="utf-8"))
    chunks, questions = data["chunks"], data["questions"]
    start = time.perf_counter()
    embedder = open_backend(name)
    embedder.embed(["warm-up: the first vector loads the model"])
    startup = time.perf_counter() - start
    rss = benchlib.mib(benchlib.rss_bytes())
    budget = data["budget_s"]
    parts: list[np.ndarray] = []
    with benchlib.Stopwatch() as sw:  # whole batches until the budget is spent: slow backends still finish
        for start in range(0, len(chunks), BATCH):
            parts.append(embedder.embed(chunks[start:start + BATCH]))
            if sw.elapsed >= budget:
                break
    chunk_vectors = np.concatenate(parts)
    samples = benchlib.time_each(embedder.embed_one, questions, warmup=3, budget_s=budget / 2, min_calls=10)
    question_vectors = embedder.embed(questions)
    np.save(out_dir / f"{name}.chunks.npy", chunk_vectors)
    np.save(out_dir / f"{name}.questions.npy", question_vectors)
    result: dict[str, Any] = {
        "startup_s": round(startup, 3),
        "rss_mib": round(rss, 1),
        "peak_rss_mib": round(benchlib.mib(benchlib.peak_rss_bytes()), 1),
        "chunks": len(chunk_vectors),
        "chunks_seconds": round(sw.elapsed, 3),
        "chunks_per_s": round(benchlib.rate(len(chunk_vectors), sw.elapsed), 2),
        "question_ms": {**benchlib.percentiles(samples), "p95_ms": p95(samples)},
        "torch_imported": "torch" in sys.modules,
    }
    if name == "onnx_fp32":  # the memo in front of the default backend: what a repeated question costs
        from hansa.adapters.embedder.memo import MemoEmbedder

        memo = MemoEmbedder(embedder, maxsize=4096)
        memo.embed(questions)
        hits = benchlib.time_each(memo.embed_one, questions * max(1, 2000 // len(questions)), warmup=10)
        result["memo_hit_ms"] = {**benchlib.percentiles(hits), "p95_ms": p95(hits)}
    print(json.dumps(result))


def load_texts(n_chunks: int, n_questions: int) -> tuple[list[str], list[str]]:
    from hansa.plugin.chunking import chunk_text

    chunks: list[str] = []
    for passage in benchlib.mtrag_passages():
        chunks.extend(c.text for c in chunk_text(passage.id, passage.text, CHUNK_SIZE, CHUNK_OVERLAP))
        if len(chunks) >= n_chunks:
            break
    questions = [q for q in benchlib.mtrag_questions() if 0 < len(q) <= 200][:n_questions]
    return chunks[:n_chunks], questions


def main(argv: Sequence[str] | None = None) -> int:
    p = benchlib.parser("embed", __doc__.split("\n\n")[0])
    p.add_argument("--chunks", type=int, default=512, help="900-character chunks embedded per backend (default 512)")
    p.add_argument("--questions", type=int, default=200, help="short questions timed one at a time (default 200)")
    p.add_argument("--budget", type=float, default=120.0,
                   help="seconds of chunk embedding per backend (whole batches; questions get half of it; default 120)")
    p.add_argument("--backends", default=",".join(BACKENDS), help=f"comma-separated subset of {','.join(BACKENDS)}")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--data", type=Path, default=None, help=argparse.SUPPRESS)
    p.add_argument("--vectors", type=Path, default=None, help=argparse.SUPPRESS)
    args = benchlib.parse(p, list(argv) if argv is not None else None)
    if args.worker:
        worker(args.worker, args.data, args.vectors)
        return 0
    if args.smoke:
        args.chunks, args.questions, args.budget = 8, 6, 10.0
    backends = [b for b in args.backends.split(",") if b]
    unknown = set(backends) - set(BACKENDS)
    if unknown or REFERENCE not in backends:
        p.error(f"--backends: unknown {sorted(unknown)} (the reference {REFERENCE} must be included)")

    from hansa.adapters.embedder.sentence_transformers import cpu_has_native_bf16

    report = benchlib.Report("embed", args.smoke, libraries=("torch", "sentence-transformers", "onnxruntime", "tokenizers"))
    chunks, questions = load_texts(args.chunks, args.questions)
    report.params.update(chunks=len(chunks), questions=len(questions), batch_size=BATCH, chunk_size=CHUNK_SIZE,
                         mean_chunk_chars=round(float(np.mean([len(c) for c in chunks])), 1),
                         mean_question_chars=round(float(np.mean([len(q) for q in questions])), 1),
                         backends=backends, budget_s=args.budget, nice=os.nice(0))
    report.note("the machine is shared (2 cores, up to 8 concurrent sessions): every figure is under that load; "
                "compare backends within this run, not with other runs. Run under `nice`.")
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-embed-") as tmp:
        data_path = Path(tmp) / "texts.json"
        data_path.write_text(json.dumps({"chunks": chunks, "questions": questions, "budget_s": args.budget}), encoding="utf-8")
        for name in backends:
            benchlib.progress(f"{name}: {len(chunks)} chunks, {len(questions)} questions, in a fresh process")
            proc = subprocess.run(
                [sys.executable, __file__, "--worker", name, "--data", str(data_path), "--vectors", tmp],
                capture_output=True, text=True, timeout=3600,
            )
            if proc.returncode != 0:
                results[name] = {"skipped": f"worker failed: {proc.stderr.strip()[-800:]}"}
                report.note(f"{name} failed: see results.{name}.skipped")
                continue
            results[name] = json.loads(proc.stdout.strip().splitlines()[-1])
        for name in backends:
            cosines = []
            for part in ("chunks", "questions"):
                path, ref = Path(tmp) / f"{name}.{part}.npy", Path(tmp) / f"{REFERENCE}.{part}.npy"
                if path.is_file() and ref.is_file():
                    a, b = np.load(path), np.load(ref)
                    n = min(len(a), len(b))  # chunks: the prefix both backends embedded within the budget
                    cosines.append(np.sum(a[:n] * b[:n], axis=1))
            if cosines:
                both = np.concatenate(cosines)
                results[name]["cosine_to_reference"] = {"n": int(both.size), "min": round(float(both.min()), 7),
                                                        "mean": round(float(both.mean()), 7)}
    report.results["backends"] = results
    report.results["cpu_native_bf16"] = cpu_has_native_bf16()

    def value(name: str, *keys: str) -> float | None:
        node: Any = results.get(name, {})
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
        return node

    same_space = [n for n in backends if (value(n, "cosine_to_reference", "min") or 0) >= 0.999]
    fastest = max(same_space, key=lambda n: value(n, "chunks_per_s") or 0)
    quickest = min(same_space, key=lambda n: value(n, "question_ms", "p50_ms") or float("inf"))
    report.results["same_space"] = same_space
    report.results["fastest_chunks"] = fastest
    report.results["fastest_question"] = quickest
    for name in backends:
        if name != REFERENCE:
            report.ratios[f"{name}_chunks_per_s_vs_st_fp32"] = benchlib.ratio(value(name, "chunks_per_s"), value(REFERENCE, "chunks_per_s"))
            report.ratios[f"{name}_question_p50_speedup_vs_st_fp32"] = benchlib.ratio(
                value(REFERENCE, "question_ms", "p50_ms"), value(name, "question_ms", "p50_ms"))
            report.ratios[f"{name}_rss_vs_st_fp32"] = benchlib.ratio(value(name, "rss_mib"), value(REFERENCE, "rss_mib"))
    default_p50 = value("onnx_fp32", "question_ms", "p50_ms")
    report.target("gateway_question_embedding_p50_ms", "<= 5 ms total gateway overhead (issue 8); the question "
                  "embedding of the default backend alone", default_p50, None if default_p50 is None else default_p50 <= 5)
    hit = value("onnx_fp32", "memo_hit_ms", "p50_ms")
    report.target("memo_hit_p50_ms", "a repeated question costs well under 5 ms", hit, None if hit is None else hit <= 5)
    cos = value("onnx_fp32", "cosine_to_reference", "min")
    report.target("onnx_cosine_min", ">= 0.999 to the sentence-transformers vectors", cos, None if cos is None else cos >= 0.999)
    report.emit(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
