"""State that every worker process of one service shares, in one SQLite file in WAL mode.

Why: `hansa site serve --workers N` (and the gateway later) runs N processes. A replay nonce one
worker accepted must be refused by every other, a client's rate-limit budget must not be N times
its burst, and a publication or revocation accepted by one worker must be seen by all at their next
request. Per-process memory cannot do that. SQLite in WAL mode can on one host: it ships with
Python (nothing to install or operate), readers never block the writer, and `BEGIN IMMEDIATE`
serializes the read-modify-write steps below across processes. Several hosts need a network store
(Redis/Valkey); the three primitives here are what such a backend would have to provide.

What it holds (one table each, all keys namespaced by the caller):
- `claim_once`: a key accepted once until it expires, with a fail-closed bound on live keys
  (replay nonces: hansa.sync.nonce_store).
- `take_tokens`: token buckets (rate limits: hansa.gateway.trust.ratelimit.SharedBuckets).
- `bump` / `version` / `put` / `get`: a versioned key/value, so a worker can ask "did anything
  change since I last looked?" with one primary-key read per request (registry, publications).
- `append` / `newest`: bounded rings of records, newest kept (the gateway's recent queries, which
  its admin page shows whichever worker answered them: hansa.gateway.recent_queries).

Connections are opened per process and per thread (a SQLite connection must never cross a fork
and is not meant to be shared between threads), lazily, so a store built before gunicorn forks
its workers is safe to use in each of them.
"""
from __future__ import annotations

import math
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from hansa.core.errors import BackendError, ConfigError

BUSY_TIMEOUT_S = 10.0  # a writer waits this long for another process's transaction before failing

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, until REAL NOT NULL) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS claims_until ON claims (until)",
    "CREATE TABLE IF NOT EXISTS claim_counts (namespace TEXT PRIMARY KEY, live INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS buckets (key TEXT PRIMARY KEY, tokens REAL NOT NULL, stamp REAL NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value BLOB, version INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS rings (name TEXT NOT NULL, seq INTEGER NOT NULL, value BLOB NOT NULL, "
    "PRIMARY KEY (name, seq)) WITHOUT ROWID",
)


class Replayed(Exception):
    """`claim_once`: the key is already claimed and has not expired."""


class ClaimsFull(Exception):
    """`claim_once`: the namespace holds `capacity` live keys; refusing beats forgetting one."""


@dataclass(frozen=True)
class TakeResult:
    """`take_tokens`: whether the cost was taken, the level left (or found, when refused), and
    whether the bucket was new (so a caller bounds the number of buckets only when it grows)."""

    taken: bool
    level: float
    created: bool = False


def _enable_wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL, retrying while another process holds the file. Why a loop: SQLite answers
    "database is locked" at once, without its busy handler, when a connection asks for WAL while
    another is switching the file or creating the schema (workers started together: 6 processes
    opening a fresh file failed in 6 of 30 rounds here), so the busy timeout alone does not wait."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    delay = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


class SharedState:
    """One SQLite file (WAL) shared by every process and thread of a service on one host."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path).expanduser()
        if str(path) == ":memory:":
            raise ConfigError("shared state needs a file every worker can open, not ':memory:'")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._transaction() as db:
            for statement in _SCHEMA:
                db.execute(statement)

    # -- plumbing ------------------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        """This process's and thread's connection (a fork gets a fresh one)."""
        conn = getattr(self._local, "conn", None)
        if conn is None or self._local.pid != os.getpid():
            try:
                conn = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_S)
                _enable_wal(conn)
                # WAL + NORMAL: a commit survives a crash of any worker (not of the machine, which
                # also ends every signature and bucket this state protects).
                conn.execute("PRAGMA synchronous = NORMAL")
            except sqlite3.DatabaseError as exc:
                raise BackendError(f"cannot open the shared state file {self.path}: {exc}") from exc
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction taken up front (BEGIN IMMEDIATE): read-modify-write is atomic
        across processes, and a busy database waits instead of failing at commit."""
        db = self._connection()
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise BackendError(f"shared state {self.path} is busy or unavailable: {exc}") from exc
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def close(self) -> None:
        """Close this thread's connection (others close when their thread or process ends)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            conn.close()
        self._local.conn = None

    # -- claims: accepted once until they expire -------------------------------------------------------
    def claim_once(self, namespace: str, key: str, until: float, now: float, capacity: int) -> None:
        """Claim `namespace:key` until `until`, or raise Replayed (claimed before, not yet expired)
        or ClaimsFull (`capacity` live claims in the namespace). Expired claims are dropped first."""
        full_key = f"{namespace}\x1f{key}"
        lo, hi = f"{namespace}\x1f", f"{namespace}\x1f\U0010ffff"
        with self._transaction() as db:
            expired = db.execute("DELETE FROM claims WHERE until < ? AND key >= ? AND key < ?", (now, lo, hi)).rowcount
            row = db.execute("SELECT live FROM claim_counts WHERE namespace = ?", (namespace,)).fetchone()
            live = max(0, (row[0] if row else 0) - expired)
            if db.execute("SELECT 1 FROM claims WHERE key = ?", (full_key,)).fetchone():
                db.execute("INSERT OR REPLACE INTO claim_counts VALUES (?, ?)", (namespace, live))
                raise Replayed(key)
            if live >= capacity:
                db.execute("INSERT OR REPLACE INTO claim_counts VALUES (?, ?)", (namespace, live))
                raise ClaimsFull(namespace)
            db.execute("INSERT INTO claims VALUES (?, ?)", (full_key, until))
            db.execute("INSERT OR REPLACE INTO claim_counts VALUES (?, ?)", (namespace, live + 1))

    def live_claims(self, namespace: str, now: float | None = None) -> int:
        """Claims in `namespace` not yet dropped (with `now`: not yet expired)."""
        lo, hi = f"{namespace}\x1f", f"{namespace}\x1f\U0010ffff"
        sql = "SELECT count(*) FROM claims WHERE key >= ? AND key < ?"
        args: tuple[object, ...] = (lo, hi)
        if now is not None:
            sql, args = sql + " AND until >= ?", (*args, now)
        return int(self._connection().execute(sql, args).fetchone()[0])

    # -- token buckets ---------------------------------------------------------------------------------
    def take_tokens(self, key: str, cost: float, burst: float, refill_per_s: float, now: float) -> TakeResult:
        """Take `cost` from the bucket `key` (full at `burst`, refilled at `refill_per_s` since its
        last change), or take nothing and report the level it has."""
        with self._transaction() as db:
            row = db.execute("SELECT tokens, stamp FROM buckets WHERE key = ?", (key,)).fetchone()
            level = float(burst) if row is None else min(float(burst), row[0] + max(0.0, now - row[1]) * refill_per_s)
            if level < cost:
                return TakeResult(False, level, False)
            db.execute("INSERT OR REPLACE INTO buckets VALUES (?, ?, ?)", (key, level - cost, now))
            return TakeResult(True, level - cost, row is None)

    def forget_full_buckets(self, prefix: str, burst: float, refill_per_s: float, now: float) -> int:
        """Drop buckets under `prefix` that have refilled: a full bucket holds no information."""
        seconds_to_full = burst / refill_per_s if refill_per_s > 0 else math.inf
        with self._transaction() as db:
            return db.execute(
                "DELETE FROM buckets WHERE key >= ? AND key < ? AND (tokens >= ? OR stamp <= ?)",
                (prefix, prefix + "\U0010ffff", burst, now - seconds_to_full),
            ).rowcount

    def bucket_count(self, prefix: str) -> int:
        row = self._connection().execute(
            "SELECT count(*) FROM buckets WHERE key >= ? AND key < ?", (prefix, prefix + "\U0010ffff")).fetchone()
        return int(row[0])

    # -- versioned key/value ---------------------------------------------------------------------------
    def bump(self, key: str) -> int:
        """Say that what `key` names changed (a publication applied, a site revoked); the new version."""
        with self._transaction() as db:
            db.execute("INSERT INTO kv VALUES (?, NULL, 1) ON CONFLICT(key) DO UPDATE SET version = version + 1", (key,))
            return int(db.execute("SELECT version FROM kv WHERE key = ?", (key,)).fetchone()[0])

    def put(self, key: str, value: bytes) -> int:
        """Store `value` under `key` and bump its version; the new version."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO kv VALUES (?, ?, 1) ON CONFLICT(key) DO UPDATE SET value = excluded.value, version = version + 1",
                (key, value),
            )
            return int(db.execute("SELECT version FROM kv WHERE key = ?", (key,)).fetchone()[0])

    def get(self, key: str) -> tuple[bytes | None, int]:
        """(value, version); (None, 0) for a key never written."""
        row = self._connection().execute("SELECT value, version FROM kv WHERE key = ?", (key,)).fetchone()
        return (None, 0) if row is None else (row[0], int(row[1]))

    def version(self, key: str) -> int:
        """One primary-key read: cheap enough to ask at every request."""
        row = self._connection().execute("SELECT version FROM kv WHERE key = ?", (key,)).fetchone()
        return 0 if row is None else int(row[0])


    # -- rings: the newest records of a kind ------------------------------------------------------------
    def append(self, name: str, value: bytes, keep: int) -> None:
        """Add `value` to the ring `name` and drop all but its `keep` newest records, atomically."""
        if keep < 1:
            raise ValueError("a ring keeps at least one record")
        with self._transaction() as db:
            row = db.execute("SELECT max(seq) FROM rings WHERE name = ?", (name,)).fetchone()
            seq = (row[0] or 0) + 1
            db.execute("INSERT INTO rings VALUES (?, ?, ?)", (name, seq, value))
            db.execute("DELETE FROM rings WHERE name = ? AND seq <= ?", (name, seq - keep))

    def newest(self, name: str, limit: int) -> list[bytes]:
        """Up to `limit` records of the ring `name`, newest first."""
        rows = self._connection().execute(
            "SELECT value FROM rings WHERE name = ? ORDER BY seq DESC LIMIT ?", (name, limit)).fetchall()
        return [bytes(r[0]) for r in rows]


class ChangeWatcher:
    """One process's view of a key's version: `changed()` is true once per change made anywhere.

    The gateway asks it at the start of each request and reloads what the key names when it is
    true, so a change accepted by one worker is visible in every worker at its next request."""

    def __init__(self, state: SharedState, key: str) -> None:
        self.state = state
        self.key = key
        self._seen = state.version(key)

    def changed(self) -> bool:
        current = self.state.version(self.key)
        if current == self._seen:
            return False
        self._seen = current
        return True
