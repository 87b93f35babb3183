"""The gateway's summary index: each site's current set of summary embeddings, swapped atomically.

What a query sees: every site's whole current set — the complete old set or the complete new set
of a site that is publishing, never a mix. A publication is applied in two steps so the caller can
record the new floor in between: `plan` checks it against the set held for the site (replay,
version rollback, base of a delta, carried-over pieces; see sync.publication) and works out which
rows to add and remove; `commit` makes that one atomic change to the in-memory nearest-neighbour
index (gateway.index.ann), switching the site's bookkeeping in the same instant. Anything that fails
before or inside the change leaves the old set in place.

Where it lives: in memory (gateway.index.ann), rebuilt at start from the durable copy (gateway.index.durable:
int8 codes in Milvus, a head file per site), which a background writer brings up to date after each
commit. A publication's float32 vectors are quantised once, at commit (gateway.index.codes), and the
index scores against the directions of those codes, so the index rebuilt at start is the one that
served before. The durable copy can lag a crash behind the floor the registry recorded; then the site's
next delta builds on a set the gateway no longer holds, is refused with 409, and the site sends
its whole set again — never a mix, never a rollback.

Replicas on other hosts (`follower`): an index that writes nothing, loading the sets the primary
mirrored into Milvus (gateway.index.head_mirror) at each `follow`, newer sequences only.

Rows are keyed by a handle (int64) that is never reused; the site id of a row comes from the
verified publication, so a site can only ever replace its own rows.
"""
from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, NamedTuple

import numpy as np

from hansa.adapters.vector.base import VectorStore
from hansa.core.errors import BackendError, ConflictError, InputError
from hansa.core.logs import get_logger
from hansa.gateway.index.ann import AnnIndex
from hansa.gateway.index.codes import directions, quantise
from hansa.gateway.index.durable import DurableStore, StoredHead, WriteBehind, row_key, stored_codes
from hansa.gateway.index.head_mirror import HeadMirror
from hansa.sync.publication import Publication, PublicationHead, carried_over
from hansa.sync.terms import TermSketch
from hansa.sync.wire import EmbeddingSpace, validate_site_id

log = get_logger(__name__)

MAX_TOP_M = 16_384
# A site's row: (handle, version, sha256, level, richness = entities the community covers)
_Row = tuple[int, int, str, int, int]


class SummaryHit(NamedTuple):
    site_id: str
    summary_id: str
    score: float  # cosine similarity with the question
    richness: int  # entities the summarized community covers (DGRAG's subgraph size)
    level: int = 0  # the summarized community's level (0: the finest; plugin/hierarchy.py)


class _ManifestView(Mapping[str, tuple[int, str]]):
    """A site's rows seen as its manifest (summary id -> (version, sha256)), without a copy."""

    def __init__(self, rows: Mapping[str, _Row]) -> None:
        self._rows = rows

    def __getitem__(self, sid: str) -> tuple[int, str]:
        row = self._rows[sid]
        return row[1], row[2]

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


@dataclass(frozen=True, eq=False)
class SiteSet:
    """One site's current set as the gateway holds it."""

    site_id: str
    sequence: int
    expires: str
    payload_sha256: str
    manifest_sha256: str
    rows: Mapping[str, _Row]
    terms: TermSketch | None = None  # the publication's term statistics (sync.terms), if any

    def head(self) -> PublicationHead:
        return PublicationHead(self.sequence, _ManifestView(self.rows), self.manifest_sha256)

    def stored(self) -> StoredHead:
        return StoredHead(self.site_id, self.sequence, self.expires, self.payload_sha256, self.manifest_sha256,
                          {sid: (r[1], r[2], r[3], r[4]) for sid, r in self.rows.items()}, terms=self.terms)


@dataclass(frozen=True, eq=False)
class Plan:
    """A checked publication and the one change that makes it the site's set."""

    publication: Publication
    previous: SiteSet | None
    new: SiteSet
    add: list[tuple[int, int]]  # (handle, index into publication.pieces) of rows to add
    remove: list[int]  # handles of rows the new set no longer has

    @property
    def changed(self) -> int:
        """Rows added: new summaries and new versions of held ones."""
        return len(self.add)

    @property
    def withdrawn(self) -> int:
        """Summaries the site held and no longer publishes."""
        return sum(1 for sid in self.previous.rows if sid not in self.new.rows) if self.previous else 0


class SummaryIndex:
    """Summary embeddings of all sites, in the gateway embedder's space (`space`).

    `store` + `state_dir`: the durable copy (both, or neither for an in-memory index, e.g. in
    benchmarks). `mirror`: also mirror each head into Milvus for followers on other hosts.
    `follower`: write nothing; `restore` and `follow` load what a primary mirrored (give `store`
    and `mirror`, no `state_dir`). `ann`: the nearest-neighbour index to use (default: exact, IVF
    past 50k rows)."""

    def __init__(
        self,
        store: VectorStore | None,
        space: EmbeddingSpace,
        state_dir: Path | None = None,
        *,
        ann: AnnIndex | None = None,
        mirror: HeadMirror | None = None,
        follower: bool = False,
    ) -> None:
        if follower:
            if store is None or mirror is None or state_dir is not None:
                raise ValueError("a follower index reads a primary's mirror: give store and mirror, no state_dir")
        elif (store is None) != (state_dir is None):
            raise ValueError("give both store and state_dir (durable) or neither (in memory only)")
        self.space = space
        self.ann = ann if ann is not None else AnnIndex(space.dim)
        if self.ann.dim != space.dim:
            raise InputError(f"the nearest-neighbour index has dim {self.ann.dim}, the space {space.dim}")
        self.follower = follower
        self._store = store
        self._mirror = mirror
        self._follow_lock = threading.Lock()
        self._durable = (DurableStore(store, space.dim, state_dir, mirror)
                         if store is not None and state_dir is not None else None)
        self._sites: dict[str, SiteSet] = {}
        self._meta: dict[int, tuple[str, str, int, int]] = {}  # handle -> (site, summary id, richness, level)
        self._handles = itertools.count(1)
        self._lock = threading.Lock()  # plan/commit bookkeeping; searches never take it
        # Durable bookkeeping: what the head files say, and vectors not yet written to Milvus.
        self._stored: dict[str, StoredHead] = {}
        self._unsaved: dict[str, dict[str, np.ndarray]] = {}  # site -> row key -> int8 codes
        self._writer = WriteBehind(self._persist) if self._durable is not None else None

    # -- start-up ---------------------------------------------------------------------------------

    def restore(self, keep: Callable[[str], bool]) -> dict[str, list[str]]:
        """Load every site's durable set for which `keep(site_id)` (enrolled, not revoked); purge
        the others. A set whose rows are incomplete is purged too: never half a set."""
        report: dict[str, list[str]] = {"loaded": [], "purged": [], "incomplete": []}
        if self.follower:
            report["loaded"] = self.follow(keep)
            return report
        if self._durable is None:
            return report
        for head in self._durable.heads():
            site = head.site_id
            if not keep(site):
                self._durable.purge(site)
                report["purged"].append(site)
                continue
            try:
                head, codes = self._durable.settle(head)  # orphans gone, format 1 migrated
            except BackendError as exc:
                log.error("index.site_incomplete", site_id=site, error=str(exc))
                self._durable.purge(site)
                report["incomplete"].append(site)
                continue
            self._install(head, codes, None)
            report["loaded"].append(site)
        if self._durable.mirror is not None:  # a crash may have left it behind the head files
            self._durable.mirror.reconcile(self._stored.values())
        self._durable.drop_legacy(self._stored.values())
        log.info("index.restored", **{k: len(v) for k, v in report.items()}, summaries=len(self._meta))
        return report

    # -- publications -----------------------------------------------------------------------------

    def current(self, site_id: str) -> SiteSet | None:
        return self._sites.get(validate_site_id(site_id))

    def is_replay(self, pub: Publication) -> bool:
        """True when `pub` is exactly the publication the site's set came from (a resend after a
        lost answer: nothing to do); ConflictError when its sequence made the set but its bytes
        differ (one sequence, one content)."""
        cur = self._sites.get(pub.site_id)
        if cur is None or cur.sequence != pub.sequence:
            return False
        if cur.payload_sha256 != pub.payload_sha256:
            raise ConflictError(
                f"site {pub.site_id!r}: sequence {pub.sequence} was accepted with other content "
                "(same sequence, different bytes refused); publish with a higher sequence"
            )
        return True

    def plan(self, pub: Publication, floor: int | None) -> Plan:
        """Check `pub` against the site's held set and work out the change; stores nothing.

        `floor` is the registry's last accepted sequence for the site: a held set above it means
        the floor was reset (key rotation), so the held set no longer constrains versions/bases."""
        site = validate_site_id(pub.site_id)
        got = pub.embedding
        if got != self.space:
            raise InputError(
                f"publication vectors are {got.describe()}; the gateway indexes {self.space.describe()}: "
                f"the site must re-embed with the gateway's embedder (`hansa site reembed`)"
            )
        previous = self._sites.get(site)
        trusted = previous is not None and floor is not None and previous.sequence <= floor
        carried = carried_over(pub, previous.head() if trusted else None)
        pieces = pub.pieces
        norms = np.linalg.norm(pieces.vectors, axis=1) if len(pieces) else np.zeros(0)
        if (norms == 0).any():
            raise InputError(f"publication: summary {pieces.ids[int(np.argmax(norms == 0))]!r} has a zero vector")
        old_rows = previous.rows if previous is not None else {}
        rows: dict[str, _Row] = {sid: old_rows[sid] for sid in carried}
        add: list[tuple[int, int]] = []
        for i, sid in enumerate(pieces.ids):
            old = old_rows.get(sid)
            if old is not None and (old[1], old[2]) == (pieces.versions[i], pub.manifest[sid][1]):
                rows[sid] = old  # resent unchanged (a full set): keep the row as it is
                continue
            handle = next(self._handles)
            rows[sid] = (handle, pieces.versions[i], pub.manifest[sid][1], pieces.levels[i], pieces.entities[i])
            add.append((handle, i))
        kept = {row[0] for row in rows.values()}
        remove = [row[0] for row in old_rows.values() if row[0] not in kept]
        new = SiteSet(site, pub.sequence, pub.expires, pub.payload_sha256, pub.manifest_sha256, rows, pub.terms)
        return Plan(pub, previous, new, add, remove)

    def commit(self, plan: Plan) -> SiteSet:
        """Swap the planned set in as one change; refuses (ConflictError) if the site's set moved
        since `plan` (another publication got there first: plan again)."""
        site = plan.new.site_id
        with self._lock:
            if self._sites.get(site) is not plan.previous:
                raise ConflictError(f"site {site!r}: another publication was applied meanwhile; retry")
            pieces = plan.publication.pieces
            idx = [i for _, i in plan.add]
            codes = quantise(pieces.vectors[idx]) if idx else np.zeros((0, self.space.dim), np.int8)
            self._swap(plan.previous, plan.new, [h for h, _ in plan.add], codes, plan.remove)
            if self._writer is not None:
                unsaved = self._unsaved.setdefault(site, {})
                for n, sid in enumerate(pieces.ids[i] for i in idx):
                    row = plan.new.rows[sid]
                    unsaved[row_key(site, sid, row[1], row[2])] = codes[n]
        if self._writer is not None:
            self._writer.mark(site)
        log.info("index.committed", site_id=site, sequence=plan.new.sequence, summaries=len(plan.new.rows),
                 changed=plan.changed, withdrawn=plan.withdrawn)
        return plan.new

    def _swap(self, previous: SiteSet | None, new: SiteSet | None, add_handles: list[int], codes: np.ndarray,
              remove_handles: list[int]) -> None:
        """One atomic change of the ANN index (rows: the directions of int8 `codes`), with the
        site's bookkeeping switched inside it."""
        site = (new or previous).site_id  # type: ignore[union-attr]
        fresh = set(add_handles)
        added = {row[0]: (site, sid, row[4], row[3]) for sid, row in (new.rows.items() if new else ()) if row[0] in fresh}

        def switch() -> None:
            self._meta.update(added)
            for handle in remove_handles:
                self._meta.pop(handle, None)
            if new is None:
                self._sites.pop(site, None)
            else:
                self._sites[site] = new

        vectors = directions(codes) if len(codes) else np.zeros((0, self.space.dim), np.float32)
        self.ann.replace(np.asarray(add_handles, dtype=np.int64), vectors, np.asarray(remove_handles, dtype=np.int64),
                         on_commit=switch)

    def refresh_from_durable(self, keep: Callable[[str], bool] = lambda site_id: True) -> list[str]:
        """Load every site set another process made durable with a higher sequence than ours.

        Why: gateway workers each hold the index in memory; a publication accepted by one worker
        reaches the others through the durable copy (it flushes before announcing the change in
        the shared state, hansa.core.shared_state). Only newer sets are taken, so a worker
        never rolls a set back; removals follow the registry (revocation), not a missing head."""
        if self.follower:
            return self.follow(keep)
        if self._durable is None:
            return []
        loaded: list[str] = []
        for head in self._durable.heads():
            site = head.site_id
            if not keep(site):  # revoked: another worker's purge of its durable copy may still be under way
                continue
            held = self._sites.get(site)
            if held is not None and held.sequence >= head.sequence:
                continue
            if self._take_newer(head):
                loaded.append(site)
        if loaded:
            log.info("index.refreshed", sites=loaded)
        return loaded

    def follow(self, keep: Callable[[str], bool] = lambda site_id: True) -> list[str]:
        """A follower's poll: load each mirrored set newer than ours (and kept: not revoked here),
        drop the sets the primary no longer mirrors. One small query when nothing changed; a poll
        already running in another thread is not repeated."""
        assert self._mirror is not None and self.follower
        if not self._follow_lock.acquire(blocking=False):
            return []
        try:
            pointers = self._mirror.pointers()
            for site in [s for s in self._sites if s not in pointers]:
                self.remove_site(site)  # the primary purged it (revoked there): in memory only
            loaded: list[str] = []
            for site, pointer in sorted(pointers.items()):
                held = self._sites.get(site)
                if not keep(site) or (held is not None and held.sequence >= pointer.sequence):
                    continue
                head = self._mirror.read(pointer)
                if head is None:  # the primary switched meanwhile: the next poll reads the new head
                    continue
                if self._take_newer(head):
                    loaded.append(site)
            if loaded:
                log.info("index.followed", sites=loaded, summaries=len(self._meta))
            return loaded
        finally:
            self._follow_lock.release()

    def _take_newer(self, head: StoredHead) -> bool:
        """Swap in a durable `head` unless we hold its sequence or a newer one; False if not taken."""
        assert self._store is not None
        site = head.site_id
        try:
            codes = stored_codes(self._store, head, self.space.dim)
        except BackendError as exc:  # the writer is mid-save: the next change notice (or poll) retries
            log.warning("index.refresh_incomplete", site_id=site, error=str(exc))
            return False
        with self._lock:
            previous = self._sites.get(site)
            if previous is not None and previous.sequence >= head.sequence:
                return False
            self._install(head, codes, previous)
            self._unsaved.pop(site, None)
        return True

    def _install(self, head: StoredHead, codes: Mapping[str, np.ndarray], previous: SiteSet | None) -> None:
        """Swap in the set a durable `head` names (its int8 `codes` by summary id) in place of `previous`."""
        rows = {sid: (next(self._handles), r[0], r[1], r[2], r[3]) for sid, r in head.rows.items()}
        new = SiteSet(head.site_id, head.sequence, head.expires, head.payload_sha256, head.manifest_sha256, rows,
                      head.terms)
        order = list(rows)
        matrix = np.stack([codes[sid] for sid in order]) if order else np.zeros((0, self.space.dim), np.int8)
        self._swap(previous, new, [rows[sid][0] for sid in order], matrix,
                   [row[0] for row in previous.rows.values()] if previous else [])
        self._stored[head.site_id] = head

    def remove_site(self, site_id: str) -> None:
        """Drop a site's whole set at once (revocation); its durable copy follows."""
        validate_site_id(site_id)
        with self._lock:
            previous = self._sites.get(site_id)
            if previous is not None:
                self._swap(previous, None, [], np.zeros((0, self.space.dim), np.int8),
                           [row[0] for row in previous.rows.values()])
            self._unsaved.pop(site_id, None)
        if self._writer is not None and (previous is not None or site_id in self._stored):
            self._writer.mark(site_id)

    # -- durability -------------------------------------------------------------------------------

    def _persist(self, site_id: str) -> None:
        """Bring the durable copy of one site up to its current in-memory set (WriteBehind)."""
        assert self._durable is not None
        with self._lock:
            current = self._sites.get(site_id)
            stored = self._stored.get(site_id)
            unsaved = dict(self._unsaved.get(site_id, {}))
        if current is None:
            if stored is not None:
                self._durable.purge(site_id)
                with self._lock:
                    self._stored.pop(site_id, None)
            return
        if stored is not None and stored.payload_sha256 == current.payload_sha256:
            return
        head = current.stored()
        self._durable.save(head, stored, unsaved)
        with self._lock:
            self._stored[site_id] = head
            now = self._sites.get(site_id)
            live = set(now.stored().keys().values()) if now is not None else set()
            left = {k: v for k, v in self._unsaved.get(site_id, {}).items() if k in live and k not in head.keys().values()}
            if left:
                self._unsaved[site_id] = left
            else:
                self._unsaved.pop(site_id, None)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until the durable copy holds every committed set; False on timeout."""
        return True if self._writer is None else self._writer.flush(timeout)

    def close(self, timeout: float | None = 30.0, flush: bool = True) -> bool:
        """Flush (unless told not to) and stop the background writer; the store itself is the
        caller's to close. Returns whether everything committed was written."""
        done = True if self._writer is None else self._writer.close(timeout if flush else 0)
        self.ann.join(timeout)
        return done

    # -- queries ----------------------------------------------------------------------------------

    def search(self, vector: np.ndarray, top_m: int) -> list[SummaryHit]:
        """The `top_m` summaries nearest the question, best first, across every site in the index."""
        if isinstance(top_m, bool) or not isinstance(top_m, int) or not 1 <= top_m <= MAX_TOP_M:
            raise InputError(f"top_m must be an integer in 1..{MAX_TOP_M}, got {top_m!r}")
        q = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        if q.shape[1] != self.space.dim:
            raise InputError(f"question vector has dim {q.shape[1]}; the index holds dim {self.space.dim}")

        def resolve(ids: np.ndarray, scores: np.ndarray) -> list[SummaryHit]:
            meta = self._meta
            return [SummaryHit(meta[h][0], meta[h][1], float(s), meta[h][2], meta[h][3])
                    for h, s in zip(ids.tolist(), scores.tolist())]

        return self.ann.search(q, top_m, resolve)

    def sites(self, among: Iterable[str] | None = None) -> dict[str, int]:
        """How many summaries each site holds (of `among`, if given; sites with none left out)."""
        sets = dict(self._sites)
        names = sets if among is None else [validate_site_id(s) for s in among]
        return {s: len(sets[s].rows) for s in names if s in sets and sets[s].rows}

    def richness(self, among: Iterable[str]) -> dict[str, tuple[int, int]]:
        """(published communities, entities they cover) per site of `among` that publishes: what
        the index keeps of each summary's Richness (chunks and documents are checked on
        publication but not kept, so SCOUT-RAG's richness here counts communities and entities)."""
        sets = dict(self._sites)
        return {s: (len(sets[s].rows), sum(r[4] for r in sets[s].rows.values())) for s in among if s in sets}

    def term_sketches(self, among: Iterable[str]) -> dict[str, TermSketch]:
        """The term statistics of each site of `among` that publishes them."""
        sets = dict(self._sites)
        return {s: sets[s].terms for s in among if s in sets and sets[s].terms is not None}  # type: ignore[misc]

    def count(self) -> int:
        return len(self.ann)
