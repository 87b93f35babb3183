"""Term statistics a site publishes beside its summary vectors: which words its documents use, and
in how many of them.

Why: at realistic site sizes the summary vectors alone route poorly. On SQuAD split over 16 sites
(~1,640 chunks each), gold-site recall at 4 of 16 sites was 0.71 from summary vectors, and 0.94
even for a router holding every chunk vector — dense vectors miss the rare words (names, titles,
terms of art) that decide which site holds a factoid. Federated search has ranked collections by
their term statistics since CORI (Callan, Lu & Croft, SIGIR 1995); the gateway does the same
(the lexical part of gateway.query.route) and blends it with the summary match. Measured in benchmarks/README.md.

What it reveals, and what it does not: a 24-bit hash of each word (3+ characters, not a stopword,
folded as core.text folds) that at least `min_documents` of the site's documents use, with the
number of documents that use it. Anyone holding the publication can test a guessed word, so a word
used by a single document (a patient's rare surname, a project code name) is never published with
the default `[site] terms_min_documents = 2`, and `[site] publish_terms = false` publishes none.
No text, no word order, nothing that ties a word to a document leaves the site.

Wire form (inside the signed publication payload, key "terms"): the number of documents counted,
the threshold, the number of terms, and one base64 string of zlib-compressed bytes: the sorted
keys as little-endian uint32 gaps (first key, then differences) and each key's document count as
little-endian uint16 (capped at 65,535), stored byte plane by byte plane (every gap's lowest byte,
then every gap's second byte, ...: the high planes are nearly all zero and zlib removes them).
Why this and not a Bloom filter: the gateway needs the counts (CORI weighs a word by how many
documents use it), and this needs nothing beyond numpy and the standard library.
"""
from __future__ import annotations

import hashlib
import re
import zlib
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Annotated, ClassVar, Iterable

import numpy as np
from pydantic import Field, StrictInt, StrictStr

from hansa.core.errors import InputError
from hansa.core.model import FORBID, Wire
from hansa.core.text import STOPWORDS, fold
from hansa.sync.vectors import b64decode_strict, b64encode

MAX_TERMS = 4_000_000  # one site's published vocabulary; far above any corpus's distinct words
MAX_DF = 65_535
# 24-bit keys: a word absent from a 10,000-word site matches by chance with p = 0.06%, and sorted
# 24-bit gaps compress to ~2.4 bytes per term (32-bit: ~3.3; SQuAD, 16 sites, scratch measurement).
KEY_BITS = 24
_KEYS = np.dtype("<u4")
_DFS = np.dtype("<u2")
_ROW_BYTES = _KEYS.itemsize + _DFS.itemsize
_WORD = re.compile(r"\w[\w'-]*")


@lru_cache(maxsize=1 << 18)
def _key(term: str) -> int:
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest(), "little") >> (32 - KEY_BITS)


def terms(text: str) -> set[str]:
    """The words of `text` that count: folded, 3+ characters, not stopwords, not short numbers
    (a year like 1066 is kept: it names something; "12" does not)."""
    return {w for w in _WORD.findall(fold(text))
            if len(w) >= 3 and w not in STOPWORDS and not (w.isdigit() and len(w) < 4)}


def term_keys(text: str) -> np.ndarray:
    """The sorted, distinct keys of `text`'s words (what a question is looked up by)."""
    return np.unique(np.fromiter((_key(t) for t in terms(text)), dtype=np.uint32))


def _planes(values: np.ndarray, dtype: np.dtype) -> bytes:
    return values.astype(dtype).view(np.uint8).reshape(-1, dtype.itemsize).T.tobytes()


def _unplanes(raw: bytes, dtype: np.dtype, count: int) -> np.ndarray:
    planes = np.frombuffer(raw, dtype=np.uint8).reshape(dtype.itemsize, count)
    return planes.T.copy().view(dtype).reshape(count)


@dataclass(frozen=True, eq=False)
class TermSketch:
    """A site's published vocabulary: sorted distinct keys and, per key, its document count."""

    documents: int  # documents counted (the site's corpus size, for normalizing)
    min_documents: int  # a word used by fewer documents was left out
    keys: np.ndarray  # uint32, strictly ascending
    dfs: np.ndarray  # uint16, min_documents <= df <= min(documents, MAX_DF)
    total: int = field(init=False)  # sum of dfs: CORI's "collection word count"

    def __post_init__(self) -> None:
        object.__setattr__(self, "total", int(self.dfs.sum(dtype=np.int64)))

    def __len__(self) -> int:
        return len(self.keys)

    @classmethod
    def from_documents(cls, documents: Iterable[tuple[str, str]], min_documents: int = 2) -> "TermSketch":
        """From (doc_id, text) pairs; a document may come in several pieces (its chunks)."""
        if isinstance(min_documents, bool) or not isinstance(min_documents, int) or min_documents < 1:
            raise InputError(f"terms_min_documents must be a positive integer, not {min_documents!r}")
        per_doc: dict[str, set[int]] = {}
        for doc_id, text in documents:
            per_doc.setdefault(doc_id, set()).update(_key(t) for t in terms(text))
        counts: Counter[int] = Counter()
        for keys in per_doc.values():
            counts.update(keys)
        kept = sorted(k for k, n in counts.items() if n >= min_documents)
        return cls(
            documents=len(per_doc), min_documents=min_documents,
            keys=np.asarray(kept, dtype=np.uint32),
            dfs=np.asarray([min(counts[k], MAX_DF) for k in kept], dtype=np.uint16),
        )

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """Document counts of `keys` (0 where the site did not publish the word)."""
        if not len(self.keys) or not len(keys):
            return np.zeros(len(keys), dtype=np.int64)
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        return np.where(self.keys[at] == keys, self.dfs[at].astype(np.int64), 0)

    def record(self) -> "TermsRecord":
        """The sketch as it travels and is stored (`TermsRecord.to_json()` writes it)."""
        gaps = np.diff(self.keys.astype(np.int64), prepend=0).astype(_KEYS)
        raw = _planes(gaps, _KEYS) + _planes(self.dfs.astype(_DFS), _DFS)
        return TermsRecord(self.documents, self.min_documents, len(self.keys), b64encode(zlib.compress(raw, 9)))

    def stored_bytes(self) -> int:
        """Bytes of the compressed sketch (its base64 in a publication is 4/3 of this)."""
        return len(b64decode_strict(self.record().data, "terms.data"))


@dataclass(frozen=True)
class TermsRecord(Wire):
    """A sketch's wire form (the module docstring): in a publication's payload, a gateway head file,
    a site's terms file. The model checks the numbers; `sketch` decodes `data`, bounded by `count`
    before it inflates anything, and refuses what the numbers do not allow."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "terms"

    documents: Annotated[StrictInt, Field(ge=0, le=2**53)]
    min_documents: Annotated[StrictInt, Field(ge=1, le=MAX_DF)]
    count: Annotated[StrictInt, Field(ge=0, le=MAX_TERMS)]
    data: StrictStr  # base64 of zlib-compressed byte planes

    def sketch(self, where: str = "terms") -> TermSketch:
        """The decoded sketch; strict: ascending keys, counts within [min_documents, documents] —
        a malformed sketch is refused, never guessed at."""
        count = self.count
        packed = b64decode_strict(self.data, f"{where}.data")
        expected = count * _ROW_BYTES
        inflate = zlib.decompressobj()
        try:
            raw = inflate.decompress(packed, expected + 1)  # never inflate past what `count` allows
        except zlib.error as exc:
            raise InputError(f"{where}.data: not a zlib stream ({exc})") from exc
        if len(raw) != expected or not inflate.eof or inflate.unconsumed_tail or inflate.unused_data:
            raise InputError(f"{where}.data: must inflate to exactly {count} terms ({expected} bytes)")
        gaps = _unplanes(raw[:count * _KEYS.itemsize], _KEYS, count).astype(np.int64)
        dfs = _unplanes(raw[count * _KEYS.itemsize:], _DFS, count).astype(np.uint16)
        keys = np.cumsum(gaps)
        if count and ((gaps[1:] <= 0).any() or keys[-1] >= 1 << KEY_BITS):
            raise InputError(f"{where}.data: keys must be strictly ascending {KEY_BITS}-bit values")
        if count and (int(dfs.min()) < self.min_documents or int(dfs.max()) > min(self.documents, MAX_DF)):
            raise InputError(f"{where}.data: document counts must lie in min_documents..documents")
        return TermSketch(documents=self.documents, min_documents=self.min_documents, keys=keys.astype(np.uint32),
                          dfs=dfs)


def read_sketch(obj: object, where: str = "terms") -> TermSketch:
    """A sketch from its decoded JSON (InputError naming `where` and the field when malformed)."""
    return TermsRecord.from_json(obj, where).sketch(where)
