"""The abstention after reading that ships in the reader's card, fit on fit-split reader rows.

    python -m hansa.evaluation.reader_abstain [MODEL_DIR] --data ROWS [--data ROWS ...] [--write] [--json FILE]

ROWS: reader rows of one federation's fit questions (`hansa eval --split fit --calibration-rows ROWS
--calibration-kinds reader`, with `--out-of-scope N` so that questions no site holds are among them).

Why a packaged one: a gateway fits its own calibration only when an operator collects labelled
rows, so a fresh gateway's only abstention after reading was the reader's floor, which refuses few
questions no site holds (benchmarks/README.md, "Abstention after reading"). A model fit on one
federation's rows reads features whose scale is that federation's (sites that answered, passages,
how routing spread) and refused an answerable question of a two-site federation. This one weighs
only features that do not grow with the federation (calibration.SCALE_FREE_FEATURES) and the
reader's score, fit on the rows of every data set given together; its threshold is the lowest of
the thresholds that answer `--min-answered` of each data set's answerable questions on its own, so
that it answers that share in every data set (as evaluation/reader_kinds.py does for the floors).

With `--write`, `reader.json`'s calibration gains `abstain` (the model; its `fit` names the reader's
sha256, the rows and the rule) and the model card a section between CARD_BEGIN and CARD_END. A
gateway whose own calibration holds a `read_abstain` for this reader uses that one instead.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from hansa.core.errors import InputError
from hansa.evaluation.datasets import OUT_OF_SCOPE_ID
from hansa.evaluation.reader_card import write_calibration
from hansa.gateway.query.calibrate import Row, fit_reader_abstain, read_rows, reader_abstain_threshold
from hansa.gateway.query.calibration import SCALE_FREE_FEATURES, LogisticModel

MIN_ANSWERED = 0.92  # the reader floor's share (evaluation/reader.py FLOOR_ANSWERED): answer >= 0.90 in use
CARD_BEGIN = "<!-- abstention after reading: evaluation/reader_abstain.py -->"
CARD_END = "<!-- end of abstention after reading -->"


def fit(data: Mapping[str, Sequence[Row]], model_sha256: str, min_answered: float = MIN_ANSWERED) -> LogisticModel:
    """One model over every data set's reader rows, at the lowest of the data sets' own thresholds."""
    rows = [r for rs in data.values() for r in rs if r.model == "reader"]
    shas = {r.site for r in rows}
    if shas != {model_sha256}:
        raise InputError(f"the rows were collected with reader(s) {sorted(shas)}, not this one ({model_sha256}): "
                         "collect them again with it")
    model = fit_reader_abstain(rows, min_answered, note="packaged: " + ", ".join(data), evidence=SCALE_FREE_FEATURES)
    if model is None:
        raise InputError("the rows cannot fit abstention after reading: they need answerable and unanswerable "
                         "questions with evidence, and served answers above --min-answered")
    per_set = [reader_abstain_threshold(model, rs, min_answered) for rs in data.values()]
    threshold = min(t for t in per_set if t is not None)
    return replace(model, threshold=threshold,
                   fit={**model.fit, "data": list(data), "threshold_rule":
                        f"the lowest of the thresholds that answer {min_answered} of each data set's answerable "
                        "reader rows, on top of those the served gateway refused"})


def figures(model: LogisticModel, data: Mapping[str, Sequence[Row]]) -> list[dict[str, Any]]:
    """Per data set: answerable questions answered and unanswerable ones refused, served gateway
    (the reader's floors) against it with the model — on the rows it was fit on (fit split)."""
    out = []
    for name, rows in data.items():
        mine = [r.example for r in rows if r.model == "reader"]

        def served(e: Any) -> bool:
            return e.features.get("answered", 0.0) > 0 and e.features.get("passages", 0.0) > 0

        def kept(e: Any) -> bool:
            return served(e) and model.score(e.features) >= model.threshold

        pos = [e for e in mine if e.label]
        neg = [e for e in mine if not e.label and not e.question_id.startswith(OUT_OF_SCOPE_ID)]
        oos = [e for e in mine if not e.label and e.question_id.startswith(OUT_OF_SCOPE_ID)]
        out.append({"data": name, "answerable": len(pos), "unanswerable": len(neg), "out_of_scope": len(oos),
                    "answered_before": _share(served, pos), "answered_after": _share(kept, pos),
                    "abstained_before": _share(lambda e: not served(e), neg),
                    "abstained_after": _share(lambda e: not kept(e), neg),
                    "out_of_scope_abstained_before": _share(lambda e: not served(e), oos),
                    "out_of_scope_abstained_after": _share(lambda e: not kept(e), oos)})
    return out


def _share(pred: Any, items: Sequence[Any]) -> float | None:
    return round(sum(1 for e in items if pred(e)) / len(items), 4) if items else None


def card_section(model: LogisticModel, table: Sequence[Mapping[str, Any]], command: str) -> str:
    weights = ", ".join(f"{f} {c:+.2f}" for f, c in zip(model.features, model.coefficients))
    lines = [CARD_BEGIN, "## Abstention after reading", "",
             "When the gateway's own calibration holds no `read_abstain` for this reader, it refuses an answer "
             "whose probability of being answerable, a logistic model over the final evidence's scale-free features "
             "and the best reader score, falls below the threshold (engine `_read_abstain`; `[gateway] read_abstain "
             "= false` turns it off). Fit on the reader rows of fit-split questions of the data sets below (answerable, "
             "unanswerable and out of scope: the other data set's questions); the threshold is the lowest that "
             f"answers {model.fit.get('min_positive_rate', MIN_ANSWERED)} of each data set's answerable questions. "
             f"Command: `{command}`.", "",
             f"- standardised weights: {weights}; threshold **{model.threshold:.3f}**", "",
             "| data (fit rows) | answerable / unanswerable / out of scope | answered: floors only → with it | "
             "unanswerable refused | out of scope refused |", "|---|---|---|---|---|"]
    lines += [f"| {r['data']} | {r['answerable']} / {r['unanswerable']} / {r['out_of_scope']} | {r['answered_before']} → "
              f"{r['answered_after']} | {r['abstained_before']} → {r['abstained_after']} | "
              f"{r['out_of_scope_abstained_before']} → {r['out_of_scope_abstained_after']} |" for r in table]
    lines += ["", "Report-split figures through the federation: benchmarks/README.md, \"Abstention after reading\"."]
    return "\n".join(lines + ["", CARD_END, ""])


def write(model_dir: Path, model: LogisticModel, section: str) -> None:
    """reader.json's calibration gains `abstain`; the card's section is replaced (or appended)."""
    write_calibration(model_dir, {"abstain": model.to_json()}, section, CARD_BEGIN, CARD_END)


def main(argv: Sequence[str] | None = None) -> None:
    from hansa.adapters.reader.onnx import PACKAGED_DIR, load_files

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir", nargs="?", default=str(PACKAGED_DIR), help="a reader model directory (default: the packaged one)")
    ap.add_argument("--data", action="append", required=True, metavar="ROWS",
                    help="a fit-split reader rows file (hansa eval --split fit --calibration-rows ROWS "
                         "--calibration-kinds reader --out-of-scope N); once per data set")
    ap.add_argument("--min-answered", type=float, default=MIN_ANSWERED,
                    help="the share of each data set's answerable fit questions the model must still answer")
    ap.add_argument("--write", action="store_true", help="write the model into reader.json and the model card")
    ap.add_argument("--json", default="", help="also write the model and its figures here")
    args = ap.parse_args(argv)
    if not 0.0 < args.min_answered <= 1.0:
        ap.error(f"--min-answered must lie in (0, 1], not {args.min_answered}")
    data = {Path(p).stem: read_rows(Path(p)) for p in args.data}
    try:
        model = fit(data, load_files(args.model_dir).sha256, args.min_answered)
    except InputError as exc:
        ap.error(str(exc))
    table = figures(model, data)
    command = ("python -m hansa.evaluation.reader_abstain " + " ".join(f"--data {p}" for p in args.data) +
               (f" --min-answered {args.min_answered}" if args.min_answered != MIN_ANSWERED else "") + " --write")
    if args.write:
        write(Path(args.model_dir), model, card_section(model, table, command))
    out = {"model": model.to_json(), "figures": table}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
