"""The router's training data: what the gateway itself saw, one JSON line per routed question.

Each record: a digest of the question, the model version that routed it, and for every site the
router considered its features (FEATURE_NAMES order), whether it was called and answered (a
failed call carries no label), whether it was called only to explore, and whether it contributed
(at least one of its sentences survived fusion into the final answer). Only answering sites carry
a label; exploration (see learned/router.py) makes sure some
sites the router would not have asked are called too.

Why a digest and not the question: questions are user data (a patient's symptom, an employee's
case) and this file outlives the query; the router learns from features, never from the words.
The digest is an HMAC-SHA256 keyed with a random secret kept beside the log (`outcomes.key`), so
records of the same question can be grouped (the threshold is calibrated per question) while a
guessed question cannot be confirmed by hashing it without that key.

Bounded: when the current file reaches `max_records` lines it becomes `outcomes.1.jsonl`
(replacing the previous one), so at most 2 x max_records records are kept, the newest. Appends
are serialized by a lock and each is one write of one line.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from hansa.core.logs import get_logger
from hansa.gateway.query.learned.features import FEATURE_NAMES

log = get_logger(__name__)

LOG_FILE = "outcomes.jsonl"
OLD_LOG_FILE = "outcomes.1.jsonl"
KEY_FILE = "outcomes.key"


class OutcomeLog:
    def __init__(self, directory: Path, max_records: int = 50_000) -> None:
        if max_records < 1:
            raise ValueError("max_records must be positive")
        self.dir = directory
        self.path = directory / LOG_FILE
        self.max_records = max_records
        self._lock = threading.Lock()
        self._count: int | None = None  # lines in the current file, counted on first append
        self._key: bytes | None = None

    def digest(self, question: str) -> str:
        if self._key is None:
            self._key = self._load_key()
        return hmac.new(self._key, question.encode("utf-8"), hashlib.sha256).hexdigest()

    def _load_key(self) -> bytes:
        path = self.dir / KEY_FILE
        try:
            return bytes.fromhex(path.read_text().strip())
        except FileNotFoundError:
            self.dir.mkdir(parents=True, exist_ok=True)
            key = secrets.token_bytes(32)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(key.hex())
            return key

    def append(self, question: str, model_version: str | None, sites: Sequence[dict[str, Any]]) -> None:
        """One record; `sites` items: {features (list), called (answered: labelled), failed (called,
        no answer: unlabelled), explored, contributed}."""
        record = {"q": self.digest(question), "model": model_version, "features": list(FEATURE_NAMES),
                  "sites": [{"x": [round(float(v), 6) for v in s["features"]], "called": bool(s["called"]),
                             "failed": bool(s.get("failed", False)), "explored": bool(s["explored"]),
                             "contributed": bool(s["contributed"])} for s in sites]}
        line = json.dumps(record, separators=(",", ":")) + "\n"
        with self._lock:
            self.dir.mkdir(parents=True, exist_ok=True)
            if self._count is None:
                self._count = self._lines(self.path)
            if self._count >= self.max_records:
                os.replace(self.path, self.dir / OLD_LOG_FILE)
                self._count = 0
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line)
            self._count += 1

    @staticmethod
    def _lines(path: Path) -> int:
        try:
            with open(path, "rb") as fh:
                return sum(1 for _ in fh)
        except FileNotFoundError:
            return 0

    def records(self) -> Iterator[dict[str, Any]]:
        """Every kept record, oldest first; lines that do not parse or were logged with other
        features are skipped (counted in the log line)."""
        skipped = 0
        for path in (self.dir / OLD_LOG_FILE, self.path):
            if not path.exists():
                continue
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    try:
                        rec = json.loads(line)
                        if rec["features"] != list(FEATURE_NAMES):
                            raise ValueError("other features")
                        yield rec
                    except (ValueError, KeyError, TypeError):
                        skipped += 1
        if skipped:
            log.warning("router.log_skipped", records=skipped, path=str(self.dir))

    def training_rows(self) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """(x, y, question digests) of every called site: the rows a label exists for."""
        xs, ys, groups = [], [], []
        for rec in self.records():
            for s in rec["sites"]:
                if s["called"] and len(s["x"]) == len(FEATURE_NAMES):
                    xs.append(s["x"])
                    ys.append(1 if s["contributed"] else 0)
                    groups.append(rec["q"])
        x = np.asarray(xs, dtype=np.float64).reshape(-1, len(FEATURE_NAMES))
        return x, np.asarray(ys, dtype=np.int8), groups
