"""Term statistics (sync.terms): what a site counts, the wire form's round trip, and every way a
peer's sketch can be malformed."""
from __future__ import annotations

import base64
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hansa.core.errors import InputError
from hansa.sync.terms import KEY_BITS, MAX_DF, TermSketch, read_sketch, term_keys, terms

DOCS = [
    ("d1", "The Normans conquered England in 1066."),
    ("d1", "Normans came from Normandy."),  # a second chunk of d1: d1 still counts once
    ("d2", "Normandy is a region of France; the Normans settled there."),
    ("d3", "Beyoncé released Dangerously in Love in 2003."),
]


def test_terms_fold_and_drop_stopwords_and_short_numbers() -> None:
    assert terms("The NORMANS, in 1066 and 12 ships!") == {"normans", "1066", "ships"}


def test_document_counts_and_threshold() -> None:
    sketch = TermSketch.from_documents(DOCS, min_documents=2)
    assert sketch.documents == 3
    # only words two documents use: normans (d1, d2), normandy (d1, d2)
    assert len(sketch) == 2
    found = sketch.lookup(term_keys("normans normandy beyoncé england"))
    by_word = dict(zip(["normans", "normandy", "beyoncé", "england"],
                       [int(sketch.lookup(term_keys(w))[0]) for w in ["normans", "normandy", "beyoncé", "england"]]))
    assert by_word == {"normans": 2, "normandy": 2, "beyoncé": 0, "england": 0}
    assert sorted(found.tolist()) == [0, 0, 2, 2]
    everything = TermSketch.from_documents(DOCS, min_documents=1)
    assert int(everything.lookup(term_keys("beyoncé"))[0]) == 1
    assert everything.total == int(everything.dfs.sum())


def test_round_trip_is_exact() -> None:
    rng = np.random.default_rng(7)
    keys = np.unique(rng.integers(0, 1 << KEY_BITS, 5000)).astype(np.uint32)
    dfs = rng.integers(2, 900, len(keys)).astype(np.uint16)
    sketch = TermSketch(documents=1000, min_documents=2, keys=keys, dfs=dfs)
    back = read_sketch(sketch.record().to_json())
    assert (back.keys == keys).all() and (back.dfs == dfs).all()
    assert (back.documents, back.min_documents, back.total) == (1000, 2, int(dfs.sum()))
    assert sketch.stored_bytes() < 3.5 * len(keys)  # the byte planes compress


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcdef"), st.text(max_size=60)), max_size=30), st.integers(1, 3))
def test_any_corpus_round_trips(docs: list[tuple[str, str]], min_documents: int) -> None:
    sketch = TermSketch.from_documents(docs, min_documents)
    back = read_sketch(sketch.record().to_json())
    assert (back.keys == sketch.keys).all() and (back.dfs == sketch.dfs).all()
    assert all(min_documents <= d <= sketch.documents for d in sketch.dfs.tolist())


def test_empty_sketch() -> None:
    sketch = TermSketch.from_documents([], 2)
    back = read_sketch(sketch.record().to_json())
    assert len(back) == 0 and back.documents == 0
    assert back.lookup(term_keys("normans england")).tolist() == [0, 0]


def _packed(gaps: list[int], dfs: list[int]) -> str:
    raw = np.asarray(gaps, "<u4").view(np.uint8).reshape(-1, 4).T.tobytes()
    raw += np.asarray(dfs, "<u2").view(np.uint8).reshape(-1, 2).T.tobytes()
    return base64.b64encode(zlib.compress(raw)).decode()


def _sketch(**over: object) -> dict[str, object]:
    obj: dict[str, object] = {"documents": 10, "min_documents": 2, "count": 2, "data": _packed([5, 3], [2, 4])}
    obj.update(over)
    return obj


def test_a_hand_made_sketch_reads_back() -> None:
    back = read_sketch(_sketch())
    assert back.keys.tolist() == [5, 8] and back.dfs.tolist() == [2, 4]


@pytest.mark.parametrize("bad, message", [
    ([], "terms: expected an object"),
    ({**_sketch(), "extra": 1}, r"terms: unknown keys \['extra'\]"),
    (_sketch(count=3), "inflate to exactly 3"),
    (_sketch(count=1), "inflate to exactly 1"),
    (_sketch(count=-1), "'count': input should be greater than or equal to 0"),
    (_sketch(documents=True), "'documents' has the wrong type"),
    (_sketch(min_documents=0), "'min_documents': input should be greater than or equal to 1"),
    (_sketch(data="not base64!"), "base64"),
    (_sketch(data=base64.b64encode(b"plain bytes").decode()), "zlib"),
    (_sketch(data=_packed([5, 0], [2, 4])), "strictly ascending"),
    (_sketch(data=_packed([1 << KEY_BITS, 1], [2, 4])), "strictly ascending"),
    (_sketch(data=_packed([5, 3], [1, 4])), "document counts"),
    (_sketch(data=_packed([5, 3], [2, 11])), "document counts"),
    (_sketch(data=_packed([5, 3], [2, 4]) [:-4] + "AAA="), "base64|zlib|inflate"),
])
def test_malformed_sketches_are_refused(bad: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        read_sketch(bad)


def test_a_zip_bomb_is_not_inflated() -> None:
    bomb = base64.b64encode(zlib.compress(b"\0" * (64 << 20))).decode()
    with pytest.raises(InputError, match="inflate to exactly 2"):
        read_sketch(_sketch(data=bomb))


def test_counts_are_capped_and_threshold_validated() -> None:
    big = [("d%d" % i, "common") for i in range(MAX_DF + 5)]
    sketch = TermSketch.from_documents(big, 1)
    assert sketch.dfs.tolist() == [MAX_DF] and sketch.documents == MAX_DF + 5
    read_sketch(sketch.record().to_json())
    with pytest.raises(InputError, match="terms_min_documents"):
        TermSketch.from_documents(DOCS, 0)
