"""A small SQLite file for state a gateway updates inside every query (what it learned of each
site: gateway.query.reliability, gateway.query.conduct), opened one way.

Why these settings: WAL keeps readers (`hansa gateway sites` while a gateway serves) off the
writer's lock; without an fsync per commit (`synchronous=NORMAL`; WAL stays consistent, a power cut
may lose the newest observations, which a decayed estimate does not miss) the commit left the tail
of the load drill's fuse stage. Autocommit (`isolation_level=None`): callers open their own
transactions. `path=None` keeps the database in memory (tests, benchmarks).
"""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Iterable


def open_state_db(path: Path | None, schema: Iterable[str]) -> sqlite3.Connection:
    """The connection, with every statement of `schema` (CREATE ... IF NOT EXISTS) applied."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(":memory:" if path is None else str(path), check_same_thread=False,
                         isolation_level=None, timeout=5.0)
    if path is not None:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
    for statement in schema:
        db.execute(statement)
    return db
