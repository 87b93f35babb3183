"""The reader's model card, written from what training recorded and what the measurement found.

Why generated: a card typed by hand drifts from the file it describes; this one is rewritten with
the graph's sha256, the training arguments and the figures every time the model is made
(`python -m hansa.evaluation.reader DIR --squad ... --write`). Lives with the evaluation: the
product never writes a card.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping


def _row(name: str, r: Mapping[str, Any]) -> str:
    return (f"| {name} | {r['questions']} | {r['exact']:.3f} | {r['f1']:.3f} | {r['has_ans_f1']:.3f} | "
            f"{r['no_ans_accuracy']:.3f} | {r['answered_answerable']:.3f} | {r['answer_sentence_accuracy']:.3f} |")


def _command(args: Mapping[str, Any], out: str = "--out DIR") -> str:
    flags = ("stage", "init", "questions", "dev_questions", "off_topic", "layers", "freeze_layers", "lr", "seed")
    named = "".join(f" --{k.replace('_', '-')} {'PREVIOUS_DIR' if k == 'init' else v}" for k, v in args.items()
                    if k in flags and (v or k == "questions") and not (k == "stage" and v == "base")
                    and not (k == "seed" and v == 13))  # --questions 0 (all) is not the default
    return f"`python -m hansa.evaluation.reader_train --squad ../shared/datasets/squad {out}{named}`"


def _stages(train: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The runs that made the model, first to last: each train.json holds the one it continued (`init`)."""
    chain: list[Mapping[str, Any]] = []
    while train:
        chain.insert(0, train)
        train = train.get("init") or {}
    return chain


ORDINAL = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


def _base_data(a: Mapping[str, Any]) -> str:
    chosen = f"{a['questions']} sampled with seed {a['seed']}" if a.get("questions") else "all of them"
    return ("SQuAD v1.1 **train** questions of hansa's fit split only (evaluation/split.py), " + chosen + ", each "
            "with the gold sentence holding a reference answer as its positive; hard negatives are the other sentences "
            "of the gold paragraph and the sentences of other paragraphs of the same article with the most question "
            "words, plus one sentence of another article (evaluation/reader_pairs.py)")


def _contrast_data(a: Mapping[str, Any]) -> str:
    chosen = f"{a['questions']} fit-split train questions of a sample seeded {a['seed']}" if a.get("questions") else \
        "all fit-split train questions"
    dev = f"the first {a['dev_questions']} of " if a.get("dev_questions") else ""
    off = (f"; and {a['off_topic']} sentences of other articles sharing the most words with each train question, "
           "as negatives (filler)" if a.get("off_topic") else "")
    return (chosen + ", each with a *contrast twin* (one detail changed: an entity or number the answer sentence "
            "states, an antonym, a negation) whose negative is the same answer sentence; plus " + dev
            + "the fit-split SQuAD 2.0 dev questions of half the dev articles (a hash of the article): unanswerable ones "
            f"against their near-miss paragraph's sentences{off} (evaluation/reader_contrast.py)")


def _made_of(stage: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """What each stage's pairs were built as: its pairs files' recipes, else its own arguments."""
    return stage.get("pairs_files") or [stage["args"]]


def read_dev_questions(train: Mapping[str, Any]) -> bool:
    """Whether any stage trained on SQuAD 2.0 dev's fit questions (the contrast pairs do)."""
    return any(m.get("stage") == "contrast" for stage in _stages(train) for m in _made_of(stage))


def _data(stage: Mapping[str, Any]) -> str:
    parts = [(_contrast_data if m.get("stage") == "contrast" else _base_data)(m) for m in _made_of(stage)]
    return "; and ".join(parts) + f": {stage['pairs']:,} pairs, {stage['positives']:,} positive."


def _command_of(stage: Mapping[str, Any]) -> str:
    a = stage["args"]
    if not stage.get("pairs_files"):
        return _command(a)
    made = " and ".join(_command(m, f"--write-pairs PAIRS{n}") for n, m in enumerate(stage["pairs_files"], 1))
    pairs = " ".join(f"--pairs PAIRS{n}" for n in range(1, len(stage["pairs_files"]) + 1))
    return (f"{made}, then `python -m hansa.evaluation.reader_train {pairs} --base BASE --out RUN --state-out "
            f"--freeze-layers {a.get('freeze_layers', 0)} --epochs {a['epochs']} --batch {a['batch']} --lr {a['lr']}` "
            "and `python -m hansa.evaluation.reader_train --export-state RUN --out DIR` (the graphs, on the packaged base; "
            "BASE: all-MiniLM-L6-v2's folder, which may travel in half precision)")


def _training(train: Mapping[str, Any]) -> list[str]:
    """How the model was made: stage one, then each stage that continued it."""
    stages = _stages(train)
    first = stages[0]
    frozen = first["args"].get("freeze_layers", 0)
    lines = [f"- Base: {first['base']} (Apache-2.0), first {first['layers']} layers; word embeddings"
             + (f" and the lowest {frozen} layers" if frozen else "") + " frozen."]
    for n, stage in enumerate(stages, 1):
        continued = f" (from stage {ORDINAL.get(n - 1, n - 1)}'s graph)" if n > 1 else ""
        lines.append(f"- Stage {ORDINAL.get(n, n)}{continued}, data: {_data(stage)}")
    lines.append("- SQuAD is CC BY-SA 4.0 (Rajpurkar et al. 2016, 2018; text from Wikipedia); no report-split question "
                 "was read in training.")
    for n, stage in enumerate(stages, 1):
        a = stage["args"]
        lines.append(f"- Stage {n} recipe: {a['epochs']} epoch(s), batch {a['batch']}, AdamW lr {a['lr']}, span loss weight "
                     f"{a['span_weight']}, seed {a['seed']}, on {stage.get('device_name') or stage['device']} ({stage['pairs_per_s']} pairs/s, "
                     f"{stage['train_s'] / 60:.0f} min); command: {_command_of(stage)}.")
    lines.append("- Then: `python -m hansa.evaluation.reader DIR --squad ../shared/datasets/squad --write` and "
                 "`python -m hansa.evaluation.reader_kinds DIR --squad ../shared/datasets/squad --mtrag "
                 "../shared/datasets/mtrag --write` (with `--relative S`: the share of the best sentence's score "
                 "chosen on the fit split, below).")
    return lines


def card_text(meta: Mapping[str, Any], train: Mapping[str, Any], results: Mapping[str, Any], chosen: str, limit: int) -> str:
    args = train["args"]
    lines = [
        f"# {meta['name']}: the gateway's reader",
        "",
        "A cross-encoder over (question, sentence): `answers` (probability that the sentence answers the",
        "question) and an answer span within the sentence. hansa's gateway uses it as the relevance floor of",
        "an answer, the abstention score, the judge of which side of a conflict answers the question, and the",
        "source of a second hop's follow-up (gateway/query/reading.py).",
        "",
        "## Files",
        f"- graph `{meta['graph']['file']}` sha256 `{meta['graph']['sha256']}` ({meta['graph']['size']:,} bytes)",
        f"- tokenizer `{meta['tokenizer']['file']}` sha256 `{meta['tokenizer']['sha256']}`",
        f"- token cap {meta['max_length']}; shipped calibration: floor {meta['calibration']['floor']:.3f}"
        f" ({meta['calibration']['fit']})",
        "",
        "## Training",
        *_training(train),
        "",
        "## Measured as a reader: SQuAD 2.0 dev (each question against the paragraph it was written on)",
        f"{'All 11,873 questions' if not limit else f'{limit} questions sampled'}; threshold chosen on the fit part "
        "(max F1), figures on the report part; official SQuAD 2.0 rules (an unanswerable question is right only "
        "when the prediction is empty). Published MiniLM-size SQuAD 2.0 readers reach ~76-79 F1 with a full "
        "paragraph, trained on SQuAD 2.0 train (with its unanswerables); this one sees one sentence at a time"
        + ("; from stage two on, training read the fit questions of half the dev articles, so the threshold and floor are fit "
           "on the other fit questions, and *held out* rows are report questions of articles training never read."
           if read_dev_questions(train) else " and never saw an unanswerable question in training."),
        "",
        "| graph, part | questions | EM | F1 | HasAns F1 | NoAns acc | answered (answerable) | best sentence holds answer |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for variant, r in results.items():
        for part in ("fit", "report", "all"):
            lines.append(_row(f"{variant} {part} (t={r['threshold_fit']:.3f})", r[part]))
        lines.append(_row(f"{variant} report at the gateway's floor (t={r['floor_fit']:.3f})", r["report_at_floor"]))
        if "held_out_at_floor" in r:
            lines.append(_row(f"{variant} held out, at the gateway's floor", r["held_out_at_floor"]))
        lines.append(_row(f"{variant} report, every question answered (the span alone)", r["report_answer_all"]))
        if "report_on_fp32_sample" in r:
            lines.append(_row(f"{variant} report, fp32's sample and threshold", r["report_on_fp32_sample"]))
    lines += [
        "",
        "The gateway's floor is not the max-F1 threshold: it is the highest score that still answers 0.92 of the fit "
        "part's answerable questions (the target is to answer >= 0.90 while abstaining on >= 0.70 of unanswerable "
        "ones). AUROC of the best sentence's score, answerable against unanswerable (report part): "
        + ", ".join(f"{v} {r['report_auroc']:.3f}" for v, r in results.items() if r.get("report_auroc") is not None)
        + "; held out: " + ", ".join(f"{v} {r['held_out_auroc']:.3f}" for v, r in results.items()
                                     if r.get("held_out_auroc") is not None) + ".",
        "",
        "Filler (the sentences of other dev articles sharing the most words with a report question; "
        "evaluation/reader.py `off_topic`): " + "; ".join(
            f"{v} AUROC {o['auroc']:.3f} against the question's best sentence, {o['share_at_floor']:.3f} of them at "
            f"or above the floor" for v, r in results.items() if (o := r.get("off_topic")) and o.get("auroc") is not None)
        + ".",
        "",
        f"Shipped: `{chosen}` (int8 when its report F1 is within 0.01 of fp32). Reading speed on this machine: "
        + ", ".join(f"{v} {r['pairs_per_s']} pairs/s" for v, r in results.items()) + ".",
        "",
        "## Limits",
        "- Trained on Wikipedia questions written against their paragraph: it rewards word overlap more than a "
        "reader trained on natural questions would.",
        "- One sentence at a time: an answer that needs the previous sentence (\"It was built in 1850.\") scores low.",
        "- English only.",
        "",
        "Training log tail: `" + json.dumps(train.get("log", [])[-1:]) + "`",
        "",
    ]
    return "\n".join(lines)


def write_calibration(model_dir: Path, calibration: Mapping[str, Any], section: str, begin: str, end: str) -> None:
    """reader.json's calibration gains (or replaces) the keys of `calibration`; the card's section
    between the markers `begin` and `end` is replaced where it stands, or appended: each fit on top of
    the model (floors per kind, abstention after reading) owns one section, rewritten when it is refit."""
    from hansa.adapters.reader.onnx import META

    meta_path = model_dir / META
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta.setdefault("calibration", {}).update(calibration)
    meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    card = model_dir / "README.md"
    text = card.read_text(encoding="utf-8") if card.is_file() else ""
    if begin in text and end in text:  # in place: a refit keeps the card's order of sections
        after = text[text.index(end) + len(end):].lstrip("\n")
        card.write_text(text[:text.index(begin)] + section + ("\n" + after if after else ""))
    else:
        card.write_text(text.rstrip("\n") + "\n\n" + section)
