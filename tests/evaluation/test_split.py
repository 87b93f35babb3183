"""The fit/report split must be stable (same answer in any process, any order), disjoint and
exhaustive, with the documented share."""
from __future__ import annotations

import subprocess
import sys

import pytest

from hansa.core.errors import InputError
from hansa.evaluation.datasets import Question
from hansa.evaluation.split import FIT_PERCENT, sample, select, split_of

IDS = [f"q{i}" for i in range(5000)]


def test_split_is_the_same_in_another_process() -> None:
    code = ("from hansa.evaluation.split import split_of; import sys; "
            "print(''.join('f' if split_of(f'q{i}') == 'fit' else 'r' for i in range(300)))")
    other = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                           env={"PYTHONHASHSEED": "12345"}).stdout.strip()
    assert other == "".join("f" if split_of(f"q{i}") == "fit" else "r" for i in range(300))


def test_fit_and_report_are_disjoint_exhaustive_and_near_the_documented_share() -> None:
    qs = [Question(id=i, text="?") for i in IDS]
    fit, report, every = select(qs, "fit"), select(reversed(qs), "report"), select(qs, "all")
    assert not {q.id for q in fit} & {q.id for q in report}
    assert {q.id for q in fit} | {q.id for q in report} == set(IDS) == {q.id for q in every}
    assert abs(len(fit) / len(IDS) - FIT_PERCENT / 100) < 0.03


def test_sample_is_order_independent_and_nested() -> None:
    qs = [Question(id=i, text="?") for i in IDS[:200]]
    assert [q.id for q in sample(qs, 20)] == [q.id for q in sample(list(reversed(qs)), 20)]
    assert [q.id for q in sample(qs, 10)] == [q.id for q in sample(qs, 20)][:10]
    assert len(sample(qs, 0)) == 200


def test_unknown_split_is_refused() -> None:
    with pytest.raises(InputError, match="unknown split"):
        select([], "train")


def test_question_source_keeps_squad_dev_and_train_apart() -> None:
    from hansa.evaluation.datasets import ANSWERABLE, Question
    from hansa.evaluation.runner import choose_questions, question_source

    qs = [Question(id=f"q{i}", text="?", gold=("p",), answers=("a",), kind=ANSWERABLE, source=src)
          for i, src in enumerate(["squad1.1-train", "squad1.1-dev", "squad2.0-dev", "squad1.1-dev+squad2.0-dev"] * 10)]
    assert [question_source(q) for q in qs[:4]] == ["train", "dev", "dev", "dev"]

    class Ds:
        questions = qs

    dev = choose_questions(Ds, "all", 0, -1, "dev")  # type: ignore[arg-type]
    train = choose_questions(Ds, "all", 0, -1, "train")  # type: ignore[arg-type]
    assert len(dev) == 30 and len(train) == 10 and not {q.id for q in dev} & {q.id for q in train}
    with pytest.raises(InputError):
        choose_questions(Ds, "all", 0, -1, "test")  # type: ignore[arg-type]
