"""What reading costs the gateway: one question's pool of candidate sentences read by the packaged reader.

Why: the reader is the gateway's default judge of answers (gateway/query/reading.py), and it reads
on the query path, so its time is part of every answer's latency; the target is reading <= 50 ms
p50 for <= 20 sentences at the gateway. `hansa eval` reports reading time too, but with questions in
flight and sites sharing the cores; this measures reading alone, one question at a time, as a
quiet gateway sees it.

Each question (SQuAD dev, report split, answerable; CC BY-SA 4.0) is read against its gold
paragraph's sentences followed by the sentences of other paragraphs of its article, cut to the pool
size (`[gateway] reader_pool`, default 12): real candidate lengths, as fusion hands them over. Pool
sizes, ONNX Runtime thread counts and the two ways of batching are interleaved question by question
in one process, so load changes hit every variant alike: `padded`, the reader before micro-batches
(the whole pool in one batch padded to its longest pair), and `micro_batches`, the reader now
(runs of similar length, adapters/reader/onnx.py plan_batches).

The same run checks that micro-batches change what the reader decides no more than the company a
sentence is read in already did: the int8 graph quantizes each activation tensor with one scale,
so a pair's score moves with the other pairs (and the padding) of its batch. `agreement` compares
the two batchings' readings of each question's pool (ORT's default threads), and the padded reader
with itself at pool 8 and at the largest pool on the same 8 sentences (the shift that was there).

`--cap N` adds micro-batches at a token cap of N (below the model's 96) to the timings and the
quality; `--quality N` reads N sampled SQuAD 2.0 dev questions against their paragraphs with each
batching (evaluation/reader.py, official rules) and reports what each decides, side by side.

    nice python scripts/bench_reading.py [--smoke] [--questions 200] [--cap 64] [--quality 2000]
        [--out benchmarks/reading.json]
"""
from __future__ import annotations

import contextlib
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


def _agreement(pairs: list[tuple[str, list[Any], list[Any]]]) -> dict[str, float | int]:
    """How far two readers' readings of the same pools agree, in what the gateway uses of them: the
    score, the span, the best sentence and the sentences it accepts (score at least the floor of
    the question's kind and the relative share of the best: gateway/query/fusion.py)."""
    import numpy as np

    from hansa.gateway.query.reading import open_reading

    stage = open_reading("packaged")
    assert stage is not None
    diffs, spans, best, accepted, best_span = [], [], [], [], []
    for question, one, other in pairs:
        at = stage.for_question(question)
        diffs += [abs(a.score - b.score) for a, b in zip(one, other)]
        spans += [(a.start, a.end) == (b.start, b.end) for a, b in zip(one, other)]
        top = [int(np.argmax([r.score for r in got])) for got in (one, other)]
        best.append(top[0] == top[1])
        best_span.append(top[0] == top[1] and one[top[0]].span == other[top[1]].span)
        cuts = [max(at.floor, at.relative * max(r.score for r in got)) for got in (one, other)]
        accepted.append([a.score >= cuts[0] for a in one] == [b.score >= cuts[1] for b in other])
    share = lambda xs: round(float(np.mean(xs)), 4)  # noqa: E731
    return {"pools": len(pairs), "sentences": len(diffs), "score_abs_diff_max": round(float(np.max(diffs)), 4),
            "score_abs_diff_p99": round(float(np.quantile(diffs, 0.99)), 4),
            "score_abs_diff_mean": round(float(np.mean(diffs)), 4), "same_span_share": share(spans),
            "same_best_sentence_share": share(best), "same_best_sentence_and_span_share": share(best_span),
            "same_accepted_sentences_share": share(accepted)}


def _quality(readers: dict[str, Any], limit: int) -> dict[str, dict[str, Any]]:
    """Each batching's SQuAD 2.0 figures (evaluation.reader.measure: thresholds fit on the fit part,
    reported on the report part) and, at the packaged reader's shipped floor, what it answers and
    how often its answer is the padded reader's."""
    import numpy as np

    from hansa.evaluation.reader import measure, scores
    from hansa.evaluation.split import split_of

    out: dict[str, dict[str, Any]] = {}
    first: list[Any] = []
    for batching, reader in readers.items():
        start = time.perf_counter()
        with contextlib.redirect_stdout(sys.stderr):  # its progress lines; stdout carries the document
            got = measure(reader, benchlib.dataset_dir("squad"), limit)
        reads = got.pop("reads")
        floor = float(reader.calibration["floor"])
        row = {**got, "seconds": round(time.perf_counter() - start, 1), "shipped_floor": floor,
               "report_at_shipped_floor": scores([r for r in reads if split_of(r.id) == "report"], floor)}
        if first:
            decided = lambda r: r.span if r.score >= floor else None  # noqa: E731  (None: abstains)
            row["against_padded"] = {
                "same_answer_span": round(float(np.mean([a.span == b.span for a, b in zip(reads, first)])), 4),
                "same_answer_or_abstention_at_shipped_floor": round(float(np.mean(
                    [decided(a) == decided(b) for a, b in zip(reads, first)])), 4),
                "best_score_abs_diff_mean": round(float(np.mean([abs(a.score - b.score) for a, b in zip(reads, first)])), 4),
                "best_score_abs_diff_max": round(float(max(abs(a.score - b.score) for a, b in zip(reads, first))), 4)}
        else:
            first = reads
        out[batching] = row
    return out


def main() -> None:
    p = benchlib.parser("reading", __doc__.splitlines()[0])
    p.add_argument("--questions", type=int, default=200, help="questions timed per variant (smoke: 6)")
    p.add_argument("--cap", type=int, default=0, help="also micro-batches at this token cap (0: none)")
    p.add_argument("--quality", type=int, default=0, help="SQuAD 2.0 dev questions read per batching (smoke: 40)")
    args = benchlib.parse(p)
    from hansa.adapters.reader.onnx import PADDED_RUN_COST, RUN_COST_TOKENS, OnnxReader

    n = 6 if args.smoke else args.questions
    pools = (8, 12) if args.smoke else POOLS
    report = benchlib.Report("reading", args.smoke, libraries=("onnxruntime", "tokenizers", "numpy"))
    report.params = {"questions": n, "pool_sizes": list(pools), "reader": "packaged",
                     "batching": {"padded": "the pool in one batch padded to its longest pair (before)",
                                  "micro_batches": f"plan_batches, {RUN_COST_TOKENS} tokens' worth a run (now)"},
                     "data": "SQuAD v1.1 dev, report split, answerable (CC BY-SA 4.0)",
                     "order": "variants interleaved question by question, one question at a time"}
    candidates = question_pools(n, max(pools))
    batchings = {"padded": {"run_cost": PADDED_RUN_COST}, "micro_batches": {"run_cost": RUN_COST_TOKENS}}
    if args.cap:
        batchings[f"micro_batches_cap{args.cap}"] = {"run_cost": RUN_COST_TOKENS, "max_length": args.cap}
        report.params["batching"][f"micro_batches_cap{args.cap}"] = f"micro_batches, pairs cut at {args.cap} tokens"
    readers = {(threads, batching): OnnxReader(threads=count, **options)
               for threads, count in (("ort_default_threads", 0), ("one_thread", 1))
               for batching, options in batchings.items()}
    for reader in readers.values():  # load graphs and tokenizer before timing
        reader.read(candidates[0][0], candidates[0][1])
    samples: dict[tuple[str, str, int], list[float]] = {key + (size,): [] for key in readers for size in pools}
    compared: dict[str, list[tuple[str, list[Any], list[Any]]]] = {str(size): [] for size in pools}
    compared["padded_pool8_vs_padded_pool_max"] = []
    tokens: list[int] = []
    for question, sentences in candidates:
        tokens.append(sum(len(s.split()) for s in sentences[:12]))
        for size in pools:
            got = {}
            for key, reader in readers.items():
                start = time.perf_counter()
                got[key] = reader.read(question, sentences[:size])
                samples[key + (size,)].append(time.perf_counter() - start)
            compared[str(size)].append((question, got[("ort_default_threads", "padded")],
                                        got[("ort_default_threads", "micro_batches")]))
        compared["padded_pool8_vs_padded_pool_max"].append(
            (question, compared[str(pools[0])][-1][1], compared[str(max(pools))][-1][1][:pools[0]]))
    rows = [{"threads": threads, "batching": batching, "pool": size, **benchlib.percentiles(s)}
            for (threads, batching, size), s in samples.items()]
    report.results = {"variants": rows, "words_per_12_sentences_mean": round(sum(tokens) / len(tokens), 1),
                      "reader_sha256": readers[("one_thread", "padded")].model_sha256,
                      "agreement": {("padded_vs_micro_batches_pool_" + k if k.isdigit() else k): _agreement(v)
                                    for k, v in compared.items()}}

    def row(batching: str, size: int) -> dict[str, Any]:
        return next(r for r in rows if (r["threads"], r["batching"], r["pool"]) == ("ort_default_threads", batching, size))

    default, widest = row("micro_batches", 12), row("micro_batches", max(pools))
    report.ratios = {"pool_max_vs_12_p50": benchlib.ratio(widest["p50_ms"], default["p50_ms"]),
                     **{f"padded_vs_micro_batches_p50_pool_{size}": benchlib.ratio(row("padded", size)["p50_ms"],
                                                                                row("micro_batches", size)["p50_ms"])
                        for size in pools}}
    quality = 40 if args.smoke and not args.quality else args.quality
    if quality:
        report.params["quality"] = {"questions": quality, "data": "SQuAD 2.0 dev, sampled (evaluation/reader.py; CC BY-SA 4.0)"}
        report.results["quality"] = _quality({b: readers[("ort_default_threads", b)] for b in batchings}, quality)
    report.target("reading_p50_ms_default_pool", f"<= {TARGET_MS:g} ms p50 (pool 12, the default)",
                  default["p50_ms"], default["p50_ms"] <= TARGET_MS)
    report.target("reading_p50_ms_max_pool", f"<= {TARGET_MS:g} ms p50 for <= 20 sentences",
                  widest["p50_ms"], widest["p50_ms"] <= TARGET_MS)
    report.note("reading alone: no sites, no other question in flight; `hansa eval` reports reading_ms_p50 "
                "under its own concurrent load beside this")
    report.emit(args.out)


if __name__ == "__main__":
    main()
