"""Fit an embedder's score scale (adapters/embedder/scales.toml) from the reference model's values.

Why: every cosine-scale constant hansa uses (answer margin, near-copy cosine, the overlap bonus, the
similarity-to-confidence map, the overclaim bound, the routing margins and the term blend's weight)
was fit on all-MiniLM-L6-v2's scores. Another model puts the same (question, sentence) pairs at other
cosines: bge-small-en-v1.5 scores unrelated text around 0.4-0.5 where MiniLM scores ~0.1. Refitting
each constant through the whole pipeline would take hours of evaluation per model; instead this
transports the reference values through the map between the two models' scores on the same pairs.

Data (the FIT split only, evaluation.split): SQuAD v1.1 **dev** questions (none seen by either model in
training) with the sentences of their gold paragraph, and MTRAG answerable questions with the
sentences of their gold passages; beside each question, sentences of NON_GOLD random other passages.
Both models embed the same questions (`embed_queries`) and sentences (`embed`) as sites do.

The map: a straight line `target = a + k * reference` through the quantile-quantile points (5th..95th
percentile) of the pooled cosines of the two models (a distribution match, so it does not shrink the
slope the way a regression of one model's cosine on the other's would). Absolute cosines
(conf_low, conf_high, duplicate_cosine, topic_floor) are mapped through the line; differences and weights in cosine
units (margins, overclaim, overlap bonus, lexical weight) are multiplied by k. Each map is checked
against the quantile it stands for: the JSON records, per absolute cosine, the share of pairs below it
under each model. Routing margins are then checked by routing-only runs (benchmarks/README.md).

    nice python scripts/fit_score_scale.py --model bge-small-en-v1.5-q --out benchmarks/score_scale_fit.json
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402  (scripts/ is not a package)

REFERENCE = "all-MiniLM-L6-v2"
NON_GOLD = 8  # sentences of other passages per question
QUANTILES = np.linspace(0.05, 0.95, 19)
ABSOLUTE = ("conf_low", "conf_high", "duplicate_cosine", "topic_floor")


def _sentences(text: str) -> list[str]:
    from hansa.plugin.answer_candidates import answer_sentences

    return [s for _, s in answer_sentences(text)]


def _pairs(questions: Sequence[Any], passages: dict[str, str], rng: random.Random) -> tuple[list[str], list[str], list[tuple[int, int, bool]]]:
    """(question texts, sentence texts, (question index, sentence index, gold?) pairs)."""
    ids = sorted(passages)
    sentences: list[str] = []
    where: dict[str, int] = {}
    pairs = []

    def index(text: str) -> int:
        if text not in where:
            where[text] = len(sentences)
            sentences.append(text)
        return where[text]

    for qi, q in enumerate(questions):
        for g in q.gold:
            for s in _sentences(passages[g]):
                pairs.append((qi, index(s), True))
        others = [s for pid in rng.sample(ids, 4) if pid not in q.gold for s in _sentences(passages[pid])]
        for s in rng.sample(others, min(NON_GOLD, len(others))):
            pairs.append((qi, index(s), False))
    return [q.text for q in questions], sentences, pairs


def load(n_squad: int, n_mtrag: int) -> dict[str, tuple[list[str], list[str], list[tuple[int, int, bool]]]]:
    from hansa.evaluation.datasets import stable_hash
    from hansa.evaluation.mtrag import load_dataset as load_mtrag
    from hansa.evaluation.split import select
    from hansa.evaluation.squad import load_passages, load_questions

    rng = random.Random(31)
    root = benchlib.dataset_dir("squad")
    dev = {p.id: p.text for p in load_passages(root)}  # gold paragraphs and the non-gold pool
    qs = [q for q in select(load_questions(root), "fit")
          if q.answerable and q.source.startswith("squad1.1-dev") and q.gold and all(g in dev for g in q.gold)]
    qs = sorted(qs, key=lambda q: stable_hash("fit-score-scale", q.id))[:n_squad]
    out = {"squad_dev": _pairs(qs, dev, rng)}
    mtrag = load_mtrag(benchlib.mtrag_dir())
    passages = {p.id: p.text for p in mtrag.passages}
    mq = [q for q in select(mtrag.questions, "fit") if q.answerable and q.gold and all(g in passages for g in q.gold)]
    mq = sorted(mq, key=lambda q: stable_hash("fit-score-scale", q.id))[:n_mtrag]
    out["mtrag"] = _pairs(mq, passages, rng)
    return out


def cosines(model: str, data: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(every pair's cosine, whether the pair is gold), pooled over the data sets."""
    from hansa.adapters.embedder.onnx import OnnxEmbedder

    embedder = OnnxEmbedder(model, batch_size=32)
    values, gold = [], []
    for questions, sentences, pairs in data.values():
        q = embedder.embed_queries(questions)
        s = embedder.embed(sentences)
        values += [float(q[a] @ s[b]) for a, b, _ in pairs]
        gold += [g for _, _, g in pairs]
    return np.asarray(values), np.asarray(gold)


def fit(reference: np.ndarray, target: np.ndarray) -> tuple[float, float]:
    """(a, k) of target = a + k * reference through the quantile-quantile points."""
    k, a = np.polyfit(np.quantile(reference, QUANTILES), np.quantile(target, QUANTILES), 1)
    return float(a), float(k)


def main(argv: Sequence[str] | None = None) -> int:
    from hansa.adapters.embedder.catalog import require_model
    from hansa.adapters.embedder.scale import ScoreScale, scale_for

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="catalog name of the model to fit")
    p.add_argument("--squad", type=int, default=300, help="SQuAD dev fit questions")
    p.add_argument("--mtrag", type=int, default=200, help="MTRAG fit questions")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    data = load(args.squad, args.mtrag)
    ref, gold = cosines(REFERENCE, data)
    tgt, _ = cosines(args.model, data)
    a, k = fit(ref, tgt)
    base = scale_for(require_model(REFERENCE).model_id)
    mapped = {name: round(a + k * getattr(base, name), 3) if name in ABSOLUTE else round(k * getattr(base, name), 3)
              for name in ScoreScale.numbers()}
    mapped["duplicate_cosine"] = min(mapped["duplicate_cosine"], 0.99)
    check = {name: {"reference_share_below": round(float(np.mean(ref < getattr(base, name))), 4),
                    "target_share_below": round(float(np.mean(tgt < mapped[name])), 4)} for name in ABSOLUTE}
    summary = {side: {"reference_median": round(float(np.median(ref[gold == g])), 4),
                      "target_median": round(float(np.median(tgt[gold == g])), 4)}
               for side, g in (("gold", True), ("non_gold", False))}
    report = {"reference": REFERENCE, "model": args.model, "split": "fit",
              "pairs": int(len(ref)), "gold_pairs": int(gold.sum()),
              "questions": {name: len(d[0]) for name, d in data.items()},
              "line": {"a": round(a, 4), "k": round(k, 4)}, "medians": summary,
              "reference_scale": {n: getattr(base, n) for n in ScoreScale.numbers()},
              "mapped_scale": mapped, "absolute_checks": check,
              "command": "nice python scripts/fit_score_scale.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
