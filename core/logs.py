"""Structured logs: one event name plus key=value fields, as text for people or JSON for machines.

Why not print: sites and gateways run unattended; operators grep and ship logs, so every line says
what happened (`event`) and carries its facts as fields, never interpolated into prose.
"""
from __future__ import annotations

import contextvars
import json
import logging
import sys
import time
from contextlib import contextmanager
from typing import Any, Iterator

_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class _Formatter(logging.Formatter):
    def __init__(self, as_json: bool) -> None:
        super().__init__()
        self.as_json = as_json

    def format(self, record: logging.LogRecord) -> str:
        fields = {k: v for k, v in vars(record).items() if k not in _RESERVED}
        if self.as_json:
            out: dict[str, Any] = {
                "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
                "level": record.levelname.lower(),
                "logger": record.name,
                "event": record.getMessage(),
                **fields,
            }
            if record.exc_info:
                out["exc"] = self.formatException(record.exc_info)
            return json.dumps(out, default=str, ensure_ascii=False)
        kv = " ".join(f"{k}={v!r}" if isinstance(v, str) and " " in v else f"{k}={v}" for k, v in fields.items())
        line = f"{record.levelname.lower():<7} {record.name}: {record.getMessage()}" + (f" {kv}" if kv else "")
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


_FORMAT = {"as_json": False}  # what `configure` chose, for handlers made later (gunicorn's)


def formatter() -> logging.Formatter:
    """A formatter in the process's chosen format: for log lines hansa does not emit itself
    (core.wsgi_server hands it to gunicorn, so one process writes one format)."""
    return _Formatter(_FORMAT["as_json"])


def json_mode() -> bool:
    """Whether `configure` chose JSON: then nothing but JSON lines may reach stderr (no progress bars)."""
    return _FORMAT["as_json"]


class _ThirdParty(logging.StreamHandler):
    """The handler `configure` puts on the root logger (recognised so a second call replaces it)."""


def configure(level: str = "info", as_json: bool = False) -> None:
    """Called once by the CLI; libraries only ever call `get_logger`.

    Other libraries' warnings (the Neo4j driver retrying, pymilvus, Python `warnings`) go through
    the same format at WARNING and above: with --log-json a raw line between JSON ones is what a
    log shipper drops or mangles (issue 34)."""
    _FORMAT["as_json"] = as_json
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(as_json))
    root = logging.getLogger("hansa")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
    others = _ThirdParty(sys.stderr)
    others.setFormatter(_Formatter(as_json))
    others.setLevel(max(logging.WARNING, root.level))
    everything = logging.getLogger()
    everything.handlers[:] = [h for h in everything.handlers if not isinstance(h, _ThirdParty)] + [others]
    logging.captureWarnings(True)


def notice(text: str, event: str = "notice", level: str = "info", **fields: Any) -> None:
    """A line for the person at the terminal (a skipped file, what to run next): the text on stderr,
    or with --log-json the same as a JSON event (`text` holds it)."""
    if json_mode():
        get_logger("hansa.cli").log(logging.getLevelName(level.upper()), event, text=text, **fields)
    else:
        print(text, file=sys.stderr, flush=True)


# Fields every event carries while a unit of work runs (a request's query id), whichever module logs.
_BOUND: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("hansa_log_fields", default={})


@contextmanager
def bound(**fields: Any) -> Iterator[None]:
    """Add `fields` to every event logged inside the block (this thread / task only).

    Why: a site answers one gateway query across several modules (API, retrieval, stores); the
    gateway's query id must be on every one of those lines without passing it down each call."""
    token = _BOUND.set({**_BOUND.get(), **fields})
    try:
        yield
    finally:
        _BOUND.reset(token)


class _Logger(logging.LoggerAdapter):
    """`log.info("ingest.done", chunks=12, seconds=0.4)`: fields become record attributes."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        extra = {k: kwargs.pop(k) for k in list(kwargs) if k not in ("exc_info", "stack_info", "stacklevel", "extra")}
        kwargs["extra"] = {**_BOUND.get(), **(kwargs.get("extra") or {}), **extra}
        return msg, kwargs


def get_logger(name: str) -> _Logger:
    return _Logger(logging.getLogger(name if name.startswith("hansa") else f"hansa.{name}"), {})
