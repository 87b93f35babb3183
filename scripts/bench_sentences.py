"""Sentence segmenters side by side: which is right on tricky cases, and how fast on real text.

Why: hansa splits sentences on the ingest path (chunking, answer candidates, summaries) and the
query path; the choice recorded in core/sentences.py rests on these numbers. Cases are
abbreviations, initials, decimals, quotes and a blank-line heading; speed is measured on the
first `--paragraphs` SQuAD paragraphs, then on the two ingest stages that split (chunking and
answer candidates: the paragraphs as ten-paragraph documents, 900-character chunks) with hansa's
splitter and with syntok in its place. Candidates not installed are reported and skipped (pysbd
and syntok are in the `bench` extra).

    nice python scripts/bench_sentences.py [--squad ../shared/datasets/squad/passages.jsonl.gz] [--paragraphs 1000]
"""
from __future__ import annotations

import argparse
import gzip
import json
import re
import time
from typing import Callable

from hansa.core.sentences import split_sentences

CASES = [
    ("The patient was admitted to St. Alder Hospital with atrial fibrillation. She was discharged on Monday.",
     ["The patient was admitted to St. Alder Hospital with atrial fibrillation.", "She was discharged on Monday."]),
    ("Bring water, food, blankets, etc. to the shelter. Then wait for the all-clear.",
     ["Bring water, food, blankets, etc. to the shelter.", "Then wait for the all-clear."]),
    ("Dr. Smith met Mr. Jones at 5 p.m. on Friday. They talked.",
     ["Dr. Smith met Mr. Jones at 5 p.m. on Friday.", "They talked."]),
    ("The U.S. Army built it in 1942. It still stands.", ["The U.S. Army built it in 1942.", "It still stands."]),
    ("Prices rose 3.5 percent in 2020. Wages did not.", ["Prices rose 3.5 percent in 2020.", "Wages did not."]),
    ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
    ("Is it safe? Yes! Go now.", ["Is it safe?", "Yes!", "Go now."]),
    ("See e.g. the FEMA guide for details. It lists supplies.",
     ["See e.g. the FEMA guide for details.", "It lists supplies."]),
    ("The company, Acme Inc., was founded in Ohio. It grew fast.",
     ["The company, Acme Inc., was founded in Ohio.", "It grew fast."]),
    ("Gen. Grant won at Vicksburg. Lee surrendered in 1865.", ["Gen. Grant won at Vicksburg.", "Lee surrendered in 1865."]),
    ("Mt. Everest is 8,849 m high. Climbers use oxygen.", ["Mt. Everest is 8,849 m high.", "Climbers use oxygen."]),
    ("Safe Rooms\n\nA safe room protects you from wind. Build it to code.",
     ["Safe Rooms", "A safe room protects you from wind.", "Build it to code."]),
    ("The study (Fig. 2) shows a drop. Results vary.", ["The study (Fig. 2) shows a drop.", "Results vary."]),
    ("Take 2 tablets vs. 1 tablet daily. Ask your doctor.", ["Take 2 tablets vs. 1 tablet daily.", "Ask your doctor."]),
    ("She went to the ward. Dr. Okafor saw her. Mr. Li came too.",
     ["She went to the ward.", "Dr. Okafor saw her.", "Mr. Li came too."]),
    ("J. R. R. Tolkien wrote it. He was British.", ["J. R. R. Tolkien wrote it.", "He was British."]),
    ("It opened on Jan. 5 at No. 10 Main St. in Boston. Crowds came.",
     ["It opened on Jan. 5 at No. 10 Main St. in Boston.", "Crowds came."]),
    ("1. Turn off the gas.\n2. Leave the house.", ["1. Turn off the gas.", "2. Leave the house."]),
]

_OLD_BOUNDARY = re.compile(r"""[.!?]+["'’”)\]]*(?=\s)|\n[ \t]*\n""")  # hansa's splitter before issue 32


def _regex(text: str) -> list[str]:
    out, begin = [], 0
    for match in _OLD_BOUNDARY.finditer(text):
        out.append(text[begin:match.end()].strip())
        begin = match.end()
    out.append(text[begin:].strip())
    return [s for s in out if s]


def _pysbd() -> Callable[[str], list[str]]:
    import pysbd

    segmenter = pysbd.Segmenter(language="en", clean=False)
    return lambda text: [s.strip() for s in segmenter.segment(text) if s.strip()]


def _syntok() -> Callable[[str], list[str]]:
    from syntok import segmenter

    def split(text: str) -> list[str]:
        return [text[sent[0].offset:sent[-1].offset + len(sent[-1].value)]
                for paragraph in segmenter.analyze(text) for sent in paragraph]
    return split


def _blingfire_alone() -> Callable[[str], list[str]]:
    import blingfire

    def split(text: str) -> list[str]:
        return [text[a:b].strip() for a, b in blingfire.text_to_sentences_and_offsets(text)[1] if text[a:b].strip()]
    return split


CANDIDATES: dict[str, Callable[[], Callable[[str], list[str]]]] = {
    "regex (old)": lambda: _regex, "pysbd": _pysbd, "syntok": _syntok,
    "blingfire": _blingfire_alone, "hansa (blingfire + rules)": lambda: split_sentences,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--squad", default="../shared/datasets/squad/passages.jsonl.gz")
    parser.add_argument("--paragraphs", type=int, default=1000)
    args = parser.parse_args()
    paragraphs: list[str] = []
    with gzip.open(args.squad, "rt", encoding="utf-8") as fh:
        for line in fh:
            paragraphs.append(json.loads(line)["text"])
            if len(paragraphs) >= args.paragraphs:
                break
    chars = sum(map(len, paragraphs))
    print(f"{len(paragraphs)} SQuAD paragraphs, {chars / 1e6:.2f} M characters")
    for name, make in CANDIDATES.items():
        try:
            split = make()
        except ImportError as exc:
            print(f"{name:28s} not installed ({exc})")
            continue
        wrong = [case for case, want in CASES if split(case) != want]
        t = time.perf_counter()
        sentences = sum(len(split(p)) for p in paragraphs)
        seconds = time.perf_counter() - t
        print(f"{name:28s} {len(CASES) - len(wrong):2d}/{len(CASES)} cases  {seconds:6.2f} s  "
              f"{chars / seconds / 1e6:6.2f} M chars/s  {sentences} sentences")
        for case in wrong:
            print(f"{'':30s}wrong: {split(case)}")
    stages(paragraphs)


def _syntok_spans(text: str) -> list[tuple[int, int]]:
    from syntok import segmenter

    return [(sent[0].offset, sent[-1].offset + len(sent[-1].value))
            for paragraph in segmenter.analyze(text) for sent in paragraph]


def stages(paragraphs: list[str]) -> None:
    """Chunks/s of chunking and of answer candidates, with each splitter in core.sentences' place."""
    import hansa.plugin.answer_candidates as candidates
    import hansa.plugin.chunking as chunking
    from hansa.core.sentences import sentence_spans

    documents = ["\n\n".join(paragraphs[i:i + 10]) for i in range(0, len(paragraphs), 10)]
    for name, spans in (("hansa (blingfire + rules)", sentence_spans), ("syntok", _syntok_spans)):
        chunking.sentence_spans = candidates.sentence_spans = spans  # type: ignore[assignment]
        t = time.perf_counter()
        chunks = [c for i, d in enumerate(documents) for c in chunking.chunk_text(str(i), d, 900, 150)]
        chunked = time.perf_counter() - t
        t = time.perf_counter()
        for chunk in chunks:
            candidates.chunk_sentences(chunk.text)
        answered = time.perf_counter() - t
        print(f"{name:28s} {len(chunks)} chunks: chunking {len(chunks) / chunked:,.0f} chunks/s, "
              f"answer candidates {len(chunks) / answered:,.0f} chunks/s")
    chunking.sentence_spans = candidates.sentence_spans = sentence_spans  # type: ignore[assignment]


if __name__ == "__main__":
    main()
