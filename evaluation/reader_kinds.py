"""The reader's floor per kind of question, fit on the fit split, written into its calibration.

    python -m hansa.evaluation.reader_kinds [MODEL_DIR] --squad ../shared/datasets/squad \\
        --mtrag ../shared/datasets/mtrag [--write] [--json FILE]

Why: one floor fit on SQuAD's factoid questions (evaluation/reader.py) refuses descriptive answers —
the reader, trained on SQuAD, scores the sentences that say what an agency does or how to appeal low
(gateway/query/reading.py). So each kind gets its own floor: for each corpus, the highest
best-sentence score that still answers the kind's share (SHARES) of that corpus's answerable *fit*
questions of the kind, each read against its gold text (as the single floor was); the kind's floor
is the lowest of these, so that it answers its share in every corpus:
- SQuAD 2.0 dev fit questions, against the paragraph each was written on;
- MTRAG fit questions (answerable or partial), against the sentences of their gold passages.
The figures beside the floors (answered share per corpus, kind and split) are what the card shows;
MTRAG's report split is read too (it is small); SQuAD's report split is measured through the
federation (`hansa eval`, benchmarks/README.md) rather than read here a second time.

With `--write`, `reader.json`'s calibration gains `floors` {kind: floor} (its `floor` stays: the
gateway uses it for a kind without one) and the model card a section between CARD_BEGIN and CARD_END.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from hansa.evaluation.reader import FLOOR_ANSWERED, floor_for_answered
from hansa.evaluation.reader_card import write_calibration
from hansa.evaluation.split import split_of
from hansa.gateway.query.reading import DESCRIPTIVE, FACTOID, KINDS, question_kind

# The share of each kind's answerable fit questions its floor answers. Factoid: the single floor's
# 0.92 (target: answer >= 0.90 while abstaining). Descriptive: 0.98, what a gateway without the
# reader answers of MTRAG's answerable questions (0.992) less a point: this reader, trained on
# SQuAD's factoid questions, barely separates a descriptive answer from a non-answer, so its floor
# there must not abstain where the gateway answers today.
SHARES = {FACTOID: FLOOR_ANSWERED, DESCRIPTIVE: 0.98}
CARD_BEGIN = "<!-- floors per kind: evaluation/reader_kinds.py -->"
CARD_END = "<!-- end floors per kind -->"
MTRAG_ANSWERED = ("answerable", "partial")  # MTRAG-UN kinds whose gold passages hold the answer


def squad_best(reader: Any, squad_dir: Path) -> list[dict[str, Any]]:
    """SQuAD 2.0 dev fit questions no training stage read: id, kind, answerable, best sentence score."""
    from hansa.evaluation.reader import read_all
    from hansa.evaluation.reader_contrast import read_in_training
    from hansa.evaluation.reader_pairs import load_questions

    text = {r["id"]: r["question"] for r in load_questions(squad_dir)}
    reads, _ = read_all(reader, squad_dir, keep=lambda r: split_of(r["id"]) == "fit")
    return [{"dataset": "squad", "split": "fit", "kind": question_kind(text[r.id]), "answerable": r.answerable,
             "score": r.score} for r in reads if not read_in_training(r.id, r.doc_id)]  # trained on: fits nothing


def mtrag_best(reader: Any, mtrag_dir: Path) -> list[dict[str, Any]]:
    """MTRAG questions whose gold passages answer them (both splits): the best gold sentence's score."""
    from hansa.evaluation.datasets import load_dataset
    from hansa.evaluation.reader_pairs import sentences_of

    data = load_dataset("mtrag", mtrag_dir)
    passages = {p.id: p for p in data.passages}
    out = []
    for q in data.questions:
        sentences = [s for pid in q.gold if pid in passages for s in sentences_of(passages[pid].text)]
        if q.kind not in MTRAG_ANSWERED or not sentences:
            continue
        score = max(r.score for r in reader.read(q.text, sentences))
        out.append({"dataset": "mtrag", "split": split_of(q.id), "kind": question_kind(q.text), "answerable": True,
                    "score": score})
    return out


class _Best:
    """floor_for_answered reads `.answerable` and `.score`."""

    def __init__(self, row: Mapping[str, Any]) -> None:
        self.answerable, self.score = bool(row["answerable"]), float(row["score"])


def fit_floors(rows: Sequence[Mapping[str, Any]], shares: Mapping[str, float] = SHARES) -> dict[str, float]:
    """Each kind's floor: the lowest over the datasets of the floor answering its share (SHARES) of
    that dataset's answerable fit questions of the kind, so that it answers that share in each corpus."""
    fit = [r for r in rows if r["split"] == "fit"]
    datasets = sorted({r["dataset"] for r in fit})
    out = {}
    for kind in KINDS:
        per = [floor_for_answered([_Best(r) for r in fit if r["kind"] == kind and r["dataset"] == d], shares[kind])
               for d in datasets if any(r["kind"] == kind and r["dataset"] == d and r["answerable"] for r in fit)]
        out[kind] = round(min(per), 6) if per else 0.0
    return out


def answered_table(rows: Iterable[Mapping[str, Any]], floors: Mapping[str, float], single: float) -> list[dict[str, Any]]:
    """Per dataset, split and kind: answerable questions, and the share answered at the kind's floor
    and at the single floor."""
    groups: dict[tuple[str, str, str], list[float]] = {}
    for r in rows:
        if r["answerable"]:
            groups.setdefault((r["dataset"], r["split"], r["kind"]), []).append(float(r["score"]))
    return [{"dataset": d, "split": s, "kind": k, "answerable": len(v),
             "answered_at_kind_floor": round(float(np.mean([x >= floors[k] for x in v])), 4),
             "answered_at_single_floor": round(float(np.mean([x >= single for x in v])), 4)}
            for (d, s, k), v in sorted(groups.items())]


RELATIVE_FIT = ("chosen by `hansa eval --dataset squad --sites 16 --site-setting chunks_per_summary=64 --max-documents 100 "
                "--question-source dev --split fit --strategies hansa --limit 200 --limit-unanswerable 150 --gateway-setting "
                "reader=DIR --gateway-setting reader_relative_floor=S` over S in 0.5/0.65/0.8: the lowest off-topic sentence "
                "share whose answer F1 is within 0.005 of the previous reader's (benchmarks/README.md, \"The reader\")")


def card_section(floors: Mapping[str, float], single: float, table: Sequence[Mapping[str, Any]],
                 relative: float | None = None, relative_fit: str = RELATIVE_FIT) -> str:
    lines = [CARD_BEGIN, "## Floors per kind of question", "",
             "The gateway's floor depends on what the question asks for (gateway/query/reading.py: a small "
             "lexical rule; \"who/when/which/how many/what is the X of Y\" is factoid, \"what does X do/how/why/"
             "explain/tell me/can I ...\" and bare topics are descriptive). Each kind's floor is the lowest, over "
             "SQuAD 2.0 dev and MTRAG (answerable and partial questions), of the highest best-sentence score that "
             f"still answers {SHARES[FACTOID]} (factoid) or {SHARES[DESCRIPTIVE]} (descriptive) of the corpus's "
             "answerable **fit** questions of that kind, each read against its gold text. Command: `python -m hansa.evaluation.reader_kinds DIR --squad "
             "../shared/datasets/squad --mtrag ../shared/datasets/mtrag --write`.", "",
             f"- factoid floor **{floors[FACTOID]:.3f}**, descriptive floor **{floors[DESCRIPTIVE]:.3f}** "
             f"(the single floor: {single:.3f})", "",
             "| data | split | kind | answerable questions | answered at the kind's floor | answered at the single floor |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['dataset']} | {r['split']} | {r['kind']} | {r['answerable']} | {r['answered_at_kind_floor']:.3f} | "
              f"{r['answered_at_single_floor']:.3f} |" for r in table]
    if relative is not None:
        lines += ["", f"A further answer sentence must score at least **{relative}** of the best sentence's score "
                      f"(`calibration.relative`; {relative_fit})."]
    return "\n".join(lines + ["", CARD_END, ""])


def write(model_dir: Path, floors: Mapping[str, float], section: str, relative: float | None = None,
          relative_fit: str = RELATIVE_FIT) -> None:
    """reader.json's calibration gains `floors` (and `relative` when given); the card's section is
    replaced (or appended)."""
    calibration: dict[str, Any] = {"floors": dict(floors)}
    if relative is not None:
        calibration["relative"], calibration["relative_fit"] = relative, relative_fit
    calibration["floors_fit"] = (f"answers {SHARES[FACTOID]} (factoid) / {SHARES[DESCRIPTIVE]} (descriptive) of "
                                 "each kind's answerable fit questions of SQuAD 2.0 dev and of MTRAG "
                                 "(evaluation/reader_kinds.py)")
    write_calibration(model_dir, calibration, section, CARD_BEGIN, CARD_END)


def main(argv: Sequence[str] | None = None) -> None:
    from hansa.adapters.reader.onnx import PACKAGED_DIR, OnnxReader

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir", nargs="?", default=str(PACKAGED_DIR), help="a reader model directory (default: the packaged one)")
    ap.add_argument("--squad", required=True, help="the SQuAD folder")
    ap.add_argument("--mtrag", required=True, help="the MTRAG folder")
    ap.add_argument("--write", action="store_true", help="write the floors into reader.json and the model card")
    ap.add_argument("--json", default="", help="also write the figures here")
    ap.add_argument("--rows", default="", help="each question's best score: read from this file when it exists, "
                                                  "else written there (refitting without reading again)")
    ap.add_argument("--relative", type=float, default=None,
                    help="with --write: also write this share of the best sentence's score as the model's "
                         "`calibration.relative` (chosen on the fit split by hansa eval runs; see the card)")
    ap.add_argument("--relative-fit", default=RELATIVE_FIT,
                    help="with --relative: how that share was chosen, for the card (default: the fit-split runs it names)")
    args = ap.parse_args(argv)
    if args.relative is not None and not 0.0 <= args.relative <= 1.0:
        ap.error(f"--relative must lie in 0..1, not {args.relative}")
    reader = OnnxReader(args.model_dir)
    cached = Path(args.rows) if args.rows else None
    if cached is not None and cached.is_file():
        rows = [json.loads(line) for line in cached.read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        rows = squad_best(reader, Path(args.squad)) + mtrag_best(reader, Path(args.mtrag))
        if cached is not None:
            cached.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    floors = fit_floors(rows)
    single = float(reader.calibration.get("floor", 0.5))
    table = answered_table(rows, floors, single)
    out = {"floors": floors, "single_floor": single, "answered": table, "shares": SHARES}
    if args.write:
        relative = args.relative if args.relative is not None else reader.calibration.get("relative")  # kept on a refit
        how = args.relative_fit if args.relative is not None else reader.calibration.get("relative_fit", RELATIVE_FIT)
        write(Path(args.model_dir), floors, card_section(floors, single, table, relative, how), args.relative, how)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
