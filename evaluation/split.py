"""The fixed fit/report split of questions.

Rule (never changes, so every table is comparable over time): a question belongs to **fit** when
`sha256("hansa-eval-split/v1" + "\\x1f" + <question id>)` read as an integer is below
`FIT_SHARE` of its range — here, when that integer mod 100 is below 30 — and to **report**
otherwise. About 30% fit, 70% report, independent of dataset order, file layout or process.
Everything tuned (site margin, Leiden resolution, thresholds, routers, gates) is fit on *fit*
questions only; every table reports *report* questions. The split is by question id: SQuAD
questions on one paragraph fall on both sides, which is harmless for tuning routing parameters
but means a trained router must not memorize passages (split by `doc_id` for that).

Within a split, `--limit N` takes the first N questions in order of a second hash (salted
differently), a stable sample spread over domains and articles.
"""
from __future__ import annotations

from typing import Iterable, Sequence, TypeVar

from hansa.core.errors import InputError
from hansa.evaluation.datasets import Question, stable_hash

SALT = "hansa-eval-split/v1"
ORDER_SALT = "hansa-eval-order/v1"
FIT_PERCENT = 30
SPLITS = ("fit", "report", "all")

Q = TypeVar("Q", bound=Question)


def split_of(question_id: str) -> str:
    """"fit" or "report" for a question id (the rule in the module docstring)."""
    return "fit" if stable_hash(SALT, question_id) % 100 < FIT_PERCENT else "report"


def select(questions: Iterable[Q], split: str) -> list[Q]:
    if split not in SPLITS:
        raise InputError(f"unknown split {split!r}: choose from {', '.join(SPLITS)}")
    return [q for q in questions if split == "all" or split_of(q.id) == split]


def sample(questions: Sequence[Q], limit: int) -> list[Q]:
    """The first `limit` questions in a stable hash order (0: all, in that order)."""
    ordered = sorted(questions, key=lambda q: stable_hash(ORDER_SALT, q.id))
    return ordered[:limit] if limit else ordered
