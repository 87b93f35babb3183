"""The rule that picks a question's reader floor (gateway.query.reading): real questions from
SQuAD and MTRAG, each side of every clause of the rule."""
from __future__ import annotations

import pytest

from hansa.gateway.query.reading import DESCRIPTIVE, FACTOID, question_kind

FACTOIDS = [
    "Who was Hubble?",
    "When did the Virgin Mary appear to Bernadette at Lourdes?",
    "How many people live in Lyon?",
    "What is the capital of France?",
    "What year was it when St. Elizabeth flooded part of the North Sea?",  # "St." splits no question
    "got it. how much does it cost to have a police report?",  # the asking sentence counts
    "Which river flows through Lyon?",
]
DESCRIPTIVES = [
    "What does the Federal Emergency Management Agency do?",
    "What should I do if my garbage collection is missed?",
    "How do I appeal a parking ticket?",
    "Why Mars?",
    "Tell me about the Deep Impact mission",
    "Explain the difference between stocks and bonds",
    "Can we take the pets in the park?",
    "what is the difference between primary and archaeological sources",
    "What is an identifier?",  # a definition: no relation named
    "What happens if a deadline is not met?",
    "Sole proprietorship or S-Corp, what should I do?",  # from the first question word
    "capital gains tax on stocks",  # a topic typed as a query
]


@pytest.mark.parametrize("question", FACTOIDS)
def test_a_question_asking_for_a_fact_is_factoid(question: str) -> None:
    assert question_kind(question) == FACTOID


@pytest.mark.parametrize("question", DESCRIPTIVES)
def test_a_question_asking_for_a_description_is_descriptive(question: str) -> None:
    assert question_kind(question) == DESCRIPTIVE


def test_empty_text_is_factoid_the_stricter_default() -> None:
    assert question_kind("") == FACTOID and question_kind("?!") == FACTOID
