"""SQuAD (v1.1 train + dev, v2.0 dev unanswerables; CC BY-SA 4.0) as a federation of realistic size.

Read from the gzip'd JSON lines described in ../shared/datasets/squad/README.md: 20,958 Wikipedia
paragraphs in 490 articles (`doc_id`), 98,169 answerable questions with short reference answers and
one gold paragraph each, and 5,945 unanswerable SQuAD 2.0 dev questions (the abstention set, asked
against the whole corpus). Nothing of it is copied into the repository.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, Iterator

from hansa.core.errors import InputError
from hansa.evaluation.datasets import ANSWERABLE, UNANSWERABLE, Dataset, Passage, Question, shard_by_document

CAVEAT = ("SQuAD questions were written looking at their paragraph and share many of its words (retrieval is "
          "easier than for natural questions); all unanswerable questions sit in 35 dev articles; no multi-hop.")


def _rows(path: Path) -> Iterator[dict[str, Any]]:
    if not path.is_file():
        raise InputError(f"{path} is missing: point --data at the SQuAD folder (passages.jsonl.gz, questions.jsonl.gz)")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def load_passages(root: Path) -> list[Passage]:
    return [Passage(id=r["id"], title=r["title"], text=r["text"], doc_id=r["doc_id"]) for r in _rows(root / "passages.jsonl.gz")]


def load_questions(root: Path) -> list[Question]:
    out = []
    for r in _rows(root / "questions.jsonl.gz"):
        out.append(Question(id=r["id"], text=r["question"].strip(), gold=tuple(r["gold_passages"]),
                            answers=tuple(r["answers"]), kind=ANSWERABLE if r["answerable"] else UNANSWERABLE,
                            source=r["source"]))
    return out


def load_dataset(root: Path) -> Dataset:
    return Dataset("squad", tuple(load_passages(root)), tuple(load_questions(root)), CAVEAT, shard_by_document,
                   federation_sizes=(16, 64))
