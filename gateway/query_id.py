"""The id of the question being answered, for logs and for every site call it makes.

Why a context variable: the id is made where a question enters (Gateway.query) and read where a
site call is signed (gateway.client.signed_headers), several layers down the engine; passing it
through every stage would touch each stage's contract for a field only logs and signatures need.
Site calls run in a thread pool, so the caller copies its context into each call
(gateway.client.run_calls). Sites log it on every event of the request (X-Hansa-Query-Id, covered by
the request signature: hansa.sync.httpsig.RETRIEVE_TRACED_COMPONENTS).
"""
from __future__ import annotations

import uuid
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

from hansa.core.logs import bound

_CURRENT: ContextVar[str | None] = ContextVar("hansa_query_id", default=None)


def new_query_id() -> str:
    """32 hex digits: unguessable and within the site's accepted alphabet ([A-Za-z0-9._:-]{1,128})."""
    return uuid.uuid4().hex


def current() -> str | None:
    return _CURRENT.get()


@contextmanager
def query_scope(query_id: str) -> Iterator[str]:
    """Make `query_id` current and bind it to every log event inside the block."""
    token = _CURRENT.set(query_id)
    try:
        with bound(query_id=query_id):
            yield query_id
    finally:
        _CURRENT.reset(token)
