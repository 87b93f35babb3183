"""Sentence boundaries: the one splitter every part of hansa uses (chunking, answer candidates,
summaries, the gateway's check of a synthesized answer).

Why a library: a regex that ends a sentence at every ". " cut "admitted to St. Alder Hospital
with atrial fibrillation." into "...to St." and "Alder Hospital with atrial fibrillation.", and a
site answered with the fragment (issue 32). Abbreviations ("St.", "etc.", "Dr.", "U.S.", "e.g.",
"p.m.", "Fig.") need a segmenter that knows them.

Why BlingFire (Microsoft's `blingfire`, a compiled finite-state segmenter returning character
offsets into the input): measured with `python scripts/bench_sentences.py` on its 18 tricky cases
(abbreviations, titles, initials, decimals, quotes, a blank-line heading, a numbered list) and the
first 1,000 SQuAD paragraphs of /work/shared/datasets/squad/passages.jsonl.gz (0.73 M characters),
on the shared 2-core development machine, 2026-11-27 (speeds vary with its load by ~2x):

    splitter                   tricky cases   1,000 SQuAD paragraphs
    regex (hansa before)           5/18       0.04 s   19 M chars/s
    pysbd 0.3.4                   18/18       4.15 s   0.18 M chars/s
    syntok 1.4.4                  18/18       0.59 s   1.2 M chars/s
    blingfire 0.1.8               15/18       0.14 s   5.4 M chars/s
    blingfire + the rules below   17/18       0.16 s   4.6 M chars/s

and on the two ingest stages that split (the same paragraphs as ten-paragraph documents, 1,007
chunks of <= 900 characters): chunking 7,281 chunks/s and answer candidates 5,166 chunks/s with
BlingFire, 1,641 and 1,500 with syntok; pysbd would cap a stage near 200 chunks/s. syntok is
right on all the made-up cases, but on real text it splits after "Rev." ("the Rev. | Theodore M.
Hesburgh": six of the first eight of the 97 SQuAD paragraphs where the two differ) and at
semicolons, where BlingFire is right; BlingFire is also 4x faster. Its known miss: "...the ward. Dr.
Okafor saw her. Mr. Li came too." is cut after "Mr." and not before "Dr." (a title after a full
stop, or before a short name). nltk's punkt needs data files downloaded apart from the package.

Two rules are hansa's own, on top of BlingFire: a blank line always ends a sentence (headings and
list items are not run into the next paragraph; BlingFire joins them), and a lone list marker
("1.", "b)") is never a sentence of its own (it stays with the item it numbers). The spans cover
the text without gaps, so packing sentences into chunks can never lose a character.
"""
from __future__ import annotations

import re

import blingfire

_PARAGRAPH = re.compile(r"\n[ \t\f]*\n")  # a PDF's page break is a blank line holding a form feed
_LIST_MARKER = re.compile(r"(?:\d{1,3}|[A-Za-z]|[ivxIVX]{1,4})[.)]")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of `text`, without surrounding whitespace, in order."""
    ends: list[int] = []
    begin = 0
    for match in _PARAGRAPH.finditer(text):
        _paragraph_ends(text, begin, match.start(), ends)
        begin = match.end()
    _paragraph_ends(text, begin, len(text), ends)
    spans: list[tuple[int, int]] = []
    start = 0
    for end in ends:
        span = _trimmed(text, start, end)
        if span is not None:
            spans.append(span)
        start = end
    return spans


def split_sentences(text: str) -> list[str]:
    """The sentences of `text` as strings (whitespace around each removed)."""
    return [text[a:b] for a, b in sentence_spans(text)]


def _paragraph_ends(text: str, start: int, stop: int, ends: list[int]) -> None:
    """Append where each sentence of text[start:stop] ends (absolute offsets; the last is `stop`)."""
    paragraph = text[start:stop]
    if paragraph.strip():
        _, offsets = blingfire.text_to_sentences_and_offsets(paragraph)
        previous = 0
        for _, end in offsets[:-1]:  # the paragraph's own end closes its last sentence
            if _LIST_MARKER.fullmatch(paragraph[previous:end].strip()):
                continue  # "1." numbers the item after it
            ends.append(start + end)
            previous = end
    ends.append(stop)


def _trimmed(text: str, start: int, end: int) -> tuple[int, int] | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None
