"""Split a document into overlapping, sentence-aligned chunks that point back into its text.

Why sentence-aligned: a chunk is what retrieval returns and what an answer cites, so cutting
mid-sentence would hand the reader (and the embedder) half a claim. Why offsets: every chunk carries
`start`/`end` with `text[start:end] == chunk.text`, so anyone can check a citation against the source.
Why deterministic ids: re-chunking the same text gives the same ids, which makes re-ingest a no-op.
"""
from __future__ import annotations

import hashlib
import re

from hansa.adapters.records import Chunk
from hansa.core.errors import ConfigError
from hansa.core.sentences import sentence_spans  # the one splitter (abbreviation-aware)

MIN_CHUNK_SIZE = 16
CHUNK_ID_HEX = 32  # 128 bits of sha256: collision-free in practice, short enough for logs and URLs

_NON_SPACE = re.compile(r"\S")
_SPACE_RUN = re.compile(r"\s+")


def _split_long(text: str, start: int, end: int, size: int) -> list[tuple[int, int]]:
    """A sentence longer than a chunk is cut at the last whitespace that fits (hard cut if none)."""
    pieces: list[tuple[int, int]] = []
    while end - start > size:
        limit = start + size
        cut = -1
        for match in _SPACE_RUN.finditer(text, start + 1, limit + 1):
            cut = match.start()
        if cut <= start:
            pieces.append((start, limit))
            start = limit
        else:
            pieces.append((start, cut))
            start = _NON_SPACE.search(text, cut, end).start()  # type: ignore[union-attr]
    pieces.append((start, end))
    return pieces


def _units(text: str, size: int) -> list[tuple[int, int]]:
    units: list[tuple[int, int]] = []
    for start, end in sentence_spans(text):
        units.extend(_split_long(text, start, end, size) if end - start > size else [(start, end)])
    return units


def chunk_id(doc_id: str, ordinal: int, text: str) -> str:
    digest = hashlib.sha256()
    for part in (doc_id, str(ordinal), text):
        encoded = part.encode("utf-8")
        digest.update(len(encoded).to_bytes(8, "big"))  # length-prefixed: no ambiguous concatenation
        digest.update(encoded)
    return digest.hexdigest()[:CHUNK_ID_HEX]


def check_chunking(size: int, overlap: int) -> None:
    if size < MIN_CHUNK_SIZE:
        raise ConfigError(f"site.chunk_size={size} is too small; use at least {MIN_CHUNK_SIZE} characters (default 1200)")
    if not 0 <= overlap < size:
        raise ConfigError(f"site.chunk_overlap={overlap} must be >= 0 and smaller than site.chunk_size={size}")


def chunk_text(doc_id: str, text: str, size: int, overlap: int) -> tuple[Chunk, ...]:
    """Pack whole sentences into chunks of at most `size` characters.

    Each chunk after the first starts with the trailing sentences of the previous one that fit in
    `overlap` characters, so a fact straddling a boundary is retrievable from either side; a chunk
    always adds at least one new sentence, so the loop always advances."""
    check_chunking(size, overlap)
    units = _units(text, size)
    chunks: list[Chunk] = []
    first = 0
    previous_last = -1
    while previous_last < len(units) - 1:
        last = _pack(units, first, size)
        if last <= previous_last:  # the overlap left no room for a new sentence: start fresh
            first = previous_last + 1
            last = _pack(units, first, size)
        start, end = units[first][0], units[last][1]
        body = text[start:end]
        ordinal = len(chunks)
        chunks.append(Chunk(id=chunk_id(doc_id, ordinal, body), doc_id=doc_id, ordinal=ordinal, text=body, start=start, end=end))
        previous_last = last
        first = _overlap_start(units, first, last, overlap)
    return tuple(chunks)


def _pack(units: list[tuple[int, int]], first: int, size: int) -> int:
    """Index of the last unit that still fits in a chunk starting at `first` (at least `first`)."""
    start = units[first][0]
    last = first
    while last + 1 < len(units) and units[last + 1][1] - start <= size:
        last += 1
    return last


def _overlap_start(units: list[tuple[int, int]], first: int, last: int, overlap: int) -> int:
    """The earliest unit after `first` whose start lies within `overlap` characters of the end."""
    end = units[last][1]
    candidate = last + 1
    while candidate - 1 > first and end - units[candidate - 1][0] <= overlap:
        candidate -= 1
    return candidate
