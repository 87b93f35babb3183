"""Chunking: provenance offsets, sentence alignment, overlap and deterministic ids."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hansa.core.errors import ConfigError
from hansa.plugin.chunking import chunk_id, chunk_text, sentence_spans

TEXT = (
    "The Federal Reserve raised rates in March. Banks followed within days! Did mortgages react? "
    "They did, sharply.\n\nA second paragraph starts here. It has two sentences.\n\n"
    "Third paragraph: one long sentence that keeps going with many words about interest, inflation "
    "and employment so that it is longer than a small chunk would allow on its own."
)


def test_sentence_spans_trim_whitespace_and_split_on_ends_and_blank_lines() -> None:
    spans = sentence_spans(TEXT)
    sentences = [TEXT[s:e] for s, e in spans]
    assert sentences[:4] == [
        "The Federal Reserve raised rates in March.",
        "Banks followed within days!",
        "Did mortgages react?",
        "They did, sharply.",
    ]
    assert sentences[4] == "A second paragraph starts here."
    assert all(s == s.strip() and s for s in sentences)


def test_offsets_point_into_the_text() -> None:
    chunks = chunk_text("doc-1", TEXT, 120, 40)
    assert len(chunks) > 2
    for i, c in enumerate(chunks):
        assert TEXT[c.start:c.end] == c.text
        assert c.ordinal == i and c.doc_id == "doc-1"
        assert len(c.text) <= 120


def test_chunks_end_on_sentence_boundaries_when_sentences_fit() -> None:
    chunks = chunk_text("d", TEXT, 200, 0)
    ends = {e for _, e in sentence_spans(TEXT)}
    starts = {s for s, _ in sentence_spans(TEXT)}
    for c in chunks[:-1]:
        # the long last sentence is split at whitespace, everything before ends on a sentence end
        if c.end <= TEXT.index("Third"):
            assert c.end in ends and c.start in starts


def test_overlap_repeats_trailing_sentences() -> None:
    chunks = chunk_text("d", TEXT, 140, 60)
    overlapping = [(a, b) for a, b in zip(chunks, chunks[1:]) if b.start < a.end]
    assert overlapping, "some consecutive chunks must share text"
    for a, b in overlapping:
        assert a.end - b.start <= 60
        assert TEXT[b.start:a.end] in a.text and TEXT[b.start:a.end] in b.text


def test_no_overlap_when_zero() -> None:
    chunks = chunk_text("d", TEXT, 140, 0)
    assert all(b.start >= a.end for a, b in zip(chunks, chunks[1:]))


def test_ids_are_deterministic_and_depend_on_doc_ordinal_and_text() -> None:
    first = chunk_text("d", TEXT, 150, 30)
    again = chunk_text("d", TEXT, 150, 30)
    assert [c.id for c in first] == [c.id for c in again]
    assert len({c.id for c in first}) == len(first)
    other_doc = chunk_text("e", TEXT, 150, 30)
    assert {c.id for c in first}.isdisjoint(c.id for c in other_doc)
    assert chunk_id("d", 0, "x") != chunk_id("d", 1, "x") != chunk_id("d", 1, "y")
    # length-prefixed hashing: shifting characters between fields changes the id
    assert chunk_id("ab", 1, "c") != chunk_id("a", 1, "bc")
    assert len(first[0].id) == 32


def test_a_word_longer_than_the_chunk_is_hard_cut() -> None:
    text = "x" * 50 + " tail."
    chunks = chunk_text("d", text, 20, 5)
    assert [c.text for c in chunks] == ["x" * 20, "x" * 20, "x" * 10 + " tail."]


def test_blank_text_has_no_chunks() -> None:
    assert chunk_text("d", " \n\t ", 100, 10) == ()


@pytest.mark.parametrize("size, overlap", [(10, 0), (100, 100), (100, -1), (100, 150)])
def test_bad_settings_are_config_errors(size: int, overlap: int) -> None:
    with pytest.raises(ConfigError, match="site.chunk_"):
        chunk_text("d", TEXT, size, overlap)


@settings(max_examples=200, deadline=None)
@given(
    text=st.lists(st.sampled_from(list("ab .!?\n\t") + ["\n\n", "Ünï", "word", "  ", "x" * 30]), max_size=120).map("".join),
    size=st.integers(16, 120),
    data=st.data(),
)
def test_properties_on_arbitrary_text(text: str, size: int, data: st.DataObject) -> None:
    overlap = data.draw(st.integers(0, size - 1))
    chunks = chunk_text("doc", text, size, overlap)
    covered = [False] * len(text)
    for i, c in enumerate(chunks):
        assert text[c.start:c.end] == c.text
        assert c.text and c.text == c.text.strip() and len(c.text) <= size
        assert c.ordinal == i
        for j in range(c.start, c.end):
            covered[j] = True
    assert [c.start for c in chunks] == sorted(c.start for c in chunks)
    assert [c.end for c in chunks] == sorted(c.end for c in chunks)
    # nothing but whitespace is ever left out
    assert all(covered[j] or text[j].isspace() for j in range(len(text)))
