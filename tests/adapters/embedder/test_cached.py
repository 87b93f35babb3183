"""The content-addressed embedding cache, in front of a fake of hansa's own Embedder port (a
deterministic hash embedder that counts what it is asked to embed)."""
from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Sequence

import numpy as np

from hansa.adapters.embedder.base import Embedder
from hansa.adapters.embedder.cached import CachedEmbedder


class CountingEmbedder(Embedder):
    def __init__(self, model_id: str = "fake/model", dim: int = 8) -> None:
        self.model_id, self.dim, self.asked = model_id, dim, []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.asked.extend(texts)
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest()[: self.dim * 4], dtype=np.uint8)[: self.dim]
                .astype(np.float32) + 1 for t in texts]
        m = np.vstack(rows)
        return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_second_request_and_a_second_instance_are_served_from_disk(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    cache = CachedEmbedder(inner, tmp_path / "e.sqlite")
    first = cache.embed(["a", "b", "a"])
    assert inner.asked == ["a", "b"]  # duplicates in one batch embed once
    np.testing.assert_array_equal(first[0], first[2])
    np.testing.assert_array_equal(cache.embed(["b", "c"])[0], first[1])
    assert inner.asked == ["a", "b", "c"]
    cache.close()
    again = CachedEmbedder(inner, tmp_path / "e.sqlite")
    np.testing.assert_array_equal(again.embed(["c", "a"]), np.vstack([inner.embed(["c"])[0], first[0]]))
    assert again.hits == 2 and again.misses == 0
    assert again.embed([]).shape == (0, 8)


def test_another_model_never_gets_these_vectors(tmp_path: Path) -> None:
    CachedEmbedder(CountingEmbedder("fake/one"), tmp_path / "e.sqlite").embed(["a"])
    other = CountingEmbedder("fake/two")
    CachedEmbedder(other, tmp_path / "e.sqlite").embed(["a"])
    assert other.asked == ["a"]


def test_a_torn_row_is_recomputed_not_returned(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    cache = CachedEmbedder(inner, tmp_path / "e.sqlite")
    good = cache.embed(["a"])[0]
    db = sqlite3.connect(tmp_path / "e.sqlite")
    db.execute("UPDATE vectors SET vector = ? WHERE key = ?", (b"\x00" * 10, cache.key("a")))
    db.commit()
    db.close()
    np.testing.assert_array_equal(cache.embed(["a"])[0], good)
    assert inner.asked == ["a", "a"]


class PrefixedEmbedder(CountingEmbedder):
    """A model that prepends a declared query prefix (as catalog models may: onnx.Recipe)."""

    def __init__(self, query_prefix: str) -> None:
        super().__init__()
        self.prefixes = (query_prefix, "")

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed([self.prefixes[0] + t for t in texts])


def test_a_changed_query_prefix_never_gets_the_old_vectors(tmp_path: Path) -> None:
    before = CachedEmbedder(PrefixedEmbedder(""), tmp_path / "e.sqlite").embed_queries(["who?"])
    declared = PrefixedEmbedder("Represent this sentence for searching relevant passages: ")
    after = CachedEmbedder(declared, tmp_path / "e.sqlite").embed_queries(["who?"])
    assert declared.asked == ["Represent this sentence for searching relevant passages: who?"]
    assert not np.array_equal(before, after)
    # a model without prefixes keys as it always did: its cached vectors stay valid
    plain = CountingEmbedder()
    CachedEmbedder(plain, tmp_path / "e.sqlite").embed_queries(["who?"])
    assert plain.asked == []


def test_retain_keeps_only_the_texts_named(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    cache = CachedEmbedder(inner, tmp_path / "e.sqlite")
    cache.embed(["a", "b", "c"])
    assert cache.retain(["b", "z"]) == 2
    cache.embed(["a", "b"])
    assert inner.asked == ["a", "b", "c", "a"]  # b survived, a was dropped
    assert cache.retain(["a", "b"]) == 0
