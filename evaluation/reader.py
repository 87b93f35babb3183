"""The reader measured as a reader: SQuAD 2.0 dev, each question against the paragraph it was
written on, scored with the official rules (an unanswerable question is right only when the
prediction is empty; EM and token F1 otherwise).

    python -m hansa.evaluation.reader MODEL_DIR --squad ../shared/datasets/squad [--limit N] [--write]

Prediction: the reader reads every sentence of the paragraph; the best sentence's span is the
answer when its score reaches the threshold, else no answer. The threshold is chosen on the
*fit* part of the dev questions (evaluation.split: the hash split every table uses) to maximize F1,
and the figures are reported on the *report* part (and, for comparison with published readers, on
all 11,873). Stage one (evaluation/reader_pairs.py) reads v1.1 train articles only; stage two
(evaluation/reader_contrast.py) also trains on the fit questions of half the dev articles, so those
questions fit nothing here, and `held_out_*` reports the report questions of the other half, whose
paragraphs training never read.

With `--write`, the model directory's `reader.json` (files, sha256, token cap, calibration) and
model card `README.md` are written from the measurement: the graph shipped is the int8 one when it
stays within INT8_TOLERANCE F1 of the fp32 one on the same questions (fp32 is read on a sample of
`--fp32-limit` of them: reading all of SQuAD 2.0 dev twice costs ~10 minutes on two cores).
"""
from __future__ import annotations

import argparse
import functools
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from hansa.core.files import file_sha256
from hansa.evaluation.reader_contrast import read_in_training, trainable_article
from hansa.evaluation.reader_pairs import Paragraph, load_paragraphs, load_questions
from hansa.evaluation.metrics import exact_match, token_f1
from hansa.evaluation.split import sample, split_of

SOURCES = ("squad1.1-dev+squad2.0-dev", "squad2.0-dev")  # the 11,873 SQuAD 2.0 dev questions
INT8_TOLERANCE = 0.01
OFF_TOPIC_QUESTIONS = 600  # report-split answerable questions the off-topic figure reads (4 sentences each)
OFF_TOPIC_PER_QUESTION = 4
FLOOR_ANSWERED = 0.92  # the gateway's floor answers this share of answerable fit questions (target 0.90)


@dataclass(frozen=True)
class Read:
    id: str
    doc_id: str  # the article of the paragraph it was read against
    answerable: bool
    answers: tuple[str, ...]
    score: float  # the best sentence's reader score
    span: str
    sentence_holds_answer: bool  # the best sentence holds a reference answer (answerable only)


def _sample_rows(rows: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    if not limit:
        return rows
    from hansa.evaluation.datasets import Question

    by_id = {r["id"]: r for r in rows}
    return [by_id[q.id] for q in sample([Question(r["id"], r["question"]) for r in rows], limit)]


@functools.lru_cache(maxsize=2)
def _squad(squad_dir: Path) -> tuple[dict[str, Paragraph], tuple[dict[str, Any], ...]]:
    """SQuAD's paragraphs and questions, read once per directory: one measurement reads them for
    its figures (`read_all`, then `off_topic`), and parsing them is seconds each time."""
    return load_paragraphs(squad_dir), tuple(load_questions(squad_dir))


def read_all(reader: Any, squad_dir: Path, limit: int = 0, progress: bool = True,
             keep: Callable[[dict[str, Any]], bool] = lambda row: True) -> tuple[list[Read], float]:
    """Each SQuAD 2.0 dev question (those `keep` accepts) read against its paragraph."""
    paragraphs, questions = _squad(squad_dir)
    rows = _sample_rows([r for r in questions if r["source"] in SOURCES and keep(r)], limit)
    out: list[Read] = []
    pairs = 0
    t0 = time.perf_counter()
    for n, r in enumerate(rows):
        para = paragraphs[r["gold_passages"][0] if r["answerable"] else r["context_passage"]]
        readings = reader.read(r["question"], list(para.sentences))
        pairs += len(readings)
        best = int(np.argmax([x.score for x in readings])) if readings else -1
        hit = best >= 0 and any(a and a in para.sentences[best] for a in r["answers"])
        out.append(Read(r["id"], para.doc_id, bool(r["answerable"]), tuple(r["answers"]), readings[best].score if best >= 0 else 0.0,
                        readings[best].span if best >= 0 else "", bool(r["answerable"] and hit)))
        if progress and n % 1000 == 999:
            print(f"  read {n + 1}/{len(rows)} questions", flush=True)
    seconds = time.perf_counter() - t0
    return out, pairs / seconds if seconds else 0.0


def scores(reads: Sequence[Read], threshold: float) -> dict[str, float]:
    """Official SQuAD 2.0 EM/F1 (overall, HasAns, NoAns) at `threshold`."""
    em, f1, has, no = [], [], [], []
    for r in reads:
        pred = r.span if r.score >= threshold else ""
        if r.answerable:
            e, f = (exact_match(pred, r.answers), token_f1(pred, r.answers)) if pred else (0.0, 0.0)
            has.append(f)
        else:
            e = f = float(pred == "")
            no.append(f)
        em.append(e)
        f1.append(f)
    mean = lambda xs: round(float(np.mean(xs)), 4) if xs else 0.0  # noqa: E731
    answered = [r.score >= threshold for r in reads if r.answerable]
    return {"questions": len(reads), "exact": mean(em), "f1": mean(f1), "has_ans_f1": mean(has),
            "no_ans_accuracy": mean(no), "answered_answerable": mean(answered),
            "answer_sentence_accuracy": mean([r.sentence_holds_answer for r in reads if r.answerable])}


def best_threshold(reads: Sequence[Read]) -> float:
    """The threshold maximizing F1 on `reads` (the fit part)."""
    grid = sorted({round(r.score, 3) for r in reads} | {0.0, 1.01})
    return max(grid, key=lambda t: (scores(reads, t)["f1"], -t))


def floor_for_answered(reads: Sequence[Read], share: float) -> float:
    """The highest threshold that still answers `share` of the answerable questions in `reads`."""
    best = sorted((r.score for r in reads if r.answerable), reverse=True)
    return float(best[max(1, int(np.ceil(share * len(best)))) - 1]) if best else 0.0


def measure(reader: Any, squad_dir: Path, limit: int = 0) -> dict[str, Any]:
    """SQuAD 2.0's own figures at the max-F1 threshold (`threshold_fit`), and the figures at the
    gateway's floor (`floor_fit`: answering FLOOR_ANSWERED of the fit part's answerable questions,
    the target's 0.90 with the calibration's margin), both chosen on the fit part."""
    from hansa.evaluation.metrics import auroc

    reads, rate = read_all(reader, squad_dir, limit)
    fit = [r for r in reads if split_of(r.id) == "fit" and not read_in_training(r.id, r.doc_id)]
    report = [r for r in reads if split_of(r.id) == "report"]
    held_out = [r for r in report if not trainable_article(r.doc_id)]
    threshold = best_threshold(fit)
    floor = floor_for_answered(fit, FLOOR_ANSWERED)
    return {"threshold_fit": threshold, "fit": scores(fit, threshold), "report": scores(report, threshold),
            "all": scores(reads, threshold), "floor_fit": round(floor, 6), "report_at_floor": scores(report, floor),
            "held_out_at_floor": scores(held_out, floor),
            "report_answer_all": scores(report, 0.0),  # the span's quality alone: every question answered
            "report_auroc": auroc([r.score for r in report], [r.answerable for r in report]),
            "held_out_auroc": auroc([r.score for r in held_out], [r.answerable for r in held_out]),
            "off_topic": off_topic(reader, squad_dir, [r for r in report if r.answerable], floor),
            "pairs_per_s": round(rate, 1), "reads": reads}


def off_topic(reader: Any, squad_dir: Path, answerable: Sequence[Read], floor: float) -> dict[str, Any]:
    """How the reader scores filler: for OFF_TOPIC_QUESTIONS report-split answerable questions, the
    OFF_TOPIC_PER_QUESTION sentences of *other* dev articles sharing the most words with the question
    (reader_contrast.off_topic_sentences, what a site sends beside its answer when the question is
    not its topic), against the question's best sentence of its own paragraph: their AUROC, and the
    share of such sentences at or above the gateway's floor (each would fill an answer slot)."""
    import random

    from hansa.evaluation.metrics import auroc
    from hansa.evaluation.reader_contrast import off_topic_sentences

    paragraphs, questions = _squad(squad_dir)
    rows = {r["id"]: r for r in questions}
    dev_docs = {paragraphs[r["context_passage"] or r["gold_passages"][0]].doc_id for r in rows.values()
                if r["source"] in SOURCES and (r["context_passage"] or r["gold_passages"])}
    pool = [p for p in paragraphs.values() if p.doc_id in dev_docs and p.sentences]
    rng = random.Random(OFF_TOPIC_QUESTIONS)
    best, filler = [], []
    for r in sorted(answerable, key=lambda r: r.id)[:OFF_TOPIC_QUESTIONS]:
        text = rows[r.id]["question"]
        sentences = off_topic_sentences(text, r.doc_id, pool, OFF_TOPIC_PER_QUESTION, rng)
        best.append(r.score)
        filler += [x.score for x in reader.read(text, sentences)]
    return {"questions": len(best), "sentences": len(filler),
            "auroc": auroc(best + filler, [True] * len(best) + [False] * len(filler)),
            "share_at_floor": round(float(np.mean([s >= floor for s in filler])), 4) if filler else None,
            "mean": round(float(np.mean(filler)), 4) if filler else None}


def _entry(path: Path) -> dict[str, Any]:
    return {"file": path.name, "sha256": file_sha256(path), "size": path.stat().st_size}


def write_model(model_dir: Path, squad_dir: Path, limit: int, fp32_limit: int = 3000) -> dict[str, Any]:
    """Measure int8 (on `limit` questions) and fp32 (on a sample of `fp32_limit`), choose, and write
    reader.json and README.md into `model_dir`."""
    from hansa.evaluation.reader_card import card_text
    from hansa.adapters.reader.onnx import META, OnnxReader

    train = json.loads((model_dir / "train.json").read_text())
    results: dict[str, Any] = {}
    for variant, n in (("reader-int8.onnx", limit), ("reader.onnx", min(limit, fp32_limit) if limit else fp32_limit)):
        path = model_dir / variant
        if not path.is_file():
            continue
        meta = {"name": "hansa-reader-minilm-l6", "graph": _entry(path), "tokenizer": _entry(model_dir / "tokenizer.json"),
                "max_length": train["args"]["max_length"]}
        (model_dir / META).write_text(json.dumps(meta, indent=1) + "\n")
        print(f"measuring {variant} on {n or 'all'} questions", flush=True)
        results[variant] = measure(OnnxReader(model_dir), squad_dir, n)
    int8, fp32 = results.get("reader-int8.onnx"), results.get("reader.onnx")
    same = None
    if int8 and fp32:  # int8 on fp32's questions, at fp32's threshold: the like-for-like comparison
        ids = {r.id for r in fp32["reads"]}
        same = scores([r for r in int8["reads"] if r.id in ids and split_of(r.id) == "report"], fp32["threshold_fit"])
    chosen = "reader-int8.onnx" if int8 and (not fp32 or same["f1"] >= fp32["report"]["f1"] - INT8_TOLERANCE) \
        else "reader.onnx"
    best = results[chosen]
    meta = {"name": "hansa-reader-minilm-l6", "graph": _entry(model_dir / chosen),
            "tokenizer": _entry(model_dir / "tokenizer.json"), "max_length": train["args"]["max_length"],
            "calibration": {"floor": best["floor_fit"],
                            "fit": f"SQuAD 2.0 dev, fit split: answers {FLOOR_ANSWERED} of answerable questions"}}
    (model_dir / META).write_text(json.dumps(meta, indent=1) + "\n")
    summary = {v: {k: r[k] for k in ("threshold_fit", "fit", "report", "all", "floor_fit", "report_at_floor",
                                     "held_out_at_floor", "report_answer_all", "report_auroc", "held_out_auroc",
                                     "off_topic", "pairs_per_s")} for v, r in results.items()}
    if same is not None:
        summary["reader-int8.onnx"]["report_on_fp32_sample"] = same
    (model_dir / "README.md").write_text(card_text(meta, train, summary, chosen, limit))
    return {"chosen": chosen, "results": summary}


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir", help="a reader model directory (reader.json; with --write: train.json and the graphs)")
    ap.add_argument("--squad", required=True, help="the SQuAD folder")
    ap.add_argument("--limit", type=int, default=0, help="questions sampled (stable hash order; 0: all 11,873)")
    ap.add_argument("--write", action="store_true", help="choose fp32/int8, write reader.json and the model card")
    ap.add_argument("--fp32-limit", type=int, default=3000, help="with --write: questions the fp32 graph is read on")
    ap.add_argument("--json", default="", help="also write the figures here")
    args = ap.parse_args(argv)
    if args.write:
        out = write_model(Path(args.model_dir), Path(args.squad), args.limit, args.fp32_limit)
    else:
        from hansa.adapters.reader.onnx import OnnxReader

        got = measure(OnnxReader(args.model_dir), Path(args.squad), args.limit)
        out = {k: v for k, v in got.items() if k != "reads"}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
