"""Site history: a decayed record of how often each site contributed to final answers.

SCOUT-RAG's third tier signal (s_hist): a site that keeps ending up in answers is a better bet
than its summaries alone say, and one that is asked but never cited is a worse one. Without an LLM
judging answer quality, "contributed" is observable: a final answer cites the site. Per site the
gateway keeps two exponentially decayed counts — times asked and times cited — so old behaviour
fades (a half-life in queries, not days: a quiet gateway does not forget) and the score is

    score = (cited + PRIOR * PRIOR_RATE) / (asked + PRIOR)        (in [0, 1])

a smoothed citation rate: a site never asked scores PRIOR_RATE, neither rewarded nor punished.

Why a JSON file beside the registry: it is small (two floats per site), an operator can read it,
and it must survive restarts; written atomically every SAVE_EVERY records and on `save()`.
Thread-safe: concurrent queries record into it.
"""
from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Collection, Mapping

from hansa.core.files import write_json_atomic
from hansa.core.logs import get_logger

log = get_logger(__name__)

HISTORY_FILE = "site-history.json"
HALF_LIFE = 500.0  # queries after which an old record weighs half
PRIOR = 2.0  # pseudo-asks of a new site ...
PRIOR_RATE = 0.5  # ... at this citation rate
SAVE_EVERY = 50


class SiteHistory:
    def __init__(self, path: Path | None, half_life: float = HALF_LIFE) -> None:
        self.path = path
        self.decay = 0.5 ** (1.0 / half_life)
        self._lock = threading.Lock()
        self._asked: dict[str, float] = {}
        self._cited: dict[str, float] = {}
        self._unsaved = 0
        if path is not None and path.exists():
            self._load(path)

    def _load(self, path: Path) -> None:
        """A corrupt file must not stop the gateway: history is advice, so it starts afresh."""
        try:
            data = json.loads(path.read_text("utf-8"))
            for site, (asked, cited) in data["sites"].items():
                a, c = float(asked), float(cited)
                if math.isfinite(a) and math.isfinite(c) and 0 <= c <= a:
                    self._asked[str(site)], self._cited[str(site)] = a, c
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("history.unreadable", path=str(path), error=str(exc))
            self._asked, self._cited = {}, {}

    def record(self, asked: Collection[str], cited: Collection[str]) -> None:
        """One query's outcome: the sites asked and those the final answer cites."""
        with self._lock:
            for site in self._asked:
                self._asked[site] *= self.decay
                self._cited[site] *= self.decay
            for site in set(asked):
                self._asked[site] = self._asked.get(site, 0.0) + 1.0
                self._cited[site] = self._cited.get(site, 0.0) + (1.0 if site in cited else 0.0)
            self._unsaved += 1
            due = self._unsaved >= SAVE_EVERY
        if due:
            self.save()

    def score(self, site_id: str) -> float:
        asked, cited = self._asked.get(site_id, 0.0), self._cited.get(site_id, 0.0)
        return (cited + PRIOR * PRIOR_RATE) / (asked + PRIOR)

    def scores(self) -> Mapping[str, float]:
        return {s: self.score(s) for s in list(self._asked)}

    def save(self) -> None:
        if self.path is None:
            return
        with self._lock:
            data = {"half_life": round(math.log(0.5) / math.log(self.decay), 3),
                    "sites": {s: [self._asked[s], self._cited[s]] for s in sorted(self._asked)}}
            self._unsaved = 0
        write_json_atomic(self.path, data)
