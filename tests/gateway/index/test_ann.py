"""The gateway's in-memory nearest-neighbour index (FAISS): exact while small, IVF past a
threshold, re-trained in the background from its own codes while changes keep coming, and every
change atomic."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from hansa.core.errors import InputError
from hansa.gateway.index.ann import AnnIndex, ReadWriteLock

DIM = 32


def clustered(n: int, seed: int, centres: int = 20) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centres, DIM)).astype(np.float32)
    x = c[rng.integers(0, centres, n)] + 0.5 * rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def exact(x: np.ndarray, ids: np.ndarray, q: np.ndarray, k: int) -> list[int]:
    return [int(i) for i in ids[np.argsort(-(x @ q), kind="stable")[:k]]]


def ids_of(index: AnnIndex, q: np.ndarray, k: int) -> list[int]:
    return index.search(q, k, lambda ids, scores: ids.tolist())


def test_small_index_is_exact_cosine() -> None:
    index = AnnIndex(DIM, ivf_threshold=10_000, background=False)
    x = clustered(500, 1)
    ids = np.arange(100, 600)
    index.replace(ids, 3.0 * x, np.zeros(0))  # not unit length: normalized on the way in
    q = clustered(5, 2)
    for row in q:
        assert ids_of(index, row, 10) == exact(x, ids, row, 10)
        scores = index.search(row, 3, lambda i, s: s)
        np.testing.assert_allclose(scores, np.sort(x @ row)[::-1][:3], rtol=1e-5)
    assert index.kind == "flat" and len(index) == 500
    assert ids_of(index, q[0], 10_000) and len(ids_of(index, q[0], 10_000)) == 500  # k above n


def test_past_the_threshold_it_becomes_ivf_with_high_recall() -> None:
    index = AnnIndex(DIM, ivf_threshold=1_000, background=False)
    x = clustered(4_000, 3)
    ids = np.arange(4_000)
    for start in range(0, 4_000, 500):  # as publications arrive
        index.replace(ids[start:start + 500], x[start:start + 500], np.zeros(0))
    assert index.kind == "ivf" and index.nlist >= 16 and index.nprobe >= 16
    assert np.array_equal(index.ids(), ids)
    q = clustered(50, 4)
    recall = np.mean([len(set(ids_of(index, r, 10)) & set(exact(x, ids, r, 10))) / 10 for r in q])
    assert recall >= 0.95


@pytest.mark.parametrize("storage", ["fp16", "sq8"])
def test_a_retrain_keeps_every_row(storage: str) -> None:
    index = AnnIndex(DIM, ivf_threshold=300, storage=storage, background=False)
    x = clustered(1_500, 5)
    index.replace(np.arange(300), x[:300], np.zeros(0))
    first_nlist = index.nlist
    index.replace(np.arange(300, 1_500), x[300:], np.arange(0, 100))  # grows 4x: trained again
    assert index.kind == "ivf" and index.nlist > first_nlist
    assert np.array_equal(index.ids(), np.arange(100, 1_500))
    assert ids_of(index, x[700], 1) == [700]


def test_a_failed_change_leaves_the_index_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    index = AnnIndex(DIM, ivf_threshold=10_000, background=False)
    x = clustered(200, 6)
    index.replace(np.arange(100), x[:100], np.zeros(0))
    before = ids_of(index, x[150], 20)

    def fail(*args: object) -> None:
        raise RuntimeError("removal failed")

    monkeypatch.setattr(AnnIndex, "_remove", staticmethod(fail))
    committed: list[bool] = []
    with pytest.raises(RuntimeError):
        index.replace(np.arange(100, 200), x[100:], np.arange(10), on_commit=lambda: committed.append(True))
    monkeypatch.undo()
    assert committed == [] and len(index) == 100 and ids_of(index, x[150], 20) == before


def test_changes_during_a_background_retrain_are_kept() -> None:
    index = AnnIndex(DIM, ivf_threshold=2_000, background=True)
    x = clustered(8_000, 7)
    expected = set()
    for start in range(0, 8_000, 400):
        ids = np.arange(start, start + 400)
        gone = np.arange(start - 400, start - 300) if start else np.zeros(0, np.int64)
        index.replace(ids, x[start:start + 400], gone)  # trainings start (and run) meanwhile
        expected |= set(ids.tolist())
        expected -= set(gone.tolist())
    assert index.join(120)
    assert index.kind == "ivf"
    assert index.ids().tolist() == sorted(expected)


def test_bad_vectors_are_refused() -> None:
    index = AnnIndex(DIM)
    with pytest.raises(InputError, match="zero"):
        index.replace(np.arange(1), np.zeros((1, DIM)), np.zeros(0))
    with pytest.raises(InputError, match="shape"):
        index.replace(np.arange(1), np.ones((1, DIM + 1)), np.zeros(0))
    with pytest.raises(InputError, match="not finite"):
        index.search(np.full(DIM, np.nan), 3, lambda i, s: i)
    assert len(index) == 0 and index.search(np.ones(DIM), 3, lambda i, s: i.tolist()) == []


def test_the_lock_lets_readers_share_and_writers_wait() -> None:
    lock = ReadWriteLock()
    inside = threading.Event()
    release = threading.Event()
    order: list[str] = []

    def reader() -> None:
        with lock.read():
            inside.set()
            release.wait(5)
            order.append("reader")

    t = threading.Thread(target=reader)
    t.start()
    inside.wait(5)
    with lock.read():  # a second reader does not wait for the first
        order.append("second reader")
    def writer() -> None:
        with lock.write():
            order.append("writer")

    w = threading.Thread(target=writer)
    w.start()
    w.join(0.2)
    assert order == ["second reader"] and w.is_alive()  # the writer waits for the reader
    release.set()
    t.join(5)
    w.join(5)
    assert order == ["second reader", "reader", "writer"]
