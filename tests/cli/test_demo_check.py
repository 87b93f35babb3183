"""`hansa demo`'s self-check tests the answer, not only which sites it cites."""
from __future__ import annotations

from hansa.cli.demo import answer_check, bundled_sample


def _case(i: int) -> tuple[str, list[str]]:
    passages, questions = bundled_sample()
    texts = {p["id"]: p["text"] for p in passages}
    q = questions[i]
    return q["question"], [texts[g] for g in q["gold"]]


def test_an_answer_quoting_the_gold_answer_sentence_passes() -> None:
    question, gold = _case(0)
    check = answer_check("nothing yet", question, gold)
    assert check["ok"] is False and check["gold_sentence"]
    quoted = answer_check(f"{check['gold_sentence']} [1]", question, gold)
    assert quoted["ok"] is True and quoted["shared_words"]


def test_an_off_topic_answer_citing_anything_fails() -> None:
    question, gold = _case(1)  # the flu-vaccine question the demo once "passed" with safe rooms
    check = answer_check("Keep water and a radio in a safe room [1]. Egg donation is paid [2].", question, gold)
    assert check["ok"] is False


def test_without_a_gold_passage_there_is_nothing_to_check() -> None:
    assert answer_check("anything", "a question", [])["ok"] is None
