"""An in-memory LRU of embeddings in front of any embedder: repeated questions cost a dict lookup.

Why: the gateway embeds every question, and that embedding is almost all of its own per-query
time (issue 8). Clients repeat questions (retries, dashboards, a conversation's rewritten turn),
and the same text always gives the same vector in the same space, so a bounded cache in front of
the port is exact. It is keyed by the exact text; the space (`model_id`, `dim`) is the wrapped
embedder's, so a cache never outlives a change of model. cachetools' LRUCache (already a
dependency of pymilvus) holds the entries; a lock makes it safe under the threaded servers.

Rows are returned as copies: a caller that modifies a vector in place cannot corrupt the cache.
Cost of a hit and the hit rate's effect are measured in scripts/bench_embed.py.

One flight per text: a text another thread is embedding right now is waited for, not embedded a
second time. The gateway embeds an answer's sentences while it waits on slower sites
(gateway.query.fusion.measure_early) and fusion may ask for the same sentences before that batch
is done; on two cores a duplicate batch is exactly the delay the early work was meant to remove.
If the other thread's batch fails, the waiter embeds the text itself.
"""
from __future__ import annotations

import threading
from typing import Sequence

import numpy as np
from cachetools import LRUCache

from hansa.adapters.embedder.base import Embedder, checked_texts
from hansa.core.errors import InputError

# Keys are (is_query, text): a model with prefixes embeds a question and the same text as a passage differently.
_Key = tuple[bool, str]


class MemoEmbedder(Embedder):
    def __init__(self, inner: Embedder, maxsize: int = 4096) -> None:
        if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1:
            raise InputError(f"memo maxsize must be a positive integer, got {maxsize!r}")
        self.inner = inner
        self._cache: LRUCache[_Key, np.ndarray] = LRUCache(maxsize=maxsize)
        self._lock = threading.Lock()
        self._flying: dict[_Key, threading.Event] = {}  # texts being embedded now, set when done
        self.hits = 0
        self.misses = 0

    @property
    def model_id(self) -> str:  # type: ignore[override]
        return self.inner.model_id

    @property
    def dim(self) -> int:  # type: ignore[override]
        return self.inner.dim

    @property
    def model_sha256(self) -> str:  # type: ignore[override]
        return self.inner.model_sha256

    def embed_one(self, text: str) -> np.ndarray:
        return self._one(text, query=False)

    def embed_query(self, text: str) -> np.ndarray:
        return self._one(text, query=True)

    def _one(self, text: str, query: bool) -> np.ndarray:
        if not isinstance(text, str):
            raise InputError(f"text to embed is a {type(text).__name__}, not a string")
        with self._lock:
            row = self._cache.get((query, text))
            if row is not None:
                self.hits += 1
                return row.copy()
        return self._embed([text], query)[0]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, query=False)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, query=True)

    def _embed(self, texts: Sequence[str], query: bool) -> np.ndarray:
        keys = [(query, t) for t in checked_texts(texts)]
        found: dict[_Key, np.ndarray] = {}
        todo = list(dict.fromkeys(keys))  # each new text embedded once
        while todo:
            mine: list[_Key] = []
            theirs: list[threading.Event] = []
            with self._lock:
                for text in todo:
                    row = self._cache.get(text)
                    if row is not None:
                        found[text] = row
                    elif text in self._flying:
                        theirs.append(self._flying[text])
                    else:
                        self._flying[text] = threading.Event()
                        mine.append(text)
                self.hits += sum(1 for t in todo if t in found)
            if mine:
                self._embed_own(mine, found)
            for event in theirs:
                event.wait()
            todo = [t for t in todo if t not in found]  # texts whose other flight failed: taken up again
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    def _embed_own(self, texts: list[_Key], found: dict[_Key, np.ndarray]) -> None:
        """Embed texts this thread claimed (all of one side); release them whether the batch succeeds or not."""
        try:
            embed = self.inner.embed_queries if texts[0][0] else self.inner.embed
            vectors = embed([text for _, text in texts])
            with self._lock:
                self.misses += len(texts)
                for text, row in zip(texts, vectors):
                    row = np.array(row, dtype=np.float32)  # own copy, not a view of the batch
                    row.setflags(write=False)
                    self._cache[text] = found[text] = row
        finally:
            with self._lock:
                for text in texts:
                    event = self._flying.pop(text, None)
                    if event is not None:
                        event.set()

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()
