"""The gateway's in-memory nearest-neighbour index over published summary vectors (FAISS).

Why in memory: every question searches every published summary, so this search bounds routing
latency; Milvus stays the durable store the index is rebuilt from at start (gateway.index.summaries).

Why two structures: while the index is small an exact scan (IndexFlatIP) takes a few
milliseconds, and routing quality then never depends on ANN recall. Past `ivf_threshold` rows it
becomes an IVF index (inverted lists over a k-means coarse quantizer, ~2*sqrt(n) lists) whose rows
are stored as float16 (or 8-bit) codes of the vectors themselves (no residuals), so 1M x 384
needs 768 MB (384 MB) and the index can be re-trained from its own codes, without the original
vectors. Training happens in a background thread while the current structure keeps serving;
changes made meanwhile are replayed onto the new structure before it is swapped in. It is
re-trained whenever it has grown `RETRAIN_GROWTH` times since its last training.

Vectors are unit-normalized on the way in (and queries too), so inner product is cosine.

Threads: a search runs on one OpenMP thread. One query is too small to share, and waking a team
costs milliseconds on a busy machine (measured: 16-26 ms instead of 0.05 ms for 2,000 rows on 2
loaded cores); a gateway serves concurrent questions on concurrent threads instead. Training and
bulk additions keep FAISS's default team.

Thread safety: FAISS allows concurrent searches but not a search concurrent with a change, so a
readers-writer lock gives searches shared access and changes exclusive access. A change
(`replace`) is atomic: a search sees all of it or none of it, and a failure leaves the index as
it was.
"""
from __future__ import annotations

import ctypes
import math
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

import numpy as np

from hansa.core.errors import InputError
from hansa.core.logs import get_logger

log = get_logger(__name__)
T = TypeVar("T")

DEFAULT_IVF_THRESHOLD = 50_000
RETRAIN_GROWTH = 4.0
STORAGES = ("fp16", "sq8")
TRAIN_POINTS_PER_LIST = 40  # faiss warns below 39; more buys little on clustered data
MIN_TRAIN_POINTS = 10_000
_CHUNK = 65_536  # rows moved at a time when a structure is rebuilt (bounds the extra memory)


class ReadWriteLock:
    """Many readers or one writer; a waiting writer holds off new readers (no writer starvation)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0

    @contextmanager
    def read(self) -> Iterator[None]:
        with self._cond:
            while self._writer or self._writers_waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        with self._cond:
            self._writers_waiting += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._writers_waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


def _faiss() -> Any:
    import faiss  # imported lazily: only the gateway needs it

    return faiss


def _release_freed_memory() -> None:
    """Hand the replaced structure's memory back to the OS (glibc keeps freed arenas otherwise):
    at 1M rows a re-training frees ~700 MB that would stay in the process's RSS."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


def ivf_nlist(n: int) -> int:
    """~2*sqrt(n) inverted lists: cheap k-means on 2 cores, short lists at 1M rows."""
    return max(16, int(round(2 * math.sqrt(max(n, 1)))))


def default_nprobe(nlist: int) -> int:
    """Lists scanned per query: enough for recall@10 >= 0.95 on clustered summaries at 1M rows
    (scripts/bench_routing.py measures it), i.e. about 3% of the lists, at least 16."""
    return min(nlist, max(16, nlist // 32))


def unit_rows(vectors: np.ndarray, dim: int) -> np.ndarray:
    """A C-contiguous float32 (n, dim) copy with unit rows; zero or non-finite rows are refused."""
    arr = np.array(vectors, dtype=np.float32, order="C", ndmin=2)
    if arr.ndim != 2 or arr.shape[1] != dim:
        raise InputError(f"vectors must have shape (n, {dim}), got {np.shape(vectors)}")
    norms = np.linalg.norm(arr, axis=1)
    if not np.isfinite(norms).all() or (norms == 0).any():
        raise InputError("a vector is zero or not finite: it has no direction to compare by cosine")
    arr /= norms[:, None]
    return arr


class AnnIndex:
    """Inner-product (cosine) top-k over unit vectors keyed by int64 ids; see the module docstring.

    `background=False` trains in the calling thread (tests, benchmarks, start-up)."""

    def __init__(
        self,
        dim: int,
        *,
        ivf_threshold: int = DEFAULT_IVF_THRESHOLD,
        storage: str = "fp16",
        nprobe: int | None = None,
        background: bool = True,
        seed: int = 1234,
    ) -> None:
        if storage not in STORAGES:
            raise InputError(f"storage must be one of {STORAGES}, got {storage!r}")
        if ivf_threshold < 1:
            raise InputError("ivf_threshold must be positive")
        self.dim = dim
        self.ivf_threshold = ivf_threshold
        self.storage = storage
        self._nprobe_override = nprobe
        self._background = background
        self._seed = seed
        self._lock = ReadWriteLock()
        self._index = self._flat()
        self._kind = "flat"
        self._trained_rows = 0
        self._nlist = 0
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None  # ops during training
        self._trainer: threading.Thread | None = None
        self._state_lock = threading.Lock()  # guards _pending / _trainer hand-offs

    # -- structures -------------------------------------------------------------------------------

    def _flat(self) -> Any:
        faiss = _faiss()
        return faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim))

    def _ivf(self, nlist: int) -> Any:
        faiss = _faiss()
        qtype = faiss.ScalarQuantizer.QT_fp16 if self.storage == "fp16" else faiss.ScalarQuantizer.QT_8bit
        index = faiss.IndexIVFScalarQuantizer(
            faiss.IndexFlatIP(self.dim), self.dim, nlist, qtype, faiss.METRIC_INNER_PRODUCT
        )
        index.by_residual = False  # a code is the vector itself: decodable, so re-trainable
        index.cp.seed = self._seed
        return index

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def nlist(self) -> int:
        return self._nlist

    @property
    def nprobe(self) -> int:
        return int(self._index.nprobe) if self._kind == "ivf" else 0

    @nprobe.setter
    def nprobe(self, value: int) -> None:
        """Fix the lists scanned per query (benchmarks sweep it); kept across re-training."""
        self._nprobe_override = int(value)
        with self._lock.write():
            if self._kind == "ivf":
                self._index.nprobe = min(self._nlist, self._nprobe_override)

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def ids(self) -> np.ndarray:
        """Every row's id (sorted): for checks and diagnostics, not the serving path."""
        parts = [ids for ids, _ in self._snapshot()]
        return np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.int64)

    def memory_bytes(self) -> int:
        """What the stored rows take (codes + ids), the part that grows with the index."""
        code = 4 * self.dim if self._kind == "flat" else (2 if self.storage == "fp16" else 1) * self.dim
        return len(self) * (code + 8)

    # -- changes ----------------------------------------------------------------------------------

    def replace(
        self,
        add_ids: np.ndarray,
        add_vectors: np.ndarray,
        remove_ids: np.ndarray,
        on_commit: Callable[[], None] | None = None,
    ) -> None:
        """Add rows and remove rows as one change: a search sees all of it or none of it.

        `on_commit` runs inside the change, after FAISS took it and before any search can see it,
        so a caller can switch its own bookkeeping (id -> metadata) in the same instant."""
        faiss = _faiss()
        add_ids = np.ascontiguousarray(add_ids, dtype=np.int64).reshape(-1)
        remove_ids = np.ascontiguousarray(remove_ids, dtype=np.int64).reshape(-1)
        vectors = unit_rows(add_vectors, self.dim) if len(add_ids) else np.zeros((0, self.dim), np.float32)
        if len(vectors) != len(add_ids):
            raise InputError(f"{len(add_ids)} ids but {len(vectors)} vectors")
        with self._lock.write():
            self._apply(self._index, add_ids, vectors, remove_ids, faiss)
            if on_commit is not None:
                on_commit()
            with self._state_lock:
                if self._pending is not None:
                    self._pending.append((add_ids, vectors, remove_ids))
        self._maybe_retrain()

    def _apply(self, index: Any, add_ids: np.ndarray, vectors: np.ndarray, remove_ids: np.ndarray, faiss: Any) -> None:
        """Add first, then remove; if the removal fails, the added rows are taken out again."""
        if len(add_ids):
            index.add_with_ids(vectors, add_ids)
        try:
            self._remove(index, remove_ids, faiss)
        except BaseException:
            if len(add_ids):
                index.remove_ids(faiss.IDSelectorBatch(add_ids))
            raise

    @staticmethod
    def _remove(index: Any, ids: np.ndarray, faiss: Any) -> None:
        if len(ids):
            index.remove_ids(faiss.IDSelectorBatch(ids))

    # -- search -----------------------------------------------------------------------------------

    def search(self, vector: np.ndarray, k: int, resolve: Callable[[np.ndarray, np.ndarray], T]) -> T:
        """`resolve(ids, scores)` of the `k` rows nearest `vector`, best first (scores: cosine).

        `resolve` runs while no change can happen, so it reads the caller's bookkeeping in the
        same state as the rows it was given."""
        faiss = _faiss()
        q = unit_rows(vector, self.dim)
        threads = faiss.omp_get_max_threads()  # this thread's OpenMP setting (it is per thread)
        faiss.omp_set_num_threads(1)  # see the module docstring: one query, one thread
        try:
            with self._lock.read():
                n = int(self._index.ntotal)
                if n == 0:
                    return resolve(np.zeros(0, np.int64), np.zeros(0, np.float32))
                scores, ids = self._index.search(q, min(k, n))
                keep = ids[0] >= 0
                return resolve(ids[0][keep], scores[0][keep])
        finally:
            faiss.omp_set_num_threads(threads)

    # -- training ---------------------------------------------------------------------------------

    def _maybe_retrain(self) -> None:
        n = len(self)
        due = (self._kind == "flat" and n >= self.ivf_threshold) or (
            self._kind == "ivf" and n >= RETRAIN_GROWTH * max(self._trained_rows, 1)
        )
        if due:
            self.retrain(wait=not self._background)

    def retrain(self, wait: bool = True) -> None:
        """Build a freshly trained structure from the current rows and swap it in.

        Below the threshold that is the exact index, above it an IVF sized for the current rows.
        With `wait=False` it runs in a background thread (at most one at a time)."""
        with self._state_lock:
            if self._trainer is not None and self._trainer.is_alive():
                running = self._trainer
            else:
                running = None
                self._pending = []
                self._trainer = threading.Thread(target=self._train_and_swap, name="hansa-ann-train", daemon=True)
                self._trainer.start()
        if wait:
            (running or self._trainer).join()
            if running is not None:  # someone else's run finished: train again on today's rows
                self.retrain(wait=True)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for a background training to finish; True when none is running."""
        trainer = self._trainer
        if trainer is not None:
            trainer.join(timeout)
            return not trainer.is_alive()
        return True

    def _snapshot(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(ids, float32 vectors) of every row, in chunks, read from the serving structure.

        An exact index is copied at once (it is small: at most about the threshold); an IVF one
        list at a time, each under a short read lock so publications are not held up. Rows never
        move between lists, and changes made meanwhile are in the pending log, which is replayed
        idempotently (see `_replay`), so the copy converges to the serving contents."""
        faiss = _faiss()
        with self._lock.read():
            index, kind = self._index, self._kind
            if kind == "flat":
                n = int(index.ntotal)
                ids = faiss.vector_to_array(index.id_map).copy()
                vectors = index.index.reconstruct_n(0, n) if n else np.zeros((0, self.dim), np.float32)
        if kind == "flat":
            for start in range(0, len(ids), _CHUNK):
                yield ids[start:start + _CHUNK], vectors[start:start + _CHUNK]
            return
        from faiss.contrib.inspect_tools import get_invlist

        for lst in range(index.nlist):
            with self._lock.read():
                if self._index is not index:  # swapped under us (cannot happen: one trainer at a time)
                    raise RuntimeError("the serving index changed during a snapshot")
                ids, codes = get_invlist(index.invlists, lst)
                ids, vectors = ids.copy(), (index.sq.decode(codes) if len(ids) else None)
            if len(ids):
                yield ids, vectors

    @staticmethod
    def _replay(index: Any, pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]], faiss: Any) -> None:
        """Apply logged changes so that each ends as it did on the serving index, whether or not
        the snapshot already saw it: drop every id the change touches, then add its rows."""
        for add_ids, vectors, remove_ids in pending:
            touched = np.concatenate([add_ids, remove_ids])
            if len(touched):
                index.remove_ids(faiss.IDSelectorBatch(touched))
            if len(add_ids):
                index.add_with_ids(vectors, add_ids)

    def _train_and_swap(self) -> None:
        faiss = _faiss()
        try:
            n = len(self)
            rng = np.random.default_rng(self._seed)
            if n < self.ivf_threshold:
                target, nlist = self._flat(), 0
            else:
                nlist = ivf_nlist(n)
                share = min(1.0, max(TRAIN_POINTS_PER_LIST * nlist, MIN_TRAIN_POINTS) / n)
                sample = [vecs[rng.random(len(vecs)) < share] for _, vecs in self._snapshot()]
                target = self._ivf(nlist)
                target.train(np.ascontiguousarray(np.concatenate(sample), dtype=np.float32))
                del sample
                target.nprobe = min(nlist, self._nprobe_override or default_nprobe(nlist))
            for ids, vecs in self._snapshot():
                target.add_with_ids(np.ascontiguousarray(vecs, dtype=np.float32), ids)
            with self._lock.write():
                with self._state_lock:
                    pending, self._pending = self._pending or [], None
                self._replay(target, pending, faiss)
                self._index, self._kind, self._nlist = target, ("flat" if nlist == 0 else "ivf"), nlist
                self._trained_rows = int(target.ntotal)
            _release_freed_memory()
            log.info("ann.trained", kind=self._kind, rows=self._trained_rows, nlist=nlist, nprobe=self.nprobe)
        except Exception:  # a failed training leaves the serving structure as it was
            with self._state_lock:
                self._pending = None
            log.exception("ann.train_failed")
