"""The one sentence splitter (core/sentences.py): abbreviations do not end sentences, blank lines
and real ends do, and the spans never lose or reorder text."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from hansa.core.sentences import sentence_spans, split_sentences
from hansa.plugin.answer_candidates import answer_sentences

NOTE = ("The patient was admitted to St. Alder Hospital with atrial fibrillation. She brought her insulin, "
        "inhalers, etc. to the ward. The nurse saw her at 5 p.m. on Friday.")


def test_abbreviations_do_not_end_a_sentence() -> None:
    assert split_sentences(NOTE) == [
        "The patient was admitted to St. Alder Hospital with atrial fibrillation.",
        "She brought her insulin, inhalers, etc. to the ward.",
        "The nurse saw her at 5 p.m. on Friday.",
    ]
    assert split_sentences("Dr. Smith met Gen. Grant near Mt. Hood. They talked.") == [
        "Dr. Smith met Gen. Grant near Mt. Hood.", "They talked."]
    assert split_sentences("The U.S. Army built it in 1942. See e.g. Fig. 2 for the plan.") == [
        "The U.S. Army built it in 1942.", "See e.g. Fig. 2 for the plan."]


def test_the_answer_candidates_of_a_patient_note_are_whole_sentences() -> None:
    """Issue 32: "Alder Hospital with atrial fibrillation." was returned as a sentence."""
    candidates = [s for _, s in answer_sentences(NOTE)]
    assert candidates[0] == "The patient was admitted to St. Alder Hospital with atrial fibrillation."
    assert not any(s.startswith(("Alder", "to the ward")) for s in candidates)


def test_blank_lines_and_question_marks_end_sentences_and_list_markers_stay_with_their_item() -> None:
    text = "Safe Rooms\n\nIs it safe? Yes! Build it to code.\n\n1. Turn off the gas.\n2. Leave the house."
    assert split_sentences(text) == ["Safe Rooms", "Is it safe?", "Yes!", "Build it to code.",
                                     "1. Turn off the gas.", "2. Leave the house."]
    assert split_sentences("") == [] and split_sentences(" \n\n \t") == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(list("ab .!?\n\t\")]1é“") + ["St. ", "etc. ", "\n\n", "Word", "2. "]), max_size=120))
def test_spans_are_ordered_trimmed_and_lose_no_visible_character(pieces: list[str]) -> None:
    text = "".join(pieces)
    spans = sentence_spans(text)
    assert all(a < b for a, b in spans) and all(b <= c for (_, b), (c, _) in zip(spans, spans[1:]))
    assert all(not text[a].isspace() and not text[b - 1].isspace() for a, b in spans)
    assert "".join("".join(text[a:b] for a, b in spans).split()) == "".join(text.split())
