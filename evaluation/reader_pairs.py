"""Training and evaluation pairs for the reader, built from SQuAD without torch.

Why its own module: the pairs decide what the reader learns, so they must be testable in the fast
tier and identical wherever training runs (two CPU cores or an accelerator).

A pair is (question, sentence, label, answer character span within the sentence or None). For a
fit-split SQuAD v1.1 *train* question:
- positive: the sentence of its gold paragraph holding a reference answer (questions whose answer
  crosses a sentence boundary are skipped: no single sentence answers them);
- hard negatives, as SQuAD 2.0's unanswerables were written (a near-miss in the same place):
  the other sentences of the gold paragraph with the most question words, then the sentences of
  *other* paragraphs of the same article with the most question words;
- one easy negative: a sentence of another article (the reader must not score a random sentence
  above the floor).
Dev articles (SQuAD v1.1 dev, v2.0 dev) never reach training: they are the report.
"""
from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from hansa.core.text import content_words

PAIRS_FORMAT = "hansa-reader-pairs/1"


@dataclass(frozen=True)
class Pair:
    question: str
    sentence: str
    label: int  # 1: the sentence answers the question
    span: tuple[int, int] | None = None  # the answer's characters within `sentence` (positives)


@dataclass(frozen=True)
class Paragraph:
    id: str
    doc_id: str
    text: str
    sentences: tuple[str, ...]


def _rows(path: Path) -> Iterator[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def sentences_of(text: str) -> tuple[str, ...]:
    # imported here: a pairs file is read where the sentence splitter (blingfire) may be missing, on an
    # accelerator's own Python (reader_train --pairs)
    from hansa.core.sentences import sentence_spans

    return tuple(text[a:b] for a, b in sentence_spans(text) if text[a:b].strip())


def load_paragraphs(squad_dir: Path) -> dict[str, Paragraph]:
    return {r["id"]: Paragraph(r["id"], r["doc_id"], r["text"], sentences_of(r["text"]))
            for r in _rows(squad_dir / "passages.jsonl.gz")}


def load_questions(squad_dir: Path) -> list[dict[str, Any]]:
    """The raw question rows (they keep `context_passage`, the paragraph an unanswerable question
    was written against, which the evaluation's loader does not carry)."""
    return list(_rows(squad_dir / "questions.jsonl.gz"))


def answer_sentence(paragraph: Paragraph, answers: Sequence[str]) -> tuple[int, tuple[int, int]] | None:
    """(index of the first sentence holding a reference answer, the answer's span in it)."""
    for i, sentence in enumerate(paragraph.sentences):
        for answer in answers:
            at = sentence.find(answer) if answer else -1
            if at >= 0:
                return i, (at, at + len(answer))
    return None


def _overlap(question_words: set[str], sentence: str) -> int:
    return len(question_words & set(content_words(sentence)))


def question_pairs(question: str, answers: Sequence[str], gold: Paragraph, article: Sequence[Paragraph],
                   other: Sequence[str], in_paragraph: int = 2, in_article: int = 2) -> list[Pair]:
    """The pairs of one answerable question (empty when no single sentence holds its answer)."""
    found = answer_sentence(gold, answers)
    if found is None:
        return []
    index, span = found
    words = set(content_words(question))
    pairs = [Pair(question, gold.sentences[index], 1, span)]
    holders = {s for s in gold.sentences if any(a and a in s for a in answers)}
    near = sorted((s for s in gold.sentences if s not in holders), key=lambda s: -_overlap(words, s))
    pairs += [Pair(question, s, 0) for s in near[:in_paragraph]]
    elsewhere = [s for p in article if p.id != gold.id for s in p.sentences
                 if not any(a and a in s for a in answers)]
    elsewhere.sort(key=lambda s: -_overlap(words, s))
    pairs += [Pair(question, s, 0) for s in elsewhere[:in_article]]
    pairs += [Pair(question, s, 0) for s in other[:1]]
    return pairs


def training_pairs(squad_dir: Path, max_questions: int, seed: int = 13) -> list[Pair]:
    """Pairs of up to `max_questions` fit-split SQuAD v1.1 train questions (a seeded sample)."""
    from hansa.evaluation.split import split_of

    paragraphs = load_paragraphs(squad_dir)
    by_doc: dict[str, list[Paragraph]] = {}
    for p in paragraphs.values():
        by_doc.setdefault(p.doc_id, []).append(p)
    rows = [r for r in load_questions(squad_dir)
            if r["source"] == "squad1.1-train" and r["answerable"] and split_of(r["id"]) == "fit"]
    rng = random.Random(seed)
    rng.shuffle(rows)
    rows = rows[:max_questions] if max_questions else rows
    docs = sorted(by_doc)
    out: list[Pair] = []
    for r in rows:
        gold = paragraphs[r["gold_passages"][0]]
        far = by_doc[docs[rng.randrange(len(docs))]]
        if far[0].doc_id == gold.doc_id:
            continue
        para = far[rng.randrange(len(far))]
        other = [para.sentences[rng.randrange(len(para.sentences))]] if para.sentences else []
        out += question_pairs(r["question"], r["answers"], gold, by_doc[gold.doc_id], other)
    rng.shuffle(out)
    return out


def write_pairs(path: Path, pairs: Sequence[Pair], made_by: dict[str, Any]) -> None:
    """The pairs as one gzip JSON document, each question and sentence stored once.

    Why a file: training may run on an accelerator whose Python lacks what building pairs needs
    (the sentence splitter, the data set); the pairs are built here, shipped, and trained on there,
    the same pairs wherever training runs."""
    index: dict[str, int] = {}
    texts: list[str] = []

    def at(text: str) -> int:
        if text not in index:
            index[text] = len(texts)
            texts.append(text)
        return index[text]

    rows = [[at(p.question), at(p.sentence), p.label, *(p.span or (-1, -1))] for p in pairs]
    doc = {"format": PAIRS_FORMAT, "made_by": made_by, "texts": texts, "pairs": rows}
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(doc, fh, separators=(",", ":"))


def read_pairs(path: Path) -> tuple[list[Pair], dict[str, Any]]:
    """The pairs of a file `write_pairs` wrote, and how they were made; anything else is refused."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            doc = json.load(fh)
        if doc.get("format") != PAIRS_FORMAT:
            raise ValueError(f"format {doc.get('format')!r}, expected {PAIRS_FORMAT}")
        texts = doc["texts"]
        pairs = [Pair(texts[q], texts[s], int(y), (a, b) if a >= 0 else None) for q, s, y, a, b in doc["pairs"]]
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise SystemExit(f"--pairs {path}: not a pairs file written by `reader_train --write-pairs` ({exc})")
    return pairs, doc.get("made_by", {})
