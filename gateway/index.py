"""The gateway's summary index: every enrolled site's published summary embeddings, in one collection.

DGRAG's point is that this index is small (summaries, not chunks), so it uses an exact FLAT index:
routing quality never depends on ANN recall, and a filtered search with a limit above a site's
summary count returns that site's whole set — which is how `replace_site` finds rows a new
publication no longer lists (the vector-store port has no "list ids" call; see `_site_rows`).

Rows are keyed `f"{site_id}/{summary_id}"`: a site can only ever overwrite its own rows, because
the site id in the key comes from the verified publication, never from the summary id.
"""
from __future__ import annotations

from typing import Iterable, NamedTuple

import numpy as np

from hansa.adapters.vector.base import CollectionSpec, VectorStore
from hansa.core.errors import InputError, VerificationError
from hansa.core.logs import get_logger
from hansa.sync.vectors import decode_vector
from hansa.sync.wire import EmbeddingSpace, PublicationPayload, validate_site_id

log = get_logger(__name__)

COLLECTION = "gateway_summaries"
# Milvus caps a search's limit at 16,384; a site's whole set must fit in one filtered search.
MAX_SUMMARIES_PER_SITE = 16_384
_FIELDS = {"site_id": "str", "summary_id": "str", "level": "int", "richness": "int"}


class SummaryHit(NamedTuple):
    site_id: str
    summary_id: str
    score: float  # cosine similarity with the question
    richness: int  # entities the summarized community covers (DGRAG's subgraph size)


def row_id(site_id: str, summary_id: str) -> str:
    return f"{site_id}/{summary_id}"


class SummaryIndex:
    """Summary embeddings of all sites, in the gateway embedder's space (`space`)."""

    def __init__(self, store: VectorStore, space: EmbeddingSpace) -> None:
        self.store = store
        self.space = space
        store.ensure_collection(CollectionSpec(name=COLLECTION, dim=space.dim, fields=_FIELDS, index="FLAT"))

    def _probe(self) -> np.ndarray:
        """Any fixed unit vector: a filtered exhaustive search only needs *a* query."""
        probe = np.zeros((1, self.space.dim), dtype=np.float32)
        probe[0, 0] = 1.0
        return probe

    def _site_rows(self, site_id: str) -> set[str]:
        hits = self.store.search(COLLECTION, self._probe(), MAX_SUMMARIES_PER_SITE, where={"site_id": site_id})
        return {h.id for h in hits[0]} if hits else set()

    def replace_site(self, site_id: str, payload: PublicationPayload) -> int:
        """Make the index hold exactly `payload`'s summaries for `site_id`; returns how many.

        Order: decode and check everything, upsert the new set, then delete rows the new set no
        longer lists. Window: between the upsert and the delete a search can see the union of the
        old and the new set (stale rows can only route a question to this same site, which answers
        from its current data); it never sees the site with no summaries. If the process dies in
        between, the stale rows stay until the site's next publication removes them."""
        validate_site_id(site_id)
        if payload.site_id != site_id:
            raise VerificationError(f"publication names site {payload.site_id!r}, not {site_id!r}")
        got = payload.embedding
        if (got.model_id, got.dim) != (self.space.model_id, self.space.dim):
            raise InputError(
                f"publication vectors are {got.model_id!r} (dim {got.dim}); the gateway indexes "
                f"{self.space.model_id!r} (dim {self.space.dim})"
            )
        if len(payload.summaries) > MAX_SUMMARIES_PER_SITE:
            raise InputError(
                f"publication has {len(payload.summaries)} summaries; at most {MAX_SUMMARIES_PER_SITE} per site: "
                "raise the site's minimum community size or merge small communities"
            )
        ids = [row_id(site_id, s.summary_id) for s in payload.summaries]
        if len(set(ids)) != len(ids):
            raise InputError("publication lists a summary id twice")
        if ids:
            vectors = np.stack([decode_vector(s.vector_b64, self.space.dim) for s in payload.summaries])
            fields = [
                {"site_id": site_id, "summary_id": s.summary_id, "level": s.level, "richness": s.richness.entities}
                for s in payload.summaries
            ]
            self.store.upsert(COLLECTION, ids, vectors, fields)
        stale = sorted(self._site_rows(site_id) - set(ids))
        if stale:
            self.store.delete(COLLECTION, ids=stale)
        log.info("index.replaced", site_id=site_id, summaries=len(ids), removed=len(stale))
        return len(ids)

    def remove_site(self, site_id: str) -> None:
        validate_site_id(site_id)
        self.store.delete(COLLECTION, where={"site_id": site_id})

    def search(self, vector: np.ndarray, top_m: int) -> list[SummaryHit]:
        """The `top_m` summaries nearest the question, best first, across every site in the index."""
        if isinstance(top_m, bool) or not isinstance(top_m, int) or not 1 <= top_m <= MAX_SUMMARIES_PER_SITE:
            raise InputError(f"top_m must be an integer in 1..{MAX_SUMMARIES_PER_SITE}, got {top_m!r}")
        q = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        if q.shape[1] != self.space.dim:
            raise InputError(f"question vector has dim {q.shape[1]}; the index holds dim {self.space.dim}")
        hits = self.store.search(COLLECTION, q, top_m, output_fields=("site_id", "summary_id", "richness"))
        return [
            SummaryHit(str(h.fields["site_id"]), str(h.fields["summary_id"]), float(h.score), int(h.fields["richness"]))
            for h in (hits[0] if hits else [])
        ]

    def sites(self, among: Iterable[str]) -> dict[str, int]:
        """How many summaries each of `among` holds (sites with none are left out).

        Takes candidates (the registry's sites) because the port cannot list distinct values;
        only enrolled sites can ever have published, so the registry is a complete candidate list."""
        out: dict[str, int] = {}
        for site_id in among:
            n = len(self._site_rows(validate_site_id(site_id)))
            if n:
                out[site_id] = n
        return out

    def count(self) -> int:
        return self.store.count(COLLECTION)
