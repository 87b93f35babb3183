"""The gateway's recent queries: a bounded ring of answered questions with their traces.

Why: an operator looking at the admin page (gateway/http/admin_page.py) asks "what did the gateway just
do, and why?" — which sites a question went to, what each call returned, how long every stage took.
The engine's trace already says all of that; this ring only keeps the newest `keep` of them.

Where it lives: with the service's shared state (`hansa gateway serve`, core/shared_state.py) the
ring is in that SQLite file, so every gunicorn worker's admin page shows the queries every worker
answered. Without it (one process: tests, federation/local.py) it is in memory. Each record is bounded
(`MAX_RECORD_BYTES`): a trace too large to keep is replaced by a note saying so.

What a record holds is what the admin needs and nothing the query body did not already carry:
the question, the API key's name (not the key), the extractive answer cut to `MAX_ANSWER_CHARS`,
and the trace. Questions may be personal: the ring is small, on the gateway's host, and shown only
behind the admin key.
"""
from __future__ import annotations

import threading
from collections import deque
from typing import Any

from hansa.core.jsonsafe import dumps, loads_strict
from hansa.core.logs import get_logger
from hansa.core.shared_state import SharedState
from hansa.gateway.trust.registry import utc_now
from hansa.sync.wire import format_utc

log = get_logger(__name__)
RING = "gateway.recent_queries"
MAX_RECORD_BYTES = 256 * 1024
MAX_ANSWER_CHARS = 600
MAX_QUESTION_CHARS = 2000


def query_record(result: Any, question: str, client: str, origin: str | None) -> dict[str, Any]:
    """What the ring keeps of one answered query (`result`: an engine QueryResult)."""
    answer = result.answer if len(result.answer) <= MAX_ANSWER_CHARS else result.answer[:MAX_ANSWER_CHARS] + "…"
    return {
        "at": format_utc(utc_now()),
        "query_id": result.trace.query_id or "",
        "client": client,
        "question": question[:MAX_QUESTION_CHARS],
        "origin": origin,
        "abstained": result.abstained,
        "answer": answer,
        "calls": [call.trace_json() for call in result.calls],
        "trace": result.trace.to_json(),
    }


class RecentQueries:
    """The newest `keep` query records, in `shared` (every worker's) or in this process's memory."""

    def __init__(self, keep: int, shared: SharedState | None = None) -> None:
        self.keep = keep
        self.shared = shared
        self._memory: deque[bytes] = deque(maxlen=max(keep, 1))
        self._lock = threading.Lock()

    def add(self, record: dict[str, Any]) -> None:
        """Keep `record`. Never fails the query it describes: a store error is logged and dropped."""
        if self.keep <= 0:
            return
        try:
            data = dumps(record)
            if len(data) > MAX_RECORD_BYTES:
                data = dumps({**record, "trace": {"omitted": f"the record took {len(data)} bytes; "
                                                             f"the ring keeps at most {MAX_RECORD_BYTES} per query"}})
            if self.shared is not None:
                self.shared.append(RING, data, self.keep)
            else:
                with self._lock:
                    self._memory.append(data)
        except Exception:  # the admin view is not worth a failed answer
            log.exception("recent_queries.not_kept", query_id=record.get("query_id"))

    def newest(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Up to `limit` (default all kept) records, newest first."""
        limit = self.keep if limit is None else min(limit, self.keep)
        if limit <= 0:
            return []
        if self.shared is not None:
            rows = self.shared.newest(RING, limit)
        else:
            with self._lock:
                rows = list(reversed(self._memory))[:limit]
        return [loads_strict(row) for row in rows]
