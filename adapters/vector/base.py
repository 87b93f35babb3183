"""The vector-store port.

Written for server semantics (explicit load, strong consistency where read-after-write matters,
request size limits) so the same code runs on Milvus Lite, a Milvus server or a cluster.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from hansa.adapters.records import VectorHit


@dataclass(frozen=True)
class CollectionSpec:
    name: str  # without the configured prefix
    dim: int
    # scalar fields stored beside id + vector: name -> "str" | "int" | "float" | "json" | "int8[N]"
    # ("int8[N]": exactly N signed bytes, N <= 4,096, e.g. a vector's int8 codes; not filterable)
    fields: Mapping[str, str] = field(default_factory=dict)
    metric: str = "COSINE"  # COSINE or IP (vectors are unit-normalized, so both rank alike)
    index: str = "AUTOINDEX"  # FLAT, IVF_FLAT, HNSW, AUTOINDEX (what the engine supports)
    # The site the collection belongs to (stored with it): a collection of another owner is refused,
    # so two sites configured with one Milvus prefix cannot mix their vectors. "" claims nothing.
    owner: str = ""


class VectorStore(ABC):
    @property
    def shared(self) -> bool:
        """Whether processes on other hosts can open this same store (a server, not an embedded
        file): gateway replicas follow a primary only through such a store."""
        return False

    @abstractmethod
    def ensure_collection(self, spec: CollectionSpec) -> None:
        """Create if missing (idempotent); refuse (BackendError) if it exists with another dim."""

    def collection_owner(self, collection: str) -> str | None:
        """The owner recorded at creation ("" when none was), or None when the collection is absent."""
        return None

    @abstractmethod
    def collection_dim(self, collection: str) -> int | None:
        """The dimension of the collection's vectors, or None when the collection is absent
        (`hansa site doctor` compares it with the embedder's)."""

    @abstractmethod
    def upsert(self, collection: str, ids: Sequence[str], vectors: np.ndarray, fields: Sequence[Mapping[str, Any]] | None = None,
               *, flush: bool = True) -> None:
        """Insert or replace rows by id; batches internally to stay within request limits.

        `flush=False` leaves the rows unsealed (readable, searched by brute force on Milvus Lite)
        until `flush`: a bulk writer making many small upserts flushes after thousands of rows, because
        a flush per call costs a segment each (ingest's vector write ran 7x slower that way)."""

    def insert(self, collection: str, ids: Sequence[str], vectors: np.ndarray, fields: Sequence[Mapping[str, Any]] | None = None,
               *, flush: bool = True) -> None:
        """Add rows whose ids the caller knows are not stored; otherwise as `upsert`.

        Why: an upsert must find each id's old row first (Milvus Lite looks every id up in its
        unsealed rows and in each sealed segment; a Milvus server deletes before inserting), work
        that the rows of a document never stored before do not need. A stored id written again
        here may be kept twice (a Milvus server keeps both rows), so a caller that cannot rule that
        out upserts. Stores with no cheaper path need not override this."""
        self.upsert(collection, ids, vectors, fields, flush=flush)

    def flush(self, collection: str) -> None:
        """Seal what `upsert(..., flush=False)` left unsealed. Stores with nothing to seal need not act."""

    @abstractmethod
    def delete(self, collection: str, ids: Sequence[str] | None = None, where: Mapping[str, Any] | None = None) -> None:
        """Delete by ids, or by equality on scalar fields (`where={"doc_id": "x"}`; values are escaped).

        A list (or tuple) of values in `where` matches any of them (`{"chunk_id": [a, b]}`), here as
        in `search` and `fields`: one call for many values, because Milvus deletes by filter by
        scanning for the matching rows, once per call."""

    @abstractmethod
    def search(self, collection: str, vectors: np.ndarray, limit: int, where: Mapping[str, Any] | None = None, output_fields: Sequence[str] = ()) -> list[list[VectorHit]]:
        """For each query vector, the `limit` nearest rows, best first."""

    @abstractmethod
    def get(self, collection: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors by id (unknown ids absent): publish reads the summary vectors it indexed."""

    @abstractmethod
    def fields(self, collection: str, names: Sequence[str], ids: Sequence[str] | None = None,
               where: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
        """Scalar fields by id of the rows with these `ids` and/or matching `where` (equality, as in
        `delete`); neither: every row. Why: state kept beside vectors (the gateway's mirrored heads)
        is read without a query vector."""

    @abstractmethod
    def count(self, collection: str) -> int: ...

    @abstractmethod
    def drop(self, collection: str) -> None: ...

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> "VectorStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
