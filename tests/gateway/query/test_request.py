"""Conversation-aware routing (gateway.query.request): a follow-up turn gains its conversation's
salient words (fast tier)."""
from __future__ import annotations

from hansa.gateway.query.request import carried_words, standalone_question
from hansa.sync.wire import MAX_QUESTION_CHARS

TURNS = ("Tell me about FEMA disaster grants for homeowners.", "Which grants cover flood damage?")


def test_a_follow_up_carries_the_earlier_turns_words_recent_and_repeated_first() -> None:
    words = carried_words("What about the second one?", TURNS, 4, 0.5)
    # "grant" is in both turns (1 + 0.5), the last turn's words (1.0) come before the first's (0.5)
    assert words == ["grant", "cover", "flood", "damage"]
    assert standalone_question("What about the second one?", TURNS, 4, 0.5) == \
        "What about the second one? grant cover flood damage"


def test_words_the_question_has_are_not_repeated_and_a_higher_decay_keeps_older_turns() -> None:
    assert "flood" not in carried_words("Is flood damage covered?", TURNS, 16, 0.5)
    assert carried_words("And then?", TURNS, 16, 1.0)[:1] == ["grant"]
    assert set(carried_words("And then?", TURNS, 16, 0.5)) >= {"fema", "homeowner"}


def test_without_earlier_turns_or_carried_words_the_question_stands_and_length_stays_bounded() -> None:
    assert standalone_question("What is FEMA?", (), 8, 0.5) == "What is FEMA?"
    assert standalone_question("What is FEMA?", TURNS, 0, 0.5) == "What is FEMA?"
    long = "x" * (MAX_QUESTION_CHARS - 3) + "?"
    assert len(standalone_question(long, TURNS, 8, 0.5)) <= MAX_QUESTION_CHARS
