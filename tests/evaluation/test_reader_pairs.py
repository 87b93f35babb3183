"""The reader's training pairs (evaluation/reader_pairs.py) on a small SQuAD-shaped folder: fast tier."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

from hansa.evaluation.reader_pairs import Paragraph, answer_sentence, question_pairs, sentences_of, training_pairs
from hansa.evaluation.split import split_of

GOLD = ("The Grotto is a Marian place of prayer. It is a replica of the grotto at Lourdes, where the Virgin Mary "
        "appeared to Saint Bernadette Soubirous in 1858. Atop the dome is a golden statue.")
OTHER = "Lourdes lies in France. Pilgrims visit the grotto at Lourdes every year."


def paragraph(pid: str, doc: str, text: str) -> Paragraph:
    return Paragraph(pid, doc, text, sentences_of(text))


def test_the_positive_is_the_sentence_holding_the_answer_with_its_span() -> None:
    gold = paragraph("nd#0", "nd", GOLD)
    index, (a, b) = answer_sentence(gold, ["Saint Bernadette Soubirous"])
    assert index == 1 and gold.sentences[1][a:b] == "Saint Bernadette Soubirous"
    assert answer_sentence(gold, ["not in the text"]) is None


def test_hard_negatives_come_from_the_paragraph_and_the_article_never_holding_the_answer() -> None:
    gold, near = paragraph("nd#0", "nd", GOLD), paragraph("nd#1", "nd", OTHER)
    pairs = question_pairs("To whom did the Virgin Mary appear at Lourdes?", ["Saint Bernadette Soubirous"], gold,
                           [gold, near], ["An unrelated sentence."])
    assert [p.label for p in pairs] == [1, 0, 0, 0, 0, 0]
    positive = pairs[0]
    assert positive.span is not None and positive.sentence[positive.span[0]:positive.span[1]] == "Saint Bernadette Soubirous"
    negatives = [p.sentence for p in pairs[1:]]
    assert negatives[:2] == [s for s in gold.sentences if "Bernadette" not in s]  # same paragraph first
    assert "Pilgrims visit the grotto at Lourdes every year." in negatives[2:4]  # the article's near miss
    assert negatives[-1] == "An unrelated sentence."
    assert all("Saint Bernadette Soubirous" not in s for s in negatives)


def _write_squad(root: Path, questions: list[dict]) -> None:
    passages = [{"id": "nd#0", "doc_id": "nd", "title": "ND", "text": GOLD},
                {"id": "nd#1", "doc_id": "nd", "title": "ND", "text": OTHER},
                {"id": "x#0", "doc_id": "x", "title": "X", "text": "Quarks carry colour charge. Gluons bind them."}]
    for name, rows in (("passages", passages), ("questions", questions)):
        with gzip.open(root / f"{name}.jsonl.gz", "wt", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)


def test_only_fit_split_train_questions_are_trained_on(tmp_path: Path) -> None:
    rows = []
    for i in range(40):
        for source in ("squad1.1-train", "squad1.1-dev"):
            rows.append({"id": f"{source}:{i}", "question": f"Who appeared at Lourdes {i}?", "gold_passages": ["nd#0"],
                         "answers": ["Saint Bernadette Soubirous"], "answerable": True, "source": source,
                         "context_passage": "nd#0"})
    _write_squad(tmp_path, rows)
    pairs = training_pairs(tmp_path, 0)
    asked = {p.question for p in pairs}
    expected = {r["question"] for r in rows if r["source"] == "squad1.1-train" and split_of(r["id"]) == "fit"}
    assert asked and asked <= expected  # no dev question, no report-split question
    assert training_pairs(tmp_path, 0) == pairs  # seeded: the same pairs every run


def test_a_pairs_file_holds_the_same_pairs_and_says_how_they_were_made(tmp_path: Path) -> None:
    from hansa.evaluation.reader_pairs import Pair, read_pairs, write_pairs

    pairs = [Pair("who?", "Eiffel built it.", 1, (0, 6)), Pair("who?", "It is tall.", 0), Pair("when?", "Eiffel built it.", 0)]
    path = tmp_path / "pairs.json.gz"
    write_pairs(path, pairs, {"stage": "base", "questions": 0})
    got, made_by = read_pairs(path)
    assert got == pairs and made_by == {"stage": "base", "questions": 0}
    with gzip.open(path, "rt") as fh:
        assert len(json.load(fh)["texts"]) == 4  # each question and sentence stored once


def test_a_file_that_is_not_a_pairs_file_is_refused_naming_it(tmp_path: Path) -> None:
    import pytest

    from hansa.evaluation.reader_pairs import read_pairs

    for name, content in (("other.json.gz", json.dumps({"format": "something-else"})), ("broken.json.gz", "{not json")):
        path = tmp_path / name
        with gzip.open(path, "wt") as fh:
            fh.write(content)
        with pytest.raises(SystemExit, match=rf"--pairs .*{name}: not a pairs file written by `reader_train --write-pairs`"):
            read_pairs(path)
    with pytest.raises(SystemExit, match="missing.json.gz"):
        read_pairs(tmp_path / "missing.json.gz")
