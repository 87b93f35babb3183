"""Fit the gate and abstention on MTRAG's fit split (4 sites, one per domain) and report DGRAG's
Table 2 and the abstention targets on the report split.

Why one site per domain: an origin site then has a natural domain, so "in-domain" (the origin holds
the gold passages) and "out-of-domain" (another domain's site) are well defined, as in DGRAG.
Features are collected through the real engine (gateway.query.calibrate), fit on fit-split questions
only (the evaluation's split rule), and every rate printed is on report-split questions.

    python scripts/calibrate_gate.py --data ../shared/datasets/mtrag            # full run (minutes)
    python scripts/calibrate_gate.py --data ../shared/datasets/mtrag --smoke    # a few questions

Writes benchmarks/gate_calibration.json (rates, fit metadata) and benchmarks/gate-calibration.json
(the calibration itself, to copy into a gateway home).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from hansa.evaluation import mtrag  # noqa: E402
from hansa.federation.local import LocalFederation  # noqa: E402
from hansa.gateway.query import calibrate as fitting  # noqa: E402

from hansa.evaluation.split import split_of  # noqa: E402  (the evaluation's fit/report rule)

UNANSWERABLE_KINDS = ("UNANSWERABLE", "UNDERSPECIFIED")


def questions(root: Path, known: set[str]) -> list[fitting.LabelledQuestion]:
    """MTRAG-UN tasks and MTRAG rewrites with gold passages (answerable), MTRAG-UN's unanswerable
    and underspecified tasks (not); each labelled with the domain site(s) holding its gold."""
    out: dict[str, fitting.LabelledQuestion] = {}
    domain_of = {pid: d for d, ps in mtrag.load_passages(root).items() for pid in (p.id for p in ps)}
    for q in mtrag.load_questions(root, known) + mtrag.load_rewrites(root, known):
        out.setdefault(q.id, fitting.LabelledQuestion(q.id, q.text, tuple(sorted({domain_of[g] for g in q.gold}))))
    ref = root / "mtragun-human" / "generation_tasks" / "reference.jsonl"
    for line in ref.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if (row.get("answerability") or ["ANSWERABLE"])[0] in UNANSWERABLE_KINDS:
            turns = [t["text"].strip() for t in row["input"] if t.get("speaker") == "user"]
            out.setdefault(row["task_id"], fitting.LabelledQuestion(row["task_id"], turns[-1], (), False))
    return list(out.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="the MTRAG folder (mtrag-human, mtragun-human)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks"))
    ap.add_argument("--smoke", action="store_true", help="a few questions and passages: seconds, not minutes")
    ap.add_argument("--per-domain", type=int, default=0,
                    help="keep the first N passages of each domain (0: all) and the questions whose gold they hold")
    ap.add_argument("--limit", type=int, default=0, help="at most N answerable questions per split (0: all)")
    ap.add_argument("--limit-unanswerable", type=int, default=0, help="at most N unanswerable per split (0: all)")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    passages = mtrag.load_passages(args.data)
    if args.smoke:
        args.per_domain, args.limit, args.limit_unanswerable = args.per_domain or 10, args.limit or 4, args.limit_unanswerable or 2
    if args.per_domain:
        passages = {d: ps[:args.per_domain] for d, ps in passages.items()}
    known = {p.id for ps in passages.values() for p in ps}
    qs = questions(args.data, known)
    docs = {d: [{"id": p.id, "title": p.title, "text": p.text} for p in ps] for d, ps in passages.items()}

    def chosen(split: str) -> list[fitting.LabelledQuestion]:
        inside = sorted((q for q in qs if split_of(q.id) == split), key=lambda q: hashlib.sha256(q.id.encode()).hexdigest())
        answerable = [q for q in inside if q.answerable]
        unanswerable = [q for q in inside if not q.answerable]
        return answerable[:args.limit or None] + unanswerable[:args.limit_unanswerable or None]

    fit_qs, report_qs = chosen("fit"), chosen("report")
    origins = sorted(docs)
    with tempfile.TemporaryDirectory(prefix="hansa-gate-") as tmp, LocalFederation(
            Path(tmp), docs, progress=lambda m: print(m, file=sys.stderr)) as fed:
        built = time.perf_counter()
        gw = fed.gateway_service
        fit_rows = fitting.gate_rows(gw, fit_qs, origins) + fitting.abstain_rows(gw, fit_qs)
        cal = fitting.calibrate(fit_rows, note="MTRAG 4 sites (one per domain), fit split")
        report_rows = fitting.gate_rows(gw, report_qs, origins) + fitting.abstain_rows(gw, report_qs)
        done = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    cal.save(args.out / ("gate-calibration.smoke.json" if args.smoke else "gate-calibration.json"))
    result = {
        "dataset": "mtrag", "sites": origins, "smoke": args.smoke,
        "questions": {"fit": len(fit_qs), "report": len(report_qs),
                      "fit_unanswerable": sum(not q.answerable for q in fit_qs),
                      "report_unanswerable": sum(not q.answerable for q in report_qs)},
        "report": fitting.rates(cal, report_rows), "fit": fitting.rates(cal, fit_rows),
        "targets": {"escalation_in_domain": "<= 0.15", "escalation_out_of_domain": ">= 0.95",
                    "abstain_unanswerable": ">= 0.70", "answered_answerable": ">= 0.90"},
        "dgrag": {"escalation_in_domain": 0.264, "escalation_out_of_domain": 0.879},
        "calibration": cal.to_json(),
        "seconds": {"build": round(built - started, 1), "collect_and_fit": round(done - built, 1)},
    }
    name = "gate_calibration.smoke.json" if args.smoke else "gate_calibration.json"
    (args.out / name).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: result[k] for k in ("questions", "report", "fit", "seconds")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
