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
  excess over that median, once it has MIN_CALLS calls, is subtracted from each of its summaries'
  similarities before any router ranks them (gateway.query.route.discounted). A
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
- **Dispute breadth** (`record_disputes`, `broadly_disputed`): the distinct peer sites each site
  has stood on the other side of a contradiction with (gateway.query.conflicts), whoever won. One
  dispute says nothing of who is wrong (a stale copy and a liar look alike, one against one), but
  the pattern across sites does: an honest site disputes with the few liars that copied its text,
  while a member that alters copies of many sites' text disputes with many distinct sites. The
  sites treated as broadly disputed are the fewest that explain the disputes seen, found greedily
  (each time the site with the most distinct opponents still unexplained, while that count is at
  least `breadth` and at least `breadth_ratio` times the median of the other sites' counts without
  its own disputes; its disputes are then explained and no longer count for its opponents): a
  federation whose honest sites often disagree (claims misread as one, stale copies) raises the
  median, and a liar does not raise its own bar. Liars are the cover of the dispute graph when
  honest sites do not dispute each other, and two colluders disputing the same honest site do not
  make it broad, since once one colluder is taken its disputes no longer count. No threshold was
  fitted: 3 distinct opponents and 3x the median mean that a site disputed by one liar, or by two
  colluders, is never broad. What it cannot tell: liars that outnumber the honest sites they
  contradict (three colluders each disputing two of the same honest sites make those sites the
  broader), and an honest site whose data is stale against many others is broad, as it should be
  for those claims. Disputes older than `dispute_memory_s` are forgotten: a site that reforms
  (or a stale one brought up to date) leaves the set.

Why SQLite, like gateway.query.reliability (`<home>/gateway/conduct.sqlite`, core.statedb): the claim
gaps and the quarantine must survive a restart (a member whose discount vanished with every restart would only
have to wait for one), and `hansa gateway sites` and `quarantine` work on the file while a gateway
serves; the gateway reads the quarantine on every question, so an operator's decision acts on the
next one. The routing share is counted in the file too, so it covers every worker's questions and
`hansa gateway sites` sees it. Template fingerprints are kept in this process's memory: they
rebuild within tens of questions. Several workers each keep their own gaps and write them back
(the last write wins: each worker's estimate is of the same sites' conduct). Disputes are written
by every worker to one table, read at start and kept in memory as this worker records them: a
worker sees the others' disputes at its next start (`hansa gateway sites` reads the file).
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
from typing import TYPE_CHECKING, Callable, Collection, Iterable, Mapping

from hansa.core.statedb import open_state_db
from hansa.core.text import content_words, split_words

if TYPE_CHECKING:
    from hansa.core.config import GatewayConfig

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
# Dispute breadth ([gateway] dispute_breadth, dispute_breadth_ratio, dispute_memory_hours): argued, not
# fitted (the module docstring).
BREADTH = 3
BREADTH_RATIO = 3.0
DISPUTE_MEMORY_S = 30 * 24 * 3600.0

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS claim_gap (site_id TEXT PRIMARY KEY, gap REAL NOT NULL, calls INTEGER NOT NULL, "
    "updated REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS quarantine (site_id TEXT PRIMARY KEY, reason TEXT NOT NULL, since REAL NOT NULL)",
    # one row per routed question, the sites asked (JSON list); only the last WINDOW are kept
    "CREATE TABLE IF NOT EXISTS routed (n INTEGER PRIMARY KEY AUTOINCREMENT, sites TEXT NOT NULL)",
    # one row per pair of sites that stood on opposite sides of a contradiction (a < b)
    "CREATE TABLE IF NOT EXISTS dispute (a TEXT NOT NULL, b TEXT NOT NULL, count INTEGER NOT NULL, last REAL NOT NULL, "
    "PRIMARY KEY (a, b))",
)

def _digest(words: Iterable[str]) -> str:
    return hashlib.blake2b(" ".join(words).encode(), digest_size=8).hexdigest()


def broad_sites(pairs: Iterable[tuple[str, str]], sites: Iterable[str], breadth: int = BREADTH,
                ratio: float = BREADTH_RATIO) -> dict[str, int]:
    """The broadly disputed sites among `sites` (and every site in `pairs`) and, for each, the
    distinct opponents still unexplained when it was taken: a greedy cover of the dispute graph
    (the module docstring, "Dispute breadth"). `breadth` 0: none."""
    opponents: dict[str, set[str]] = {s: set() for s in sites}
    for a, b in pairs:
        if a != b:
            opponents.setdefault(a, set()).add(b)
            opponents.setdefault(b, set()).add(a)
    taken: dict[str, int] = {}
    while breadth > 0:
        degrees = {s: len(peers - taken.keys()) for s, peers in opponents.items() if s not in taken}
        found = next(((site, most) for site, most in sorted(degrees.items(), key=lambda kv: (-kv[1], kv[0]))
                      if most >= breadth and most >= ratio * _median_without(site, degrees, opponents)), None)
        if found is None:
            break
        taken[found[0]] = found[1]
    return taken


def _median_without(site: str, degrees: Mapping[str, int], opponents: Mapping[str, set[str]]) -> float:
    """The median of the other sites' breadth, `site`'s disputes left out: a site's own disputes
    must not raise the bar it is held to (every site a liar contradicts is one opponent broader)."""
    others = [d - (site in opponents[s]) for s, d in degrees.items() if s != site]
    return statistics.median(others) if others else 0.0


@dataclass(frozen=True)
class SiteConductView:
    site_id: str
    claim_gap: float | None  # EWMA of best summary similarity minus best measured sentence relevance
    calls: int  # calls whose gap was observed
    discount: float  # what routing subtracts from the site's summary similarities now
    routing_share: float  # share of the last WINDOW routed questions that asked it (every worker's)
    templated: int  # answer sentences screened as templates around the question (this process)
    quarantined: str | None = None  # the operator's reason, when quarantined
    disputed_with: tuple[str, ...] = ()  # the distinct sites it stood against in a contradiction (remembered)
    broadly_disputed: bool = False  # its side in a contradiction counts for nothing against a site that is not

    def to_json(self) -> dict[str, object]:
        return {"site_id": self.site_id, "claim_gap": None if self.claim_gap is None else round(self.claim_gap, 4),
                "calls": self.calls, "routing_discount": round(self.discount, 4),
                "routing_share": round(self.routing_share, 4), "templated_sentences": self.templated,
                "quarantined": self.quarantined, "disputed_with": list(self.disputed_with),
                "broadly_disputed": self.broadly_disputed}


class SiteConduct:
    """The sites' conduct. `path=None` keeps everything in memory (tests, benchmarks)."""

    def __init__(self, path: Path | None = None, *, decay: float = GAP_DECAY, min_calls: int = MIN_CALLS,
                 window: int = WINDOW, breadth: int = BREADTH, breadth_ratio: float = BREADTH_RATIO,
                 dispute_memory_s: float = DISPUTE_MEMORY_S, last_resort: bool = True,
                 clock: Callable[[], float] = time.time) -> None:
        if not 0 < decay <= 1 or min_calls < 1 or window < 1:
            raise ValueError("decay must lie in (0, 1], min_calls and window must be positive")
        if breadth < 0 or breadth_ratio < 0 or dispute_memory_s <= 0:
            raise ValueError("breadth and breadth_ratio cannot be negative, dispute_memory_s must be positive")
        self.decay, self.min_calls, self.path, self.window = decay, min_calls, path, window
        self.breadth, self.breadth_ratio, self.dispute_memory_s, self.clock = breadth, breadth_ratio, dispute_memory_s, clock
        # fusion uses a broadly disputed site's sentences only where no other site's answer
        # (gateway.query.fusion, "Last resort"); False: they rank with everyone else's
        self.last_resort = last_resort
        self._db = open_state_db(path, _SCHEMA)
        rows = self._db.execute("SELECT site_id, gap, calls FROM claim_gap").fetchall()
        self._gap: dict[str, float] = {s: float(g) for s, g, _ in rows}
        self._calls: dict[str, int] = {s: int(n) for s, _, n in rows}
        self._disputes: dict[tuple[str, str], float] = {
            (a, b): float(last) for a, b, last in self._db.execute("SELECT a, b, last FROM dispute")}
        self._templates: dict[str, OrderedDict[str, str]] = {}
        self._templated: dict[str, int] = {}
        self._lock = threading.Lock()

    @classmethod
    def open(cls, gateway_dir: Path, **kwargs) -> "SiteConduct":
        """The gateway's file, beside its registry (`gateway_dir` is `<home>/gateway`)."""
        return cls(Path(gateway_dir) / FILE_NAME, **kwargs)

    @classmethod
    def for_gateway(cls, g: "GatewayConfig", gateway_dir: Path) -> "SiteConduct":
        """As configured: `[gateway] dispute_breadth`, `dispute_breadth_ratio`, `dispute_memory_hours`,
        `disputed_last_resort`."""
        return cls.open(gateway_dir, breadth=g.dispute_breadth, breadth_ratio=g.dispute_breadth_ratio,
                        dispute_memory_s=g.dispute_memory_hours * 3600.0, last_resort=g.disputed_last_resort)

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
        """Per site, what routing subtracts from each of its summaries' similarities: its claim
        gap's excess over the federation's median (sites without one are absent)."""
        with self._lock:
            return self._discounts()

    # -- dispute breadth -------------------------------------------------------------------------
    def record_disputes(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Pairs of sites that stood on opposite sides of a contradiction in one answer (the one
        the gateway returns), written in one transaction."""
        now = self.clock()
        keys = sorted({(min(a, b), max(a, b)) for a, b in pairs if a != b})
        if not keys:
            return
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT INTO dispute (a, b, count, last) VALUES (?, ?, 1, ?) ON CONFLICT(a, b) "
                    "DO UPDATE SET count = count + 1, last = excluded.last", [(a, b, now) for a, b in keys])
                self._db.execute("DELETE FROM dispute WHERE last < ?", (now - self.dispute_memory_s,))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            for key in keys:
                self._disputes[key] = now

    def _remembered(self) -> list[tuple[str, str]]:
        horizon = self.clock() - self.dispute_memory_s
        return [pair for pair, last in self._disputes.items() if last >= horizon]

    def broadly_disputed(self, pending: Iterable[tuple[str, str]] = ()) -> dict[str, int]:
        """The sites whose side in a contradiction counts for nothing against a site that is not
        (`broad_sites` over the remembered disputes, and `pending` ones of the answer being
        fused), with their breadth; every site this record knows counts toward the median."""
        if self.breadth == 0:
            return {}
        with self._lock:
            pairs = self._remembered() + list(pending)
            known = set(self._gap)
        return broad_sites(pairs, known, self.breadth, self.breadth_ratio)

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
        broad = self.broadly_disputed()
        with self._lock:
            discounts = self._discounts()
            opponents: dict[str, set[str]] = {}
            for a, b in self._remembered():
                opponents.setdefault(a, set()).add(b)
                opponents.setdefault(b, set()).add(a)
            sites = set(self._gap) | set(shares) | set(self._templated) | set(held) | set(opponents)
            return {s: SiteConductView(s, self._gap.get(s), self._calls.get(s, 0), discounts.get(s, 0.0),
                                       shares.get(s, 0.0), self._templated.get(s, 0), held.get(s),
                                       tuple(sorted(opponents.get(s, ()))), s in broad)
                    for s in sorted(sites)}
