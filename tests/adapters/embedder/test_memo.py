"""MemoEmbedder in front of the real ONNX embedder (the exported graph is cached per user)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from hansa.adapters.embedder.memo import MemoEmbedder
from hansa.adapters.embedder.onnx import OnnxEmbedder
from hansa.core.errors import InputError


class Counting(OnnxEmbedder):
    """The real embedder, counting the texts it is asked to embed (so hits are observable)."""

    def __init__(self) -> None:
        super().__init__()
        self.embedded: list[str] = []

    def embed(self, texts):  # type: ignore[override]
        texts = list(texts)
        self.embedded.extend(texts)
        return super().embed(texts)


@pytest.fixture(scope="module")
def inner() -> Counting:
    return Counting()


def test_hits_return_the_same_vector_without_embedding_again(inner: Counting) -> None:
    memo = MemoEmbedder(inner, maxsize=8)
    assert (memo.model_id, memo.dim) == (inner.model_id, inner.dim)
    before = len(inner.embedded)
    first = memo.embed_one("What items should I keep in a safe room?")
    again = memo.embed_one("What items should I keep in a safe room?")
    np.testing.assert_array_equal(first, again)
    np.testing.assert_allclose(first, inner.embed(["What items should I keep in a safe room?"])[0], atol=1e-6)
    assert len(inner.embedded) - before == 2  # one miss, then the direct call above; the hit embedded nothing
    assert (memo.hits, memo.misses) == (1, 1)


def test_a_batch_embeds_only_new_texts_once_each_in_order(inner: Counting) -> None:
    memo = MemoEmbedder(inner, maxsize=8)
    memo.embed_one("b")
    inner.embedded.clear()
    out = memo.embed(["a", "b", "a", "c"])
    assert inner.embedded == ["a", "c"]
    reference = inner.embed(["a", "b", "a", "c"])
    np.testing.assert_allclose(out, reference, atol=1e-6)
    assert out.dtype == np.float32 and out.shape == (4, inner.dim)
    assert memo.embed([]).shape == (0, inner.dim)


def test_the_least_recently_used_entry_is_evicted(inner: Counting) -> None:
    memo = MemoEmbedder(inner, maxsize=2)
    memo.embed(["one", "two"])
    memo.embed_one("one")  # "two" is now the least recently used
    memo.embed_one("three")
    inner.embedded.clear()
    memo.embed(["one", "three", "two"])
    assert inner.embedded == ["two"]


def test_callers_cannot_corrupt_the_cache(inner: Counting) -> None:
    memo = MemoEmbedder(inner, maxsize=4)
    v = memo.embed_one("mutable?")
    kept = v.copy()
    v[:] = 0
    memo.embed(["mutable?"])[0][:] = 0
    np.testing.assert_array_equal(memo.embed_one("mutable?"), kept)


def test_concurrent_callers_agree(inner: Counting) -> None:
    memo = MemoEmbedder(inner, maxsize=16)
    texts = [f"question {i % 5}" for i in range(40)]
    results: dict[int, np.ndarray] = {}

    def ask(i: int) -> None:
        results[i] = memo.embed_one(texts[i])

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, text in enumerate(texts):
        np.testing.assert_array_equal(results[i], results[int(text.split()[1])])
    assert memo.hits + memo.misses == len(texts)


class Gated(Counting):
    """The real embedder, held inside a batch until released; `fail` makes the held batch raise."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()
        self.fail = False
        self.held_batches = 0  # batches asked to embed "held", failed ones included

    def embed(self, texts):  # type: ignore[override]
        texts = list(texts)
        if "held" in texts:
            self.held_batches += 1
            self.entered.set()
            self.release.wait(10)
            if self.fail:
                self.fail = False
                raise RuntimeError("the first flight failed")
        return super().embed(texts)


@pytest.mark.parametrize("first_fails", [False, True])
def test_a_text_another_thread_is_embedding_is_waited_for_not_embedded_twice(first_fails: bool) -> None:
    inner = Gated()
    inner.fail = first_fails
    memo = MemoEmbedder(inner, maxsize=8)
    got: dict[str, object] = {}

    def first() -> None:
        try:
            got["first"] = memo.embed(["held"])
        except RuntimeError as exc:
            got["first"] = exc

    a = threading.Thread(target=first)
    a.start()
    assert inner.entered.wait(10)
    b = threading.Thread(target=lambda: got.__setitem__("second", memo.embed(["other", "held"])))
    b.start()
    b.join(0.5)
    assert b.is_alive()  # "other" embedded, "held" awaited from the first flight
    assert inner.embedded == ["other"] and inner.held_batches == 1
    inner.release.set()
    a.join(10)
    b.join(10)
    assert inner.embedded == ["other", "held"]
    if first_fails:  # the waiter took the text up itself
        assert isinstance(got["first"], RuntimeError) and inner.held_batches == 2
    else:
        assert inner.held_batches == 1
        np.testing.assert_array_equal(got["second"][1], got["first"][0])  # type: ignore[index]
    np.testing.assert_allclose(got["second"], inner.embed(["other", "held"]), atol=1e-6)  # type: ignore[arg-type]


def test_bad_input_is_refused(inner: Counting) -> None:
    with pytest.raises(InputError):
        MemoEmbedder(inner, maxsize=0)
    memo = MemoEmbedder(inner)
    with pytest.raises(InputError):
        memo.embed_one(3)  # type: ignore[arg-type]
    with pytest.raises(InputError):
        memo.embed("text")  # type: ignore[arg-type]
