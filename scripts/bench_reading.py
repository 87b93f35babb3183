"""What reading costs the gateway: one question's pool of candidate sentences read by the packaged reader.

Why: the reader is the gateway's default judge of answers (gateway/query/reading.py), and it reads
on the query path, so its time is part of every answer's latency; the target is reading <= 50 ms
p50 for <= 20 sentences at the gateway. `hansa eval` reports reading time too, but with questions in
flight and sites sharing the cores; this measures reading alone, one question at a time, as a
quiet gateway sees it.

Each question (SQuAD dev, report split, answerable; CC BY-SA 4.0) is read against its gold
paragraph's sentences followed by the sentences of other paragraphs of its article, cut to the pool
size (`[gateway] reader_pool`, default 12): real candidate lengths, as fusion hands them over. Pool
sizes and ONNX Runtime thread counts are interleaved question by question in one process, so load
changes hit every variant alike.

    nice python scripts/bench_reading.py [--smoke] [--questions 200] [--out benchmarks/reading.json]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402  (scripts/ is not a package)

POOLS = (8, 12, 16, 20)
TARGET_MS = 50.0


def question_pools(n_questions: int, size: int) -> list[tuple[str, list[str]]]:
    """(question, `size` candidate sentences) for the first report-split answerable dev questions."""
    from hansa.core.sentences import split_sentences
    from hansa.evaluation.split import select
    from hansa.evaluation.squad import load_passages, load_questions

    root = benchlib.dataset_dir("squad")
    passages = load_passages(root)
    by_id = {p.id: p for p in passages}
    by_doc: dict[str, list[Any]] = {}
    for p in passages:
        by_doc.setdefault(p.id.split("#")[0], []).append(p)
    questions = [q for q in select(load_questions(root), "report")
                 if q.answerable and q.gold and q.source.startswith("squad1.1-dev")]
    pools = []
    for q in questions[:n_questions]:
        gold = by_id[q.gold[0]]
        sentences = split_sentences(gold.text)
        for other in by_doc[gold.id.split("#")[0]]:
            if len(sentences) >= size:
                break
            if other.id != gold.id:
                sentences += split_sentences(other.text)
        pools.append((q.text, sentences[:size]))
    return pools


def main() -> None:
    p = benchlib.parser("reading", __doc__.splitlines()[0])
    p.add_argument("--questions", type=int, default=200, help="questions timed per variant (smoke: 6)")
    args = benchlib.parse(p)
    from hansa.adapters.reader.onnx import OnnxReader

    n = 6 if args.smoke else args.questions
    pools = (8, 12) if args.smoke else POOLS
    report = benchlib.Report("reading", args.smoke, libraries=("onnxruntime", "tokenizers", "numpy"))
    report.params = {"questions": n, "pool_sizes": list(pools), "reader": "packaged",
                     "data": "SQuAD v1.1 dev, report split, answerable (CC BY-SA 4.0)",
                     "order": "variants interleaved question by question, one question at a time"}
    candidates = question_pools(n, max(pools))
    readers = {"ort_default_threads": OnnxReader(), "one_thread": OnnxReader(threads=1)}
    for reader in readers.values():  # load graphs and tokenizer before timing
        reader.read(candidates[0][0], candidates[0][1])
    samples: dict[tuple[str, int], list[float]] = {(name, size): [] for name in readers for size in pools}
    tokens: list[int] = []
    for question, sentences in candidates:
        tokens.append(sum(len(s.split()) for s in sentences[:12]))
        for size in pools:
            for name, reader in readers.items():
                start = time.perf_counter()
                reader.read(question, sentences[:size])
                samples[(name, size)].append(time.perf_counter() - start)
    rows = [{"threads": name, "pool": size, **benchlib.percentiles(s)} for (name, size), s in samples.items()]
    report.results = {"variants": rows, "words_per_12_sentences_mean": round(sum(tokens) / len(tokens), 1),
                      "reader_sha256": readers["one_thread"].model_sha256}
    default = next(r for r in rows if r["threads"] == "ort_default_threads" and r["pool"] == 12)
    widest = next(r for r in rows if r["threads"] == "ort_default_threads" and r["pool"] == max(pools))
    report.ratios = {"pool_max_vs_12_p50": benchlib.ratio(widest["p50_ms"], default["p50_ms"])}
    report.target("reading_p50_ms_default_pool", f"<= {TARGET_MS:g} ms p50 (pool 12, the default)",
                  default["p50_ms"], default["p50_ms"] <= TARGET_MS)
    report.target("reading_p50_ms_max_pool", f"<= {TARGET_MS:g} ms p50 for <= 20 sentences",
                  widest["p50_ms"], widest["p50_ms"] <= TARGET_MS)
    report.note("reading alone: no sites, no other question in flight; `hansa eval` reports reading_ms_p50 "
                "under its own concurrent load beside this")
    report.emit(args.out)


if __name__ == "__main__":
    main()
