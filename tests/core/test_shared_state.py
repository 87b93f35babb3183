"""State shared by worker processes: one SQLite (WAL) file, opened by several real processes.

The multi-process tests fork: each child opens its own connection to the same file, as gunicorn
workers do, and reports what it saw through a pipe."""
from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from hansa.core.errors import ConfigError
from hansa.core.shared_state import ChangeWatcher, SharedState
from hansa.gateway.trust.ratelimit import RateLimited, TokenBucketLimiter
from hansa.sync.httpsig import (
    REPLAYED,
    NonceCache,
    ReplayCacheFull,
    SignatureRefused,
    keyring,
    sign_request,
    verify_request,
)
from hansa.sync.keys import SiteIdentity
from hansa.sync.nonce_store import SharedNonceCache

FORK = mp.get_context("fork")  # the children inherit this module's functions; nothing is pickled by name


def in_processes(n: int, work: Callable[[int], Any], timeout_s: float = 60.0) -> list[Any]:
    """Run `work(i)` in `n` forked processes at once; their results in order (exceptions re-raised)."""
    def child(i: int, conn: Any) -> None:
        try:
            conn.send(("ok", work(i)))
        except BaseException as exc:  # report everything: a silent child would pass the test
            conn.send(("error", repr(exc)))
        finally:
            conn.close()

    pipes, procs = [], []
    for i in range(n):
        parent, child_end = FORK.Pipe(duplex=False)
        proc = FORK.Process(target=child, args=(i, child_end), daemon=True)
        proc.start()
        child_end.close()
        pipes.append(parent)
        procs.append(proc)
    results = []
    for parent, proc in zip(pipes, procs):
        if not parent.poll(timeout_s):
            proc.kill()
            raise AssertionError(f"child {proc.pid} gave no answer in {timeout_s} s")
        status, value = parent.recv()
        proc.join(timeout_s)
        if status != "ok":
            raise AssertionError(f"child failed: {value}")
        results.append(value)
    return results


@pytest.fixture()
def state(tmp_path: Path) -> SharedState:
    return SharedState(tmp_path / "state.sqlite")


# -- the nonce cache interface, in memory and shared ----------------------------------------------
@pytest.fixture(params=["memory", "shared"])
def make_cache(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[int], Any]:
    if request.param == "memory":
        return lambda capacity: NonceCache(capacity)
    return lambda capacity: SharedNonceCache(SharedState(tmp_path / "nonces.sqlite"), capacity=capacity)


def test_a_nonce_is_accepted_once_until_it_expires(make_cache: Callable[[int], Any]) -> None:
    cache = make_cache(10)
    cache.use("k:n1", until=110.0, now=100.0)
    with pytest.raises(SignatureRefused) as refused:
        cache.use("k:n1", until=115.0, now=105.0)
    assert refused.value.reason == REPLAYED
    assert len(cache) == 1
    cache.use("k:n1", until=130.0, now=111.0)  # expired: its signature is refused as stale anyway


def test_a_full_cache_refuses_instead_of_forgetting(make_cache: Callable[[int], Any]) -> None:
    cache = make_cache(3)
    for i in range(3):
        cache.use(f"k:{i}", until=200.0, now=100.0)
    with pytest.raises(ReplayCacheFull) as full:
        cache.use("k:new", until=200.0, now=150.0)
    assert full.value.http_status == 503
    with pytest.raises(SignatureRefused):  # nothing was forgotten to make room
        cache.use("k:0", until=200.0, now=150.0)
    cache.use("k:new", until=300.0, now=201.0)  # once the others expire there is room again
    assert len(cache) == 1


# -- several processes -----------------------------------------------------------------------------
GATEWAY = SiteIdentity.generate()
TARGET = "https://site.example/v1/retrieve"


def test_a_request_accepted_by_one_worker_is_refused_as_a_replay_by_another(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    SharedState(path)
    body = b'{"question": "q"}'
    headers = {"Content-Type": "application/json"}
    headers.update(sign_request(GATEWAY, "POST", TARGET, headers, body))
    keys = keyring([GATEWAY.public_key])

    def verify_in_worker(i: int) -> str:
        if i == 1:
            time.sleep(0.5)  # worker 0 sees the request first
        nonces = SharedNonceCache(SharedState(path))
        try:
            verify_request("POST", TARGET, headers, body, keys, nonces)
            return "accepted"
        except SignatureRefused as exc:
            return exc.reason

    assert in_processes(2, verify_in_worker) == ["accepted", REPLAYED]
    fresh = {"Content-Type": "application/json"}
    fresh.update(sign_request(GATEWAY, "POST", TARGET, fresh, body))
    verify_request("POST", TARGET, fresh, body, keys, SharedNonceCache(SharedState(path)))  # a new nonce passes


def test_racing_workers_accept_each_nonce_exactly_once(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    SharedState(path)
    nonces = [f"gw:{i:04d}" for i in range(60)]

    def claim_all(i: int) -> list[str]:
        cache = SharedNonceCache(SharedState(path))
        won = []
        for nonce in (nonces if i % 2 else reversed(nonces)):
            try:
                cache.use(nonce, until=time.time() + 60, now=time.time())
                won.append(nonce)
            except SignatureRefused:
                pass
        return won

    winners = [n for won in in_processes(4, claim_all) for n in won]
    assert sorted(winners) == nonces  # each accepted by one worker, none twice, none lost


def test_workers_share_one_token_bucket(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    SharedState(path)

    def spend(i: int) -> int:
        limiter = TokenBucketLimiter("query", burst=100, refill_per_s=1e-6, shared=SharedState(path))
        granted = 0
        for _ in range(60):
            try:
                limiter.charge("alice", 1)
                granted += 1
            except RateLimited:
                pass
        return granted

    granted = in_processes(4, spend)
    assert sum(granted) == 100, granted  # one burst between four workers, not four
    other = TokenBucketLimiter("query", burst=100, refill_per_s=1e-6, shared=SharedState(path))
    with pytest.raises(RateLimited):
        other.charge("alice", 1)
    assert other.charge("bob", 1) == 99  # identities stay separate


def test_a_shared_bucket_refills_with_its_clock(state: SharedState) -> None:
    clock = [1000.0]
    limiter = TokenBucketLimiter("publication", burst=2, refill_per_s=0.5, clock=lambda: clock[0], shared=state)
    assert limiter.charge("site-a", 2) == 0
    with pytest.raises(RateLimited) as refused:
        limiter.charge("site-a", 1)
    assert refused.value.retry_after == 2
    clock[0] += 2.0
    assert limiter.charge("site-a", 1) == 0


def test_a_change_in_one_worker_is_seen_by_every_other_at_its_next_look(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    watcher = ChangeWatcher(SharedState(path), "registry")
    assert not watcher.changed()

    def publish(i: int) -> int:
        return SharedState(path).bump("registry")

    versions = in_processes(3, publish)
    assert sorted(versions) == [1, 2, 3]
    assert watcher.changed() and not watcher.changed()  # once per change seen, then quiet


def test_versioned_values(state: SharedState) -> None:
    assert state.get("floors") == (None, 0)
    assert state.put("floors", b"a") == 1
    assert state.put("floors", b"b") == 2
    assert state.get("floors") == (b"b", 2)
    assert state.bump("floors") == 3 and state.get("floors") == (b"b", 3)


def test_shared_state_needs_a_file() -> None:
    with pytest.raises(ConfigError, match="file"):
        SharedState(":memory:")


def test_a_ring_keeps_its_newest_records_whichever_worker_wrote_them(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    SharedState(path)

    def write(i: int) -> None:
        ring = SharedState(path)
        for j in range(5):
            ring.append("queries", f"{i}-{j}".encode(), keep=8)

    in_processes(3, write)
    state = SharedState(path)
    newest = state.newest("queries", 100)
    assert len(newest) == 8  # 15 written, the ring keeps 8
    assert len(set(newest)) == 8
    for i in range(3):  # each worker's own records stay in the order it wrote them
        mine = [int(v.split(b"-")[1]) for v in newest if v.startswith(f"{i}-".encode())]
        assert mine == sorted(mine, reverse=True)
    state.append("queries", b"last", keep=8)
    assert state.newest("queries", 2)[0] == b"last" and len(state.newest("queries", 2)) == 2
    assert state.newest("other", 5) == []
    with pytest.raises(ValueError):
        state.append("queries", b"x", keep=0)


def _open_after(path: Path, barrier: Any, results: Any) -> None:
    barrier.wait()
    try:
        SharedState(path)
        results.put("ok")
    except Exception as exc:  # reported to the parent, which asserts on it
        results.put(repr(exc))


def test_workers_opening_a_fresh_state_file_together_all_succeed(tmp_path: Path) -> None:
    """Gateway workers start together: the first ones switch the new file to WAL and create the
    schema while the others ask for WAL too, which SQLite refused at once ("database is locked",
    its busy handler not called) in ~1 of 5 rounds of 6 processes before SharedState retried
    (a fresh-machine CI run failed so). 20 rounds."""
    ctx = mp.get_context("fork")
    for round_ in range(20):
        path = tmp_path / f"r{round_}" / "state.sqlite"
        barrier, results = ctx.Barrier(6), ctx.Queue()
        procs = [ctx.Process(target=_open_after, args=(path, barrier, results)) for _ in range(6)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(30)
        got = [results.get(timeout=5) for _ in procs]
        assert got == ["ok"] * 6, (round_, got)
