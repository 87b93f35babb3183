"""Stage two's pairs (evaluation/reader_contrast.py): contrast twins and SQuAD 2.0's fit unanswerables, fast tier."""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

from hansa.evaluation.reader_contrast import (contrast_pairs, off_topic_sentences, perturb, read_in_training,
                                              trainable_article)
from hansa.evaluation.split import split_of

SENTENCE = "The Turkish Cypriots declared independence in 1983 as the largest state of Northern Cyprus."
NAMES = ["Greek", "Cypriots", "Ankara", "1974", "Nicosia"]


def test_an_entity_the_answer_sentence_states_is_swapped_for_one_of_the_article_it_does_not() -> None:
    twin = perturb("In 1983, who declared independence in Northern Cyprus?", SENTENCE, NAMES, random.Random(1))
    assert twin is not None and twin != "In 1983, who declared independence in Northern Cyprus?"
    words = lambda text: set(text.lower().replace("?", "").replace(",", "").replace(".", "").split())  # noqa: E731
    changed = words(twin) - words(SENTENCE) - {"who"}
    assert len(changed) == 1 and changed <= {"greek", "ankara", "1974", "nicosia"}  # one name the sentence lacks


def test_without_a_swappable_name_an_antonym_then_a_negation_changes_the_question() -> None:
    assert perturb("what was the largest state?", SENTENCE, [], random.Random(1)) == "what was the smallest state?"
    assert perturb("what is declared here?", SENTENCE, [], random.Random(1)) == "what is not declared here?"
    assert perturb("Who declared independence?", SENTENCE, [], random.Random(1)) is None  # no rule applies


def _write(root: Path, questions: list[dict]) -> None:
    passages = [{"id": "tr#0", "doc_id": "tr", "title": "T", "text": SENTENCE + " Nicosia is its capital."},
                {"id": "tr#1", "doc_id": "tr", "title": "T", "text": "Greek Cypriots live in the south since 1974."}]
    passages += [{"id": f"dv{i}#0", "doc_id": f"dv{i}", "title": "D", "text": "Alder Hall was built in 1850. It burned."}
                 for i in range(12)]
    for name, rows in (("passages", passages), ("questions", questions)):
        with gzip.open(root / f"{name}.jsonl.gz", "wt", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)


def test_pairs_come_from_fit_train_questions_and_fit_dev_questions_of_trainable_articles_only(tmp_path: Path) -> None:
    rows = [{"id": f"train:{i}", "question": f"In what year did the Turkish Cypriots declare independence {i}?",
             "gold_passages": ["tr#0"], "answers": ["1983"], "answerable": True, "source": "squad1.1-train",
             "context_passage": "tr#0"} for i in range(30)]
    for i in range(12):
        for j in range(8):
            rows.append({"id": f"dev{i}:{j}", "question": f"When was Alder Hall rebuilt {j}?", "gold_passages": [],
                         "answers": [], "answerable": False, "source": "squad2.0-dev", "context_passage": f"dv{i}#0"})
    _write(tmp_path, rows)
    pairs = contrast_pairs(tmp_path, 0)
    fit_train = {r["question"] for r in rows if r["id"].startswith("train") and split_of(r["id"]) == "fit"}
    trained_dev = {r["question"] for r in rows if r["id"].startswith("dev")
                   and read_in_training(r["id"], r["context_passage"].split("#")[0])}
    twins = [p for p in pairs if p.label == 0 and p.sentence == SENTENCE]
    assert fit_train and {p.question for p in pairs if p.label == 1} <= fit_train
    assert twins and all(t.question not in fit_train for t in twins)  # the twin, not the original, is the negative
    dev = {p.question for p in pairs if "Alder" in p.question}
    assert dev == trained_dev and all(p.label == 0 for p in pairs if "Alder" in p.question)
    assert any(not trainable_article(f"dv{i}") for i in range(12))  # some articles stay held out
    assert contrast_pairs(tmp_path, 0) == pairs  # seeded
    assert len({p.question for p in contrast_pairs(tmp_path, 0, max_dev=2) if "Alder" in p.question}) <= 2


def test_off_topic_negatives_are_other_articles_sentences_sharing_the_most_question_words() -> None:
    from hansa.evaluation.reader_pairs import Paragraph

    own = Paragraph("dog#0", "dog", "", ("Puppies learn to sit when rewarded.",))
    near = Paragraph("terrier#0", "terrier", "", ("The terrier was bred as a puppy fighter.", "It is white."))
    far = Paragraph("rome#0", "rome", "", ("Rome was founded in 753 BC.",))
    picked = off_topic_sentences("How do I train a puppy to sit?", "dog", [own, near, far], 2, random.Random(3))
    assert picked[0] == "The terrier was bred as a puppy fighter."  # shares "puppy", another article
    assert "Puppies learn to sit when rewarded." not in picked  # never the question's own article
    assert off_topic_sentences("How do I train a puppy?", "dog", [own, near], 0, random.Random(3)) == []


def test_the_off_topic_count_adds_that_many_negatives_per_train_question(tmp_path: Path) -> None:
    rows = [{"id": f"train:{i}", "question": f"In what year did the Turkish Cypriots declare independence {i}?",
             "gold_passages": ["tr#0"], "answers": ["1983"], "answerable": True, "source": "squad1.1-train",
             "context_passage": "tr#0"} for i in range(30)]
    rows.append({"id": "other:0", "question": "When was Alder Hall built?", "gold_passages": ["ot#0"],
                 "answers": ["1850"], "answerable": True, "source": "squad1.1-train", "context_passage": "ot#0"})
    _write(tmp_path, rows)
    with gzip.open(tmp_path / "passages.jsonl.gz", "at", encoding="utf-8") as fh:
        fh.write(json.dumps({"id": "ot#0", "doc_id": "ot", "title": "O",
                             "text": "The Turkish fleet sailed in 1850. Alder Hall was built in 1850."}) + "\n")
    plain, more = contrast_pairs(tmp_path, 0, max_dev=1), contrast_pairs(tmp_path, 0, max_dev=1, off_topic=1)
    added = [p for p in more if p not in plain]
    asked = {r["question"] for r in rows if r["id"].startswith("train") and split_of(r["id"]) == "fit"}
    assert added and all(p.label == 0 and p.sentence == "The Turkish fleet sailed in 1850." for p in added
                         if p.question in asked)  # the other article's sentence sharing "Turkish"
