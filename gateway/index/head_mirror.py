"""Each site's head, mirrored into Milvus, so gateway replicas on other hosts follow the primary.

Why: a head (gateway.index.durable.StoredHead: which rows make up a site's current set) is switched by
an atomic replace of a file on the primary's disk, and a replica on another host shares only the
Milvus server. So the primary (`[gateway] role = "primary"` on a Milvus server) also writes every
head it switches to into the collection `gateway_heads`, and a follower (`role = "follower"`)
reads them (gateway.index.summaries.SummaryIndex.follow) and loads each set newer than its own, never an
older one. The head files stay the primary's commit point; the mirror is written right after each
switch, before the old set's rows are deleted, and rewritten from the files when the primary starts.

Layout: Milvus caps a JSON field at 65,536 bytes and a head with term statistics can be larger, so the
head's JSON is split into parts, each a row keyed by the head's content (`<site>/<sha256[:16]>/<i>`),
written first; then one pointer row per site (id = the site id: sequence, sha256, parts) is
upserted — a one-row switch. A reader fetches the parts the pointer names and checks the sha256:
it sees a whole head, or (racing the next switch) nothing, and tries again at its next poll.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Iterable

import numpy as np

from hansa.adapters.vector.base import CollectionSpec, VectorStore
from hansa.core.errors import HansaError
from hansa.core.jsonsafe import dumps, loads_strict
from hansa.core.logs import get_logger
from hansa.gateway.index.durable import HeadFile, StoredHead, read_head
from hansa.sync.wire import validate_site_id

log = get_logger(__name__)

COLLECTION = "gateway_heads"
# Characters of the head's JSON text per row. Stored inside {"text": ...}, each character takes at
# most 2 bytes (a quote or backslash, escaped; the text is ASCII, as StoredHead validates its ids,
# digests and base64): 64,000 + the wrapper < 65,536.
PART_CHARS = 32_000
_FIELDS = {"site_id": "str", "kind": "str", "sequence": "int", "sha256": "str", "parts": "int", "part": "json"}
_DIM = 2  # Milvus needs a vector per row; these rows are read by id and field, never searched
_NO_VECTOR = np.array([1.0, 0.0], dtype=np.float32)
HEAD, PART = "head", "part"


@dataclass(frozen=True)
class HeadPointer:
    """What a follower polls: a site's current head by sequence and content."""

    site_id: str
    sequence: int
    sha256: str
    parts: int

    def part_ids(self) -> list[str]:
        return [_part_id(self.site_id, self.sha256, i) for i in range(self.parts)]


def _part_id(site_id: str, sha256: str, i: int) -> str:
    return f"{site_id}/{sha256[:16]}/{i}"


class HeadMirror:
    """The heads in Milvus (see the module docstring). The primary writes; followers read."""

    def __init__(self, store: VectorStore) -> None:
        self.store = store
        store.ensure_collection(CollectionSpec(name=COLLECTION, dim=_DIM, fields=_FIELDS, index="FLAT"))

    # -- the primary ----------------------------------------------------------------------------------

    def write(self, head: StoredHead) -> None:
        """Make `head` (without its orphans: a follower never deletes) the site's mirrored head."""
        text = dumps(HeadFile.of(replace(head, orphans=())).to_json()).decode()
        sha = hashlib.sha256(text.encode()).hexdigest()
        pieces = [text[i:i + PART_CHARS] for i in range(0, len(text), PART_CHARS)] or [""]
        before = self.pointers([head.site_id]).get(head.site_id)
        if before is not None and before.sha256 == sha:
            return
        new = HeadPointer(head.site_id, head.sequence, sha, len(pieces))
        self._upsert(new.part_ids(), [{"site_id": head.site_id, "kind": PART, "sequence": head.sequence,
                                       "sha256": sha, "parts": len(pieces), "part": {"text": piece}}
                                      for piece in pieces])
        self._upsert([head.site_id], [{"site_id": head.site_id, "kind": HEAD, "sequence": head.sequence,
                                       "sha256": sha, "parts": len(pieces), "part": {}}])  # the switch
        if before is not None:
            stale = set(before.part_ids()) - set(new.part_ids())
            if stale:
                self.store.delete(COLLECTION, ids=sorted(stale))

    def remove(self, site_id: str) -> None:
        """Forget a site (revoked or purged): its pointer first, so no follower reads half of it."""
        self.store.delete(COLLECTION, ids=[validate_site_id(site_id)])
        self.store.delete(COLLECTION, where={"site_id": site_id})

    def reconcile(self, heads: Iterable[StoredHead]) -> None:
        """Mirror exactly `heads` (the primary's at start): rewrite the changed, drop the others
        and any parts a crash left behind."""
        held = {h.site_id: h for h in heads}
        for site_id in set(self.pointers()) - set(held):
            self.remove(site_id)
        for head in held.values():
            self.write(head)
        current = {pid for p in self.pointers().values() for pid in p.part_ids()}
        leftover = [rid for rid, f in self.store.fields(COLLECTION, ["kind"], where={"kind": PART}).items()
                    if rid not in current]
        if leftover:
            self.store.delete(COLLECTION, ids=leftover)

    def _upsert(self, ids: list[str], fields: list[dict[str, object]]) -> None:
        self.store.upsert(COLLECTION, ids, np.tile(_NO_VECTOR, (len(ids), 1)), fields)

    # -- followers ------------------------------------------------------------------------------------

    def pointers(self, sites: Iterable[str] | None = None) -> dict[str, HeadPointer]:
        """Every mirrored site's pointer (or these sites'): one small query, what a follower polls."""
        ids = None if sites is None else [validate_site_id(s) for s in sites]
        rows = self.store.fields(COLLECTION, ["site_id", "sequence", "sha256", "parts"], ids=ids, where={"kind": HEAD})
        return {r["site_id"]: HeadPointer(r["site_id"], int(r["sequence"]), r["sha256"], int(r["parts"]))
                for r in rows.values()}

    def read(self, pointer: HeadPointer) -> StoredHead | None:
        """The head `pointer` names, or None if it is gone or not whole (the primary switched since)."""
        ids = pointer.part_ids()
        rows = self.store.fields(COLLECTION, ["part"], ids=ids)
        if set(rows) != set(ids):
            return None
        text = "".join(str((rows[i]["part"] or {}).get("text", "")) for i in ids)
        if hashlib.sha256(text.encode()).hexdigest() != pointer.sha256:
            return None
        try:
            head = read_head(loads_strict(text.encode()), f"mirrored head of {pointer.site_id}")
        except HansaError as exc:  # written by a primary of another version, or damaged
            log.error("head_mirror.unreadable", site_id=pointer.site_id, error=str(exc))
            return None
        return head if head.site_id == pointer.site_id else None
