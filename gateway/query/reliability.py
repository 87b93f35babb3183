"""How far the gateway has come to trust each site: a Beta posterior learned from fusion, decayed
over time, kept across restarts.

Why a Beta posterior: each fused answer is a handful of Bernoulli-like observations about a site —
something independent of it confirmed its sentences (another site in its own words, or the
gateway's reader: successes; being chosen alone earns nothing, issue 32), or it stood on the
losing side of a contradiction, claimed a relevance the gateway could not measure, echoed the
question, or answered far below what its summaries promised (failures, counted by kind). The
posterior mean (alpha / (alpha + beta)) is the site's reliability weight; the prior keeps a site
nobody has seen yet at PRIOR_MEAN, and a few observations cannot swing it to 0 or 1. Evidence is
exponentially decayed toward the prior with a half-life, so a site that reforms (or is
compromised) moves within days, not never.

Why SQLite: one small file beside the registry (`<home>/gateway/reliability.sqlite`, opened as
core.statedb opens it) updated on every fused answer; SQLite gives atomic, durable updates without
rewriting a JSON file per query, and lets `hansa gateway sites` read it while a gateway runs.

Site history (`SiteHistory`): a decayed record of how often each site contributed to final answers.

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
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Collection, Mapping

from hansa.core.files import write_json_atomic
from hansa.core.logs import get_logger
from hansa.core.statedb import open_state_db


log = get_logger(__name__)

# the citation history's (SiteHistory)
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


if TYPE_CHECKING:
    from hansa.core.config import Config

FILE_NAME = "reliability.sqlite"
PRIOR_ALPHA = 4.0  # a new site starts at 0.8: trusted, but below a site with a record
PRIOR_BETA = 1.0
HALF_LIFE_S = 7 * 24 * 3600.0  # [gateway] reliability_half_life_hours (168)
# [gateway] dispute_standing: confirmations (decayed) a site needs before its side of a contradiction
# counts against a site that has them (gateway.query.conflicts); decayed evidence, so in practice
# a site needs more than this many (three at 2.0). Argued, not fitted: one or two confirmations can
# be luck (a copy asked where its original was not), three are a record.
STANDING = 2.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS site_reliability (
    site_id TEXT PRIMARY KEY,
    alpha REAL NOT NULL,
    beta REAL NOT NULL,
    successes REAL NOT NULL,
    failures REAL NOT NULL,
    updated REAL NOT NULL
)
"""
_KINDS_SCHEMA = """
CREATE TABLE IF NOT EXISTS site_failure_kinds (
    site_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    count REAL NOT NULL,
    PRIMARY KEY (site_id, kind)
)
"""


@dataclass(frozen=True)
class Observation:
    """What one fused answer says about one site. `why`: each failure's kind (LOST, OVERCLAIMED,
    ECHOED, OVERROUTED) and count, kept undecayed for operators (`hansa gateway sites`)."""

    successes: float = 0.0
    failures: float = 0.0
    why: tuple[tuple[str, float], ...] = ()

    @classmethod
    def failed(cls, kind: str, n: float = 1.0) -> "Observation":
        return cls(failures=n, why=((kind, n),))

    def __add__(self, other: "Observation") -> "Observation":
        return Observation(self.successes + other.successes, self.failures + other.failures, self.why + other.why)


# the kinds of failure (Observation.why)
LOST = "lost a contradiction"  # stood against more independent sites (gateway.query.conflicts)
OVERCLAIMED = "overclaimed relevance"  # reported more than the gateway measured (gateway.query.fusion)
ECHOED = "echoed the question"  # offered the question back as an answer (gateway.query.fusion, gateway.query.conduct)
OVERROUTED = "answered far below its summaries"  # its routing claim not borne out (gateway.query.conduct)


@dataclass(frozen=True)
class SiteRecord:
    site_id: str
    alpha: float
    beta: float
    successes: float  # undecayed totals, for operators
    failures: float
    updated: float  # unix time of the last observation
    failure_kinds: Mapping[str, float] = field(default_factory=dict)  # undecayed, by kind (Observation.why)

    @property
    def reliability(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    def to_json(self) -> dict[str, object]:
        return {"site_id": self.site_id, "reliability": round(self.reliability, 4), "alpha": round(self.alpha, 3),
                "beta": round(self.beta, 3), "successes": self.successes, "failures": self.failures,
                "failures_by_kind": dict(sorted(self.failure_kinds.items())), "updated": self.updated}


class SiteReliability:
    """The per-site posteriors. `path=None` keeps them in memory (tests, benchmarks)."""

    def __init__(self, path: Path | None, *, half_life_s: float = HALF_LIFE_S, prior_alpha: float = PRIOR_ALPHA,
                 prior_beta: float = PRIOR_BETA, standing: float = 0.0, clock: Callable[[], float] = time.time) -> None:
        """`standing`: the confirmations `unproven` asks of a site (0: every site has standing)."""
        if half_life_s <= 0 or prior_alpha <= 0 or prior_beta <= 0 or standing < 0:
            raise ValueError("half_life_s and the prior's alpha and beta must be positive, standing cannot be negative")
        self.path, self.standing = path, standing
        self.half_life_s, self.prior_alpha, self.prior_beta, self.clock = half_life_s, prior_alpha, prior_beta, clock
        self._db = open_state_db(path, (_SCHEMA, _KINDS_SCHEMA))
        self._lock = threading.Lock()

    @classmethod
    def open(cls, gateway_dir: Path, **kwargs) -> "SiteReliability":
        """The gateway's file, beside its registry (`gateway_dir` is `<home>/gateway`)."""
        return cls(Path(gateway_dir) / FILE_NAME, **kwargs)

    @classmethod
    def for_gateway(cls, cfg: "Config", gateway_dir: Path) -> "SiteReliability":
        """As configured: `[gateway] reliability_half_life_hours`, `dispute_standing`."""
        return cls.open(gateway_dir, half_life_s=cfg.gateway.reliability_half_life_hours * 3600.0,
                        standing=cfg.gateway.dispute_standing)

    def close(self) -> None:
        self._db.close()

    # -- reading --------------------------------------------------------------------------------
    def _decayed(self, alpha: float, beta: float, updated: float, now: float) -> tuple[float, float]:
        keep = math.pow(0.5, max(0.0, now - updated) / self.half_life_s)
        return (self.prior_alpha + (alpha - self.prior_alpha) * keep,
                self.prior_beta + (beta - self.prior_beta) * keep)

    def record(self, site_id: str) -> SiteRecord:
        """The site's posterior as of now (decayed); the prior for a site never observed."""
        return self.records([site_id])[site_id]

    def records(self, site_ids: list[str] | None = None) -> dict[str, SiteRecord]:
        now = self.clock()
        with self._lock:
            rows = self._db.execute("SELECT site_id, alpha, beta, successes, failures, updated FROM site_reliability").fetchall()
            kinds: dict[str, dict[str, float]] = {}
            for site_id, kind, count in self._db.execute("SELECT site_id, kind, count FROM site_failure_kinds"):
                kinds.setdefault(site_id, {})[kind] = count
        # routing asks about every routable site on each question (gateway.query.engine `_unproven`): a set,
        # not a scan of the list per row
        wanted = None if site_ids is None else set(site_ids)
        out = {}
        for site_id, alpha, beta, s, f, updated in rows:
            if wanted is None or site_id in wanted:
                a, b = self._decayed(alpha, beta, updated, now)
                out[site_id] = SiteRecord(site_id, a, b, s, f, updated, kinds.get(site_id, {}))
        for site_id in site_ids or ():
            out.setdefault(site_id, SiteRecord(site_id, self.prior_alpha, self.prior_beta, 0.0, 0.0, 0.0))
        return out

    def weights(self, site_ids: list[str], pending: Mapping[str, Observation] | None = None) -> dict[str, float]:
        """Each site's posterior mean; with `pending`, as if those observations were recorded too:
        an answer's echoes weigh against their site in that answer, which is recorded only once
        the engine knows it is the one it returns (gateway.query.fusion)."""
        pending = pending or {}
        weights = {}
        for site_id, r in self.records(site_ids).items():
            obs = pending.get(site_id, Observation())
            alpha, beta = r.alpha + obs.successes, r.beta + obs.failures
            weights[site_id] = alpha / (alpha + beta)
        return weights

    def unproven(self, site_ids: list[str]) -> set[str]:
        """Those of `site_ids` without standing: fewer than `standing` confirmations held in their
        posterior (alpha above the prior, decayed as the rest of it from the moment each was
        earned, so a site that earned exactly `standing` holds a hair less: it needs one more). A member gains them only when
        something independent of it confirms it (gateway.query.fusion), so a member that only
        copies and alters others' text never has them, while an honest site earns them on every
        question its own text answers."""
        if self.standing <= 0:
            return set()
        return {s for s, r in self.records(site_ids).items() if r.alpha - self.prior_alpha < self.standing}

    def view(self) -> list[dict[str, object]]:
        """Every observed site's reliability, most trusted first: for `hansa gateway sites`."""
        return [r.to_json() for r in sorted(self.records().values(), key=lambda r: (-r.reliability, r.site_id))]

    # -- learning -------------------------------------------------------------------------------
    def observe(self, observations: Mapping[str, Observation]) -> None:
        """Fold one fused answer's observations into the posteriors, in one transaction."""
        now = self.clock()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for site_id, obs in observations.items():
                    if obs.successes < 0 or obs.failures < 0:
                        raise ValueError("observations count events: they cannot be negative")
                    if obs.successes == 0 and obs.failures == 0:
                        continue
                    row = self._db.execute("SELECT alpha, beta, successes, failures, updated FROM site_reliability "
                                           "WHERE site_id = ?", (site_id,)).fetchone()
                    alpha, beta, s, f, updated = row or (self.prior_alpha, self.prior_beta, 0.0, 0.0, now)
                    alpha, beta = self._decayed(alpha, beta, updated, now)
                    self._db.execute(
                        "INSERT INTO site_reliability (site_id, alpha, beta, successes, failures, updated) "
                        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(site_id) DO UPDATE SET alpha = excluded.alpha, "
                        "beta = excluded.beta, successes = excluded.successes, failures = excluded.failures, "
                        "updated = excluded.updated",
                        (site_id, alpha + obs.successes, beta + obs.failures, s + obs.successes, f + obs.failures, now))
                    self._db.executemany(
                        "INSERT INTO site_failure_kinds (site_id, kind, count) VALUES (?, ?, ?) "
                        "ON CONFLICT(site_id, kind) DO UPDATE SET count = count + excluded.count",
                        [(site_id, kind, n) for kind, n in obs.why if n])
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def forget(self, site_id: str) -> None:
        """Drop a site's record (a revoked site, or an operator's reset)."""
        with self._lock:
            self._db.execute("DELETE FROM site_reliability WHERE site_id = ?", (site_id,))
            self._db.execute("DELETE FROM site_failure_kinds WHERE site_id = ?", (site_id,))
