"""A content-addressed, on-disk embedding cache in front of any embedder.

Why: an evaluation builds the same text into several federations (16 and 64 sites, the centralized
site) and rebuilds sites whenever their configuration changes; embedding is what ingest spends
its time on (~44 chunks/s on 2 cores). The key is sha256(embedder identity, text), the identity
being model id, file hash, dimension and precision (bf16 and fp32 vectors differ slightly), so a
cache can never hand one model's vector to another; a query's key differs from the same text's as
a passage (models with prefixes embed them differently).

Storage is one SQLite file (WAL): each batch of new vectors is one transaction, so a crash leaves
either the whole batch or none of it — never a torn vector — and several processes may share the
file. Vectors are stored as raw float32 bytes and checked for their length on read.
"""
from __future__ import annotations

import hashlib
import sqlite3
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from hansa.adapters.embedder.base import Embedder
from hansa.core.errors import BackendError, InputError

_SCHEMA = "CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL) WITHOUT ROWID"
_LOOKUP_BATCH = 500  # keys per SELECT ... IN (...): below SQLite's variable limit


def embedder_identity(embedder: Embedder) -> str:
    """What makes two embedders' vectors interchangeable: model, files, dimension, numeric precision
    and the prefixes the model prepends. Why the prefixes: a model's declared query prefix may
    change (catalog.py) while its files do not, and a question's vector cached without it must not
    be handed back once it is declared. A model without prefixes keeps the identity it always had,
    so the vectors cached for it stay valid."""
    identity = f"{embedder.model_id}|{embedder.model_sha256}|{embedder.dim}|{getattr(embedder, 'precision', 'fp32')}"
    query, passage = getattr(embedder, "prefixes", ("", ""))
    return f"{identity}|query={query!r}|passage={passage!r}" if query or passage else identity


class CachedEmbedder(Embedder):
    """`CachedEmbedder(inner, path)`: embeds through `inner` only the texts not yet in `path`."""

    def __init__(self, inner: Embedder, path: Path) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.model_sha256 = inner.model_sha256
        self.path = Path(path)
        self._identity = embedder_identity(inner).encode("utf-8")
        self._dim = int(inner.dim)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), timeout=60.0, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
        except sqlite3.Error as exc:
            raise BackendError(f"cannot open the embedding cache {self.path}: {exc}") from exc

    @property
    def dim(self) -> int:  # type: ignore[override]
        return self._dim

    @property
    def precision(self) -> str:
        return str(getattr(self.inner, "precision", "fp32"))

    def key(self, text: str, query: bool = False) -> bytes:
        side = b"\x00query\x00" if query else b"\x00"
        return hashlib.sha256(self._identity + side + text.encode("utf-8", "surrogatepass")).digest()

    def _lookup(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        for start in range(0, len(keys), _LOOKUP_BATCH):
            part = keys[start:start + _LOOKUP_BATCH]
            rows = self._db.execute(
                f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(part))})", part).fetchall()
            for key, blob in rows:
                if len(blob) == 4 * self._dim:  # anything else is not ours: recompute it
                    found[bytes(key)] = np.frombuffer(blob, dtype=np.float32)
        return found

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, query=False)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, query=True)

    def _embed(self, texts: Sequence[str], query: bool) -> np.ndarray:
        if isinstance(texts, str):
            raise InputError("embed() takes a sequence of strings, not one string: use embed_one()")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        keys = [self.key(t, query) for t in texts]
        with self._lock:
            found = self._lookup(list(dict.fromkeys(keys)))
        missing: dict[bytes, str] = {}
        for key, text in zip(keys, texts):
            if key not in found and key not in missing:
                missing[key] = text
        if missing:
            inner = self.inner.embed_queries if query else self.inner.embed
            fresh = inner(list(missing.values()))
            rows = [(k, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for k, v in zip(missing, fresh)]
            with self._lock:
                try:
                    self._db.execute("BEGIN IMMEDIATE")
                    self._db.executemany("INSERT OR REPLACE INTO vectors (key, vector) VALUES (?, ?)", rows)
                    self._db.execute("COMMIT")
                except sqlite3.Error as exc:
                    self._db.execute("ROLLBACK") if self._db.in_transaction else None
                    raise BackendError(f"cannot write the embedding cache {self.path}: {exc}") from exc
            found.update(zip(missing, (np.asarray(v, dtype=np.float32) for v in fresh)))
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        return np.vstack([found[k] for k in keys]).astype(np.float32, copy=False)

    def retain(self, texts: Sequence[str]) -> int:
        """Drop every stored vector but those of `texts` (passage side); returns how many were dropped.
        Why: a cache that mirrors one set of texts (a site's summaries) stays that set's size
        instead of growing with every text it ever held."""
        keep = {self.key(t) for t in texts}
        with self._lock:
            stale = [k for (k,) in self._db.execute("SELECT key FROM vectors").fetchall() if bytes(k) not in keep]
            if stale:
                try:
                    self._db.execute("BEGIN IMMEDIATE")
                    self._db.executemany("DELETE FROM vectors WHERE key = ?", [(k,) for k in stale])
                    self._db.execute("COMMIT")
                except sqlite3.Error as exc:
                    self._db.execute("ROLLBACK") if self._db.in_transaction else None
                    raise BackendError(f"cannot prune the embedding cache {self.path}: {exc}") from exc
        return len(stale)

    def close(self) -> None:
        with self._lock:
            self._db.close()
