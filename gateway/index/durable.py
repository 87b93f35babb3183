"""The durable copy of the gateway's summary index: int8 codes in Milvus, each site's head in a file.

Why both: Milvus holds each published summary vector as the gateway keeps it — its int8 codes
(gateway.index.codes), one byte per dimension, in an INT8 array field (Milvus Lite 3.2 refuses FLOAT16,
INT8 and BINARY vector fields; a row's vector field is a 2-d placeholder, as in gateway.index.head_mirror).
The in-memory index is rebuilt from these codes at start, so it is exactly the index that served
before. A small JSON file per site (`<state_dir>/<site_id>.json`, replaced atomically)
says which rows make up the site's current set — its **head**: sequence, expiry, the digests of
the publication and of its manifest, per summary (version, sha256, level, richness), and the
site's term statistics (sync.terms) when it publishes them.

Rows are content-addressed (`row_key`: site, summary id, version and hash), so a new set's rows
are written *beside* the old set's, and switching sets is the one atomic head-file replace. A crash
at any point leaves either the old or the new head, each naming rows that exist:

    1. head(old) + orphans += the new rows   (intent: rows about to be written)
    2. upsert the new rows into Milvus
    3. head(new), orphans = rows only the old set used (and earlier orphans)   <- the switch
    4. delete the orphans from Milvus; 5. head(new) without orphans

At start, orphans named in a head are deleted before the set is loaded (`settle`).
With a `mirror` (gateway.index.head_mirror: replicas on other hosts), each head is also written to Milvus
right after step 3, before step 4 deletes the old set's rows that a follower may still be reading.

Heads of format 1 (gateways before int8 codes) name float32 rows in the collection
`gateway_summaries`. They are still read (a follower of an older primary reads them as they are),
and a primary migrates them at start (`settle`): it quantises the float32 rows, writes their codes
under the same row keys, switches the head to format 2 (the commit point), then deletes the site's
float32 rows; once no format-1 head is left the old collection is dropped. A crash before the switch
leaves the format-1 head and its rows, and the next start migrates again over the same keys; after
it, only float32 rows of no head are left, and they go with the old collection.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Callable, ClassVar, Iterable, Mapping

import numpy as np
from pydantic import Field, StrictInt, StrictStr

from hansa.adapters.vector.base import CollectionSpec, VectorStore
from hansa.core.crash_points import crash_point
from hansa.core.files import write_bytes_atomic
from hansa.core.errors import BackendError, HansaError, NotFoundError
from hansa.core.jsonsafe import dumps, loads_strict
from hansa.core.logs import get_logger
from hansa.core.model import FORBID, Wire
from hansa.gateway.index.codes import quantise
from hansa.sync.terms import TermSketch, TermsRecord
from hansa.sync.wire import Count, Sha256Hex, SiteId, SummaryId, UtcTimestamp, validate_site_id

if TYPE_CHECKING:
    from hansa.gateway.index.head_mirror import HeadMirror

log = get_logger(__name__)

COLLECTION = "gateway_summary_codes"
LEGACY_COLLECTION = "gateway_summaries"  # format 1: float32 vectors (read, migrated, then dropped)
_FIELDS = {"site_id": "str", "summary_id": "str", "level": "int", "richness": "int"}  # + "codes": int8[dim]
_DIM = 2  # Milvus needs a vector per row; these rows are read by id, never searched
_NO_VECTOR = np.array([1.0, 0.0], dtype=np.float32)
HEAD_FORMAT = 2
LEGACY_HEAD_FORMAT = 1

Row = tuple[int, str, int, int]  # (version, sha256, level, richness)


def row_key(site_id: str, summary_id: str, version: int, sha256: str) -> str:
    """A row's Milvus id: one per content, so a new set never overwrites a row the old set uses."""
    return f"{site_id}/{summary_id}/{version}/{sha256[:16]}"


@dataclass(frozen=True)
class StoredHead:
    """A site's current set as the durable store records it."""

    site_id: str
    sequence: int
    expires: str
    payload_sha256: str
    manifest_sha256: str
    rows: Mapping[str, Row]  # summary id -> (version, sha256, level, richness)
    orphans: tuple[str, ...] = ()  # row keys that may exist in Milvus but belong to no set
    terms: TermSketch | None = None  # the set's term statistics, switched with it (same file)
    legacy: bool = False  # format 1: the rows are float32 vectors in LEGACY_COLLECTION

    def keys(self) -> dict[str, str]:
        """Row key by summary id."""
        return {sid: row_key(self.site_id, sid, r[0], r[1]) for sid, r in self.rows.items()}


@dataclass(frozen=True)
class HeadFile(Wire):
    """A head as its file (and its mirrored copy, gateway.index.head_mirror) spells it: rows as
    `[version, sha256, level, richness]` sorted by summary id, orphans sorted, `terms` null when the
    site publishes none. Re-validated on every read: a damaged or hand-edited head must not load
    half a set."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "head"

    format: Annotated[StrictInt, Field(ge=LEGACY_HEAD_FORMAT, le=HEAD_FORMAT)]
    site_id: SiteId
    sequence: Count
    expires: UtcTimestamp
    payload_sha256: Sha256Hex
    manifest_sha256: Sha256Hex
    summaries: Mapping[SummaryId, tuple[Count, Sha256Hex, Count, Count]]  # JSON integers only, as before
    orphans: tuple[StrictStr, ...]
    terms: TermsRecord | None = None  # absent from heads written before term statistics existed

    @classmethod
    def of(cls, head: StoredHead) -> "HeadFile":
        return cls(LEGACY_HEAD_FORMAT if head.legacy else HEAD_FORMAT, head.site_id, head.sequence, head.expires,
                   head.payload_sha256, head.manifest_sha256, dict(sorted(head.rows.items())),
                   tuple(sorted(head.orphans)), None if head.terms is None else head.terms.record())

    def head(self, where: str) -> StoredHead:
        return StoredHead(self.site_id, self.sequence, self.expires, self.payload_sha256, self.manifest_sha256,
                          dict(self.summaries), self.orphans,
                          None if self.terms is None else self.terms.sketch(f"{where}: terms"),
                          self.format == LEGACY_HEAD_FORMAT)


def read_head(obj: object, where: str) -> StoredHead:
    """A head from its decoded JSON (InputError naming `where` and the field when malformed)."""
    return HeadFile.from_json(obj, where).head(where)  # type: ignore[arg-type]  # from_json refuses a non-object


def stored_codes(store: VectorStore, head: StoredHead, dim: int) -> dict[str, np.ndarray]:
    """The int8 codes of the head's rows by summary id (a format-1 head's float32 rows quantised);
    BackendError if any row is missing or is not `dim` codes (damaged, or of another embedder)."""
    keys = head.keys()
    wanted = list(keys.values())
    if head.legacy:
        try:
            found = store.get(LEGACY_COLLECTION, wanted) if keys else {}
        except NotFoundError:  # the float32 collection is gone: so are the head's rows
            found = {}
        found = dict(zip(found, quantise(np.stack(list(found.values()))))) if found else {}
    else:
        rows = store.fields(COLLECTION, ["codes"], ids=wanted) if keys else {}
        found = {key: np.asarray(row["codes"], dtype=np.int8) for key, row in rows.items()}
        found = {key: codes for key, codes in found.items() if codes.shape == (dim,) and codes.any()}
    missing = [sid for sid, key in keys.items() if key not in found]
    if missing:
        raise BackendError(
            f"site {head.site_id!r}: {len(missing)} of its {len(keys)} stored summaries are missing from "
            f"Milvus or damaged (first: {missing[0]!r}); its set is not loaded and its next publication must be a full set"
        )
    return {sid: found[key] for sid, key in keys.items()}


class DurableStore:
    """Milvus rows + head files for every site's current set (see the module docstring)."""

    def __init__(self, store: VectorStore, dim: int, state_dir: Path, mirror: "HeadMirror | None" = None) -> None:
        self.store = store
        self.dim = dim
        self.mirror = mirror
        self.state_dir = Path(state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        # a collection of codes of another length (another embedder) is refused, naming both dims
        store.ensure_collection(CollectionSpec(name=COLLECTION, dim=_DIM, index="FLAT",
                                               fields={**_FIELDS, "codes": f"int8[{dim}]"}))
        self._legacy = store.collection_dim(LEGACY_COLLECTION) is not None  # float32 rows of format-1 heads

    def _path(self, site_id: str) -> Path:
        return self.state_dir / f"{validate_site_id(site_id)}.json"

    def write_head(self, head: StoredHead) -> None:
        write_bytes_atomic(self._path(head.site_id), dumps(HeadFile.of(head).to_json()))

    def heads(self) -> list[StoredHead]:
        """Every readable head; a damaged one is set aside (renamed `.damaged`) and reported. A head
        that vanishes between listing and reading was purged meanwhile (a revocation in another
        thread or worker process): that site has no set, which is not damage."""
        out = []
        for path in sorted(self.state_dir.glob("*.json")):
            try:
                out.append(read_head(loads_strict(path.read_bytes()), str(path)))
            except FileNotFoundError:
                continue
            except (HansaError, OSError) as exc:
                log.error("durable.head_damaged", path=str(path), error=str(exc))
                try:
                    path.replace(path.with_name(path.name + ".damaged"))
                except FileNotFoundError:  # purged while being reported
                    pass
        return out

    def delete_rows(self, keys: Iterable[str], legacy: bool = False) -> None:
        keys = list(keys)
        if keys:
            self.store.delete(LEGACY_COLLECTION if legacy else COLLECTION, ids=keys)

    def _drop_legacy_rows(self, site_id: str) -> None:
        if self._legacy:
            try:
                self.store.delete(LEGACY_COLLECTION, where={"site_id": site_id})
            except NotFoundError:  # another worker process dropped it meanwhile
                self._legacy = False

    def purge(self, site_id: str) -> None:
        """Forget a site: all its rows, then its head (a crash in between purges again at start)."""
        if self.mirror is not None:
            self.mirror.remove(site_id)
        self.store.delete(COLLECTION, where={"site_id": validate_site_id(site_id)})
        self._drop_legacy_rows(site_id)
        self._path(site_id).unlink(missing_ok=True)

    def settle(self, head: StoredHead) -> tuple[StoredHead, dict[str, np.ndarray]]:
        """At start: a head without the orphans a crash left, migrated to format 2 if it was
        format 1 (see the module docstring), and its codes by summary id; BackendError if rows
        are missing (nothing is changed then but the orphans' removal)."""
        if head.orphans:  # rows a crash left behind
            self.delete_rows(head.orphans, legacy=head.legacy)
            head = replace(head, orphans=())
            self.write_head(head)
        codes = stored_codes(self.store, head, self.dim)
        if head.legacy:
            keys = head.keys()
            self._upsert(replace(head, legacy=False), sorted(keys.values()), {keys[s]: c for s, c in codes.items()})
            crash_point("durable.migrate_after_rows")
            head = replace(head, legacy=False)
            self.write_head(head)  # the switch: from here on the site's set is its codes
            crash_point("durable.migrate_after_switch")
            self._drop_legacy_rows(head.site_id)
            log.info("durable.migrated", site_id=head.site_id, summaries=len(codes))
        return head, codes

    def drop_legacy(self, heads: Iterable[StoredHead]) -> None:
        """Drop the format-1 collection once no head (of `heads`, every head held) uses it."""
        if self._legacy and not any(h.legacy for h in heads):
            self.store.drop(LEGACY_COLLECTION)
            self._legacy = False
            log.info("durable.legacy_dropped", collection=LEGACY_COLLECTION)

    def _upsert(self, head: StoredHead, keys: list[str], codes: Mapping[str, np.ndarray]) -> None:
        """Write the rows `keys` of `head` (codes by row key)."""
        by_key = {key: sid for sid, key in head.keys().items()}
        fields = [{"site_id": head.site_id, "summary_id": by_key[key], "level": head.rows[by_key[key]][2],
                   "richness": head.rows[by_key[key]][3], "codes": codes[key]} for key in keys]
        self.store.upsert(COLLECTION, keys, np.tile(_NO_VECTOR, (len(keys), 1)), fields)

    def save(self, new: StoredHead, old: StoredHead | None, codes: Mapping[str, np.ndarray]) -> None:
        """Make `new` the durable set, writing only rows `old` lacks; `codes` (int8) by row key."""
        if old is not None and old.legacy:  # not migrated (a set loaded from another process's files)
            held = stored_codes(self.store, old, self.dim)  # the rows `new` carries over, quantised
            self.save(new, None, {**{key: held[sid] for sid, key in old.keys().items()}, **codes})
            self._drop_legacy_rows(new.site_id)
            return
        new_keys, old_keys = new.keys(), (old.keys() if old is not None else {})
        needed, had = set(new_keys.values()), set(old_keys.values())
        fresh = sorted(needed - had)
        earlier = set(old.orphans) if old is not None else set()
        if fresh:
            if old is not None:  # 1. intent: if we crash now, these rows are known orphans
                self.write_head(replace(old, orphans=tuple(sorted(earlier | set(fresh)))))
            self._upsert(new, fresh, codes)  # 2.
            crash_point("durable.after_rows")
        orphans = (had - needed) | (earlier - needed)
        self.write_head(replace(new, orphans=tuple(sorted(orphans))))  # 3. the switch
        crash_point("durable.after_switch")
        if self.mirror is not None:
            self.mirror.write(new)
        if orphans:
            self.delete_rows(orphans)  # 4.
            self.write_head(replace(new, orphans=()))  # 5.


class WriteBehind:
    """One background thread that persists sites marked dirty, newest state first, coalescing.

    Why: the gateway answers a publication once it is verified, its floor recorded and its set
    swapped in memory; writing vectors to Milvus takes longer than all of that, so it happens
    here. A site published twice before its turn is written once, in its latest state. A failed
    write is retried with backoff; `flush` waits until everything marked is written."""

    def __init__(self, persist: Callable[[str], None], retry_s: float = 1.0, max_retry_s: float = 60.0) -> None:
        self._persist = persist
        self._retry_s, self._max_retry_s = retry_s, max_retry_s
        self._cond = threading.Condition()
        self._dirty: dict[str, float] = {}  # site -> earliest time to try (monotonic)
        self._failures: dict[str, int] = {}
        self._busy: str | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="hansa-write-behind", daemon=True)
        self._thread.start()

    def mark(self, site_id: str) -> None:
        with self._cond:
            self._dirty[site_id] = 0.0  # a new state is tried now, even if a retry was waiting
            self._cond.notify_all()

    def pending(self) -> int:
        with self._cond:
            return len(self._dirty) + (self._busy is not None)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every marked site is written; False on timeout (e.g. Milvus is down)."""
        with self._cond:
            for site in self._dirty:  # retrying sites: try now
                self._dirty[site] = 0.0
            self._cond.notify_all()
            return self._cond.wait_for(lambda: not self._dirty and self._busy is None, timeout)

    def close(self, timeout: float | None = 30.0) -> bool:
        """Flush for up to `timeout` seconds, then stop; the write in progress, if any, finishes."""
        done = self.flush(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()
        return done

    def _next(self) -> str | None:
        with self._cond:
            while True:
                if self._closed:
                    return None
                now = time.monotonic()
                ready = [s for s, at in self._dirty.items() if at <= now]
                if ready:
                    site = ready[0]
                    del self._dirty[site]
                    self._busy = site
                    return site
                wait = min(self._dirty.values()) - now if self._dirty else None
                self._cond.wait(wait)

    def _run(self) -> None:
        while (site := self._next()) is not None:
            try:
                self._persist(site)
                failed = False
            except Exception as exc:  # logged and retried; the in-memory set keeps serving
                failed = True
                log.error("durable.write_failed", site_id=site, error=str(exc))
            with self._cond:
                self._busy = None
                if failed:
                    n = self._failures[site] = self._failures.get(site, 0) + 1
                    delay = min(self._max_retry_s, self._retry_s * 2 ** (n - 1))
                    self._dirty.setdefault(site, time.monotonic() + delay)
                else:
                    self._failures.pop(site, None)
                self._cond.notify_all()
