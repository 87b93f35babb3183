"""What each site has lately done when asked, as the gateway saw it: how far its routing claims
outrun its answers, how often it is routed, and whether its answers are a template around the
question; and which sites an operator quarantined.

Why the gateway keeps this at all: routing believes what a site publishes about itself (summary
vectors, term statistics), and a validly enrolled member can publish anything. What it cannot fake
is what it answers: the gateway measures every sentence it uses against the question itself
(gateway.query.fusion). So every call is a check of the site's claim: routing matched the question
to the site's best summary at similarity s, and the site's best answer sentence measured m. For an
honest site the two move together (its summaries describe its documents); a site that publishes
generic or stolen summaries to be asked everywhere answers far below what its summaries promised.

- **Claim gap** (`discounts`): per site, an exponentially weighted mean of s - m over its calls.
  The federation's median gap is what honest summaries promise beyond their sentences (summaries
  are longer texts, their cosines run lower or higher by a site-independent amount); a site's
  excess over that median, once it has MIN_CALLS calls, is subtracted from its routing score. A
  site that overclaims by 0.3 is routed as if its summaries were 0.3 less similar: its inflation
  undone by its own answers, while honest sites (excess ~0) are routed as before. Robust by
  construction: one site cannot move the median, and a site that is not routed keeps its gap.
- **Routing share** (`shares`): the share of the last WINDOW routed questions each site was asked,
  for operators (gateway sites, the admin page): a member routed for most questions is visible.
- **Templates** (`templated`): an answer sentence that changes with the question while its content
  words outside the question's stay the same ("<question>: the verified answer is 1066") differs
  only by the question's own words: it is not evidence, however it is phrased. The first time it is
  seen nothing tells it from an honest sentence; the second time its fixed part has repeated
  around a different question. Honest sentences repeat whole (the same sentence for two questions
  about one paragraph), which this does not flag.
- **Quarantine** (`quarantine`, `release`): an operator's decision that this gateway routes to
  and asks a site no more, without revoking its enrollment (`hansa gateway quarantine SITE`).

Why SQLite, like gateway.query.reliability (`<home>/gateway/conduct.sqlite`, core.statedb): the claim
gaps and the quarantine must survive a restart (a member whose discount vanished with every restart would only
have to wait for one), and `hansa gateway sites` and `quarantine` work on the file while a gateway
serves; the gateway reads the quarantine on every question, so an operator's decision acts on the
next one. The routing share is counted in the file too, so it covers every worker's questions and
`hansa gateway sites` sees it. Template fingerprints are kept in this process's memory: they
rebuild within tens of questions. Several workers each keep their own gaps and write them back
(the last write wins: each worker's estimate is of the same sites' conduct).
"""
from __future__ import annotations

import hashlib
import json
import statistics
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Collection, Iterable, Mapping

from hansa.core.statedb import open_state_db
from hansa.core.text import content_words, split_words

GAP_DECAY = 0.1  # EWMA weight of a new call's gap (~10 calls of memory)
MIN_CALLS = 3  # calls before a site's gap is trusted enough to discount it
# Excess gaps below this are noise, not a discount: honest sites' EWMA gaps reached 0.05 above the
# median on the adversarial bench's fit split; the routing hog's excess settled at 0.13.
EXCESS_FLOOR = 0.1
# One call whose gap exceeds the median by this much costs the site a reliability failure (its
# summaries promised what its answer did not hold); checked on the same fit split (one honest
# site charged once in 100 questions; benchmarks/README.md, "A lying enrolled member").
OVERROUTED_EXCESS = 0.25
WINDOW = 200  # routed questions the routing share looks back over
TEMPLATES_PER_SITE = 512  # remembered answer fingerprints per site (oldest forgotten first)
FILE_NAME = "conduct.sqlite"

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS claim_gap (site_id TEXT PRIMARY KEY, gap REAL NOT NULL, calls INTEGER NOT NULL, "
    "updated REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS quarantine (site_id TEXT PRIMARY KEY, reason TEXT NOT NULL, since REAL NOT NULL)",
    # one row per routed question, the sites asked (JSON list); only the last WINDOW are kept
    "CREATE TABLE IF NOT EXISTS routed (n INTEGER PRIMARY KEY AUTOINCREMENT, sites TEXT NOT NULL)",
)

def _digest(words: Iterable[str]) -> str:
    return hashlib.blake2b(" ".join(words).encode(), digest_size=8).hexdigest()


@dataclass(frozen=True)
class SiteConductView:
    site_id: str
    claim_gap: float | None  # EWMA of best summary similarity minus best measured sentence relevance
    calls: int  # calls whose gap was observed
    discount: float  # what routing subtracts from the site's score now
    routing_share: float  # share of the last WINDOW routed questions that asked it (every worker's)
    templated: int  # answer sentences screened as templates around the question (this process)
    quarantined: str | None = None  # the operator's reason, when quarantined

    def to_json(self) -> dict[str, object]:
        return {"site_id": self.site_id, "claim_gap": None if self.claim_gap is None else round(self.claim_gap, 4),
                "calls": self.calls, "routing_discount": round(self.discount, 4),
                "routing_share": round(self.routing_share, 4), "templated_sentences": self.templated,
                "quarantined": self.quarantined}


class SiteConduct:
    """The sites' conduct. `path=None` keeps everything in memory (tests, benchmarks)."""

    def __init__(self, path: Path | None = None, *, decay: float = GAP_DECAY, min_calls: int = MIN_CALLS,
                 window: int = WINDOW) -> None:
        if not 0 < decay <= 1 or min_calls < 1 or window < 1:
            raise ValueError("decay must lie in (0, 1], min_calls and window must be positive")
        self.decay, self.min_calls, self.path, self.window = decay, min_calls, path, window
        self._db = open_state_db(path, _SCHEMA)
        rows = self._db.execute("SELECT site_id, gap, calls FROM claim_gap").fetchall()
        self._gap: dict[str, float] = {s: float(g) for s, g, _ in rows}
        self._calls: dict[str, int] = {s: int(n) for s, _, n in rows}
        self._templates: dict[str, OrderedDict[str, str]] = {}
        self._templated: dict[str, int] = {}
        self._lock = threading.Lock()

    @classmethod
    def open(cls, gateway_dir: Path, **kwargs) -> "SiteConduct":
        """The gateway's file, beside its registry (`gateway_dir` is `<home>/gateway`)."""
        return cls(Path(gateway_dir) / FILE_NAME, **kwargs)

    def close(self) -> None:
        self._db.close()

    # -- what one question showed ----------------------------------------------------------------
    def observe(self, routed: Collection[str] | None, claimed: Mapping[str, float],
                answered: Mapping[str, float]) -> dict[str, float]:
        """One question's conduct, written in one transaction: `routed` the sites a routed question
        asked (None when the sites were not chosen by routing: they say nothing of routing share);
        `claimed` each asked site's best summary similarity at routing, `answered` the best
        relevance the gateway measured among its sentences (a site that answered nothing measured:
        0). Sites routing matched on no summary are not in `claimed`. Returns each claimed site's
        gap on this call beyond the federation's median gap (before this call; empty while fewer
        than two sites have settled gaps)."""
        with self._lock:
            excess = self._gaps(claimed, answered)
            if routed is None and not claimed:
                return excess
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if claimed:
                    now = time.time()
                    self._db.executemany(
                        "INSERT INTO claim_gap (site_id, gap, calls, updated) VALUES (?, ?, ?, ?) ON CONFLICT(site_id) "
                        "DO UPDATE SET gap = excluded.gap, calls = excluded.calls, updated = excluded.updated",
                        [(s, self._gap[s], self._calls[s], now) for s in claimed])
                if routed is not None:
                    cur = self._db.execute("INSERT INTO routed (sites) VALUES (?)", (json.dumps(sorted(set(routed))),))
                    self._db.execute("DELETE FROM routed WHERE n <= ?", (cur.lastrowid - self.window,))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            return excess

    def _gaps(self, claimed: Mapping[str, float], answered: Mapping[str, float]) -> dict[str, float]:
        """Fold one call's claim gaps into the running ones (in memory; `observe` writes them)."""
        settled = [g for s, g in self._gap.items() if self._calls.get(s, 0) >= self.min_calls]
        median = statistics.median(settled) if len(settled) >= 2 else None
        excess = {}
        for site, s in claimed.items():
            gap = float(s) - float(answered.get(site, 0.0))
            if median is not None:
                excess[site] = gap - median
            old = self._gap.get(site)
            self._gap[site] = gap if old is None else (1 - self.decay) * old + self.decay * gap
            self._calls[site] = self._calls.get(site, 0) + 1
        return excess

    def _discounts(self) -> dict[str, float]:
        settled = {s: g for s, g in self._gap.items() if self._calls.get(s, 0) >= self.min_calls}
        if len(settled) < 2:
            return {}
        median = statistics.median(settled.values())
        return {s: g - median for s, g in settled.items() if g - median >= EXCESS_FLOOR}

    def discounts(self) -> dict[str, float]:
        """Per site, what routing subtracts from its score: its claim gap's excess over the
        federation's median (sites without one are absent)."""
        with self._lock:
            return self._discounts()

    # -- quarantine --------------------------------------------------------------------------------
    def quarantine(self, site_id: str, reason: str) -> None:
        """Route to and ask `site_id` no more (an operator's decision; `release` lifts it)."""
        if not reason.strip():
            raise ValueError("a quarantine needs a reason: operators read it in `hansa gateway sites`")
        with self._lock:
            self._db.execute("INSERT INTO quarantine (site_id, reason, since) VALUES (?, ?, ?) ON CONFLICT(site_id) "
                             "DO UPDATE SET reason = excluded.reason", (site_id, reason.strip(), time.time()))

    def release(self, site_id: str) -> bool:
        """Lift a quarantine; False when the site was not quarantined."""
        with self._lock:
            return self._db.execute("DELETE FROM quarantine WHERE site_id = ?", (site_id,)).rowcount > 0

    def quarantined(self) -> dict[str, str]:
        """Quarantined sites and the operator's reason, read from the file now (another process,
        `hansa gateway quarantine`, may have changed it)."""
        with self._lock:
            return dict(self._db.execute("SELECT site_id, reason FROM quarantine").fetchall())

    # -- routing share ----------------------------------------------------------------------------
    def shares(self) -> dict[str, float]:
        """Per site, the share of the last WINDOW routed questions (every process's) that asked it."""
        with self._lock:
            rows = self._db.execute("SELECT sites FROM routed ORDER BY n DESC LIMIT ?", (self.window,)).fetchall()
        counts: dict[str, int] = {}
        for (sites,) in rows:
            for s in json.loads(sites):
                counts[s] = counts.get(s, 0) + 1
        return {s: c / len(rows) for s, c in counts.items()} if rows else {}

    # -- templates --------------------------------------------------------------------------------
    def templated(self, site_id: str, question: str, sentence: str) -> bool:
        """Whether `sentence` is this site's fixed text around a question: its words outside the
        question's were seen before from this site in a sentence that differed (remembered)."""
        q = content_words(question)
        words = content_words(sentence)
        rest = words - q
        if len(rest) < 3 or len(rest) == len(words):  # nothing of the question in it: not an echo
            return False
        fixed, whole = _digest(sorted(rest)), _digest(split_words(sentence))
        with self._lock:
            seen = self._templates.setdefault(site_id, OrderedDict())
            before = seen.get(fixed)
            seen[fixed] = whole
            seen.move_to_end(fixed)
            while len(seen) > TEMPLATES_PER_SITE:
                seen.popitem(last=False)
            hit = before is not None and before != whole
            if hit:
                self._templated[site_id] = self._templated.get(site_id, 0) + 1
        return hit

    # -- views ------------------------------------------------------------------------------------
    def view(self) -> dict[str, SiteConductView]:
        shares = self.shares()
        held = self.quarantined()
        with self._lock:
            discounts = self._discounts()
            sites = set(self._gap) | set(shares) | set(self._templated) | set(held)
            return {s: SiteConductView(s, self._gap.get(s), self._calls.get(s, 0), discounts.get(s, 0.0),
                                       shares.get(s, 0.0), self._templated.get(s, 0), held.get(s))
                    for s in sorted(sites)}
