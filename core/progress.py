"""Progress of a long job, for the person or the log shipper watching it.

Why not tqdm alone: with `hansa --log-json` every stderr line must be JSON, which a bar is not; and
an admin watching an eleven-minute ingest needs each document to show, with a rate, not one tick
per batch of 64 (issue 34). A terminal gets a tqdm bar with the counts beside it; --log-json gets
`<name>.progress` events, at most one per `every_s` seconds and always the last.
"""
from __future__ import annotations

import time
from types import TracebackType
from typing import Any

from tqdm import tqdm

from hansa.core import logs

EVERY_S = 5.0


class Progress:
    """`with Progress("ingest", total, "doc", enabled) as p: p.advance(1, chunks=12)`.

    `counts` are added up across calls; the rate of the first one (per second since the start) is
    shown beside it, e.g. `chunks=480, chunks/s=3.1`."""

    def __init__(self, name: str, total: int, unit: str, enabled: bool, every_s: float | None = None) -> None:
        self.name = name
        self.total = total
        self.done = 0
        self.counts: dict[str, int] = {}
        self.every_s = EVERY_S if every_s is None else every_s
        self._started = time.perf_counter()
        self._logged_at = self._started
        self._log = logs.get_logger(f"hansa.progress.{name}") if enabled and logs.json_mode() else None
        self._bar = tqdm(total=total, unit=unit, desc=name, disable=not enabled or self._log is not None)

    def advance(self, items: int, **counts: int) -> None:
        self.done += items
        for key, value in counts.items():
            self.counts[key] = self.counts.get(key, 0) + value
        fields = self._fields()
        self._bar.set_postfix(fields, refresh=False)
        self._bar.update(items)
        now = time.perf_counter()
        if self._log is not None and (now - self._logged_at >= self.every_s or self.done >= self.total):
            self._logged_at = now
            self._log.info(f"{self.name}.progress", done=self.done, total=self.total, **fields)

    def _fields(self) -> dict[str, Any]:
        elapsed = time.perf_counter() - self._started
        fields: dict[str, Any] = dict(self.counts)
        if self.counts:
            first = next(iter(self.counts))
            fields[f"{first}_per_s"] = round(self.counts[first] / elapsed, 1) if elapsed > 0 else 0.0
        fields["elapsed_s"] = round(elapsed, 1)
        return fields

    def close(self) -> None:
        self._bar.close()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
