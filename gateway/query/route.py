"""Stage 1, route: which sites may hold the answer.

Contract: `route(...)` embeds the question once, searches the summary index for the top-m
summaries, scores the routable sites that own them (a `Router`), and returns a `Routing`: every
scored site best first (`considered`), the ones to call (`selected`: the router's pick of at most
k, or exactly the sites the request named), and the sites whose summaries matched but may not be
routed to (`excluded`, with the reason). It calls no site.

The default `SummaryRouter` is DGRAG summary matching with the margin rule below, plus the
sites' published term statistics (CORI, gateway.query.route); a learned router replaces it by
implementing the same two methods.

DGRAG summary matching (`score_sites`, `select_sites`): the top-m summaries nearest a question vote
for the sites that own them.

Per-site score, from that site's hits among the top-m (similarities s1 >= s2 >= ...):

    score = s1 + SECOND_HIT_BONUS * max(s2, 0)        (s2 = 0 when the site has one hit)

Why: the best-matching community is the strongest evidence that a site can answer (DGRAG routes on
it alone). A second matching community means the site covers the topic from more than one angle,
so it earns a small bonus — at most SECOND_HIT_BONUS * s2, so it breaks near-ties but can never
outrank a site whose best summary is clearly closer. Further hits add nothing: a site with many
small communities must not win on volume. Ties break on total richness, then site id, so routing
is deterministic.

Term statistics (sync.terms, scored by gateway.query.route's CORI) add

    lexical_weight * lexical(s) / max over sites of lexical

to a site's score, and can bring in a site none of whose summaries made the top-m: at realistic
site sizes the rare words of a factoid question say more about where it lives than a community's
vector. Why relative to the best site: CORI scores shrink with question length and federation
size, while a share of the leader's stays in the units of the summary score and the margin, so one
weight and one margin serve MTRAG's small sites and SQuAD's large ones. Chosen on both fit splits
(16 sites, routing only; benchmarks/README.md, "Term statistics"): weight 0.3 with margin 0.4
(top 5) asked 3.8 sites on SQuAD at gold-site recall 0.858 (summaries alone, margin 0.24: 0.748
at 4.3) and 3.9 on MTRAG at 0.943 (alone: 0.941 at 3.8). A site that publishes no term statistics
is scored by its summaries alone.

What a site publishes about itself is checked against what it answers: the engine subtracts each
site's routing discount (gateway.query.conduct: how far its summaries' promise exceeds its measured
answers, beyond the federation's median) from its score before selection (`discounted`),
and CORI normalises sizes by the median site (gateway.query.route), so a member claiming every word
or publishing generic summaries cannot keep every question to itself (issue 32). A discount needs
the site asked beside others, so a site without standing (gateway.query.reliability) is never asked
alone (`accompanied`, `[gateway] unproven_never_alone`).

Sites not in `active_sites` (revoked, expired, unknown) are ignored, as are sites whose best
similarity is not above `min_score` (orthogonal or opposed to the question) and that no question
word points at.

Which sites are called: at most `top_k`, and only those scoring within `margin` of the leader
(score >= best - margin). Every call costs latency and bytes, and RAGRoute found most source
queries unnecessary; a site whose best summary is far less similar than the leader's rarely holds
the answer, while sites close to the leader are all kept, so a question that spans sites still
reaches each of them. The number of sites asked therefore adapts to how clear the routing is.
Scored by summaries alone (MTRAG, 16 random shards, 511 questions, routing only), margin 0.24
(MiniLM's summary_margin, adapters/embedder/scales.toml) with at most 5 sites reached gold-site
recall 0.947 at 3.98 sites, and the same rule on a router that sees every chunk 0.953 at 3.96
(benchmarks/README.md); with term statistics the margin is [gateway] site_margin (above). Both
margins and the term weight are in the embedder's cosine units: where the configuration leaves
site_margin and lexical_weight out, they are the embedder's (scales.toml; core.config.load_config),
so a federation on bge-small gets bge's values.

Term statistics: what the sites' published term statistics (sync.terms) tell the gateway: CORI
resource selection (`lexical_scores`: which sites to ask), `QuestionWords` (how rare each of the
question's words is) and `AnswerCoverage` (how much of the question a site's answer uses).

CORI: for each question word w and site s, with df the number of s's documents using w, cw the site's
summed document counts, sf the number of sites using w and N the sites compared (Callan, Lu & Croft,
"Searching distributed collections with inference networks", SIGIR 1995):

    T = df / (df + 50 + 150 * cw / median cw)      how much of s is about w
    I = log((N + 0.5) / sf) / log(N + 1)           how rare w is among sites
    lexical(s) = mean over the question's words that some site uses of T * I

CORI normalises a site's size by the mean; here by the median, so that no one site can move the
yardstick: a member claiming every word at a high document frequency (a "routing hog", issue 32)
inflated the mean by its own claims, and with it its share of every word. By the median its claimed
mass counts against it alone (with 16 honest SQuAD sites of similar size the two agree).

CORI's belief adds a constant 0.4 and scales T * I by 0.6; both change no ranking, so the score is
left in T * I units and the router weighs it (`score_sites`). Words no site uses say nothing about
where to go and are left out of the mean. Why CORI and not BM25 over sites: on SQuAD's fit split
(16 sites, its first 3,000 questions in file order, every word of every document, term statistics
alone; a scratch comparison) CORI ranked the gold site in the first 4 for 0.908 of questions, BM25
with each site as one document for 0.873, and CORI's constants (50, 150) beat smaller ones. The
shipped blend is measured in benchmarks/README.md.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Collection, Iterable, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from hansa.adapters.embedder.base import Embedder
from hansa.core.config import GatewayConfig
from hansa.core.errors import InputError
from hansa.gateway.client import SiteCall
from hansa.gateway.query.assess import Assessment, Passage, assess, passages
from hansa.gateway.index.summaries import SummaryHit, SummaryIndex
from hansa.gateway.trust.registry import REVOKED, SiteRecord
from hansa.gateway.query.fusion import measure
from hansa.gateway.query.fusion import Screen
from hansa.sync.terms import TermSketch, term_keys


DF_BASE = 50.0
DF_SCALE = 150.0


def lexical_scores(question_keys: np.ndarray, sketches: Mapping[str, TermSketch]) -> dict[str, float]:
    """CORI score per site in `sketches` (0.0 where it uses none of the question's words)."""
    names = [s for s, sketch in sketches.items() if len(sketch)]
    if not names or not len(question_keys):
        return {}
    df = np.vstack([sketches[s].lookup(question_keys) for s in names]).astype(np.float64)
    sf = (df > 0).sum(axis=0)
    known = sf > 0
    if not known.any():
        return {s: 0.0 for s in names}
    df, sf = df[:, known], sf[known]
    n = len(names)
    cw = np.array([max(sketches[s].total, 1) for s in names], dtype=np.float64)
    t = df / (df + DF_BASE + DF_SCALE * (cw / np.median(cw))[:, None])
    i = np.log((n + 0.5) / sf) / np.log(n + 1.0)
    scores = (t * i).mean(axis=1)
    return {s: float(v) for s, v in zip(names, scores)}


@dataclass(frozen=True)
class QuestionWords:
    """The question's words, each weighed by how rare it is in the federation: its inverse document
    frequency over every routable site's published term statistics (sync.terms),
    log(1 + D / (1 + df)) with D the documents counted; a word no site published (rare: used by one
    document) weighs most. Without term statistics every word weighs the same.

    Built once per question by routing (`route`) from the sketches it ranks with, and read
    twice: by the assessment's `weighted_coverage` (the gate's evidence) and by fusion's
    AnswerCoverage. Why rarity: a question's common words ("year", "first") are found in any
    site's answer; the rare ones ("Hastings") are what tells an answer about *this* question from
    one about its neighbour."""

    keys: np.ndarray  # the question's word keys (sync.terms), sorted
    idf: np.ndarray  # each key's weight

    @classmethod
    def of(cls, question: str, sketches: Mapping[str, TermSketch]) -> "QuestionWords | None":
        """None when the question has no word to look for."""
        keys = term_keys(question)
        if not len(keys):
            return None
        documents = sum(s.documents for s in sketches.values())
        if documents:
            df = np.sum([s.lookup(keys) for s in sketches.values()], axis=0, dtype=np.float64)
            idf = np.log1p(documents / (1.0 + df))
        else:
            idf = np.ones(len(keys))
        return cls(keys, idf)

    def share(self, texts: Iterable[str]) -> float:
        """The weighted share of the question's words found in `texts`. A set lookup per question
        word: fusion asks this once per answering site, and np.isin on a handful of keys costs
        ~2.5x more (~60 against ~25 us a site)."""
        found = set(term_keys(" ".join(texts)).tolist())
        hit = sum(w for k, w in zip(self.keys.tolist(), self.idf.tolist()) if k in found)
        return float(hit / self.idf.sum())


@dataclass(frozen=True)
class AnswerCoverage:
    """Fusion's word-level check of a site's answer: how much of the question (QuestionWords) the
    sentences a site offers actually use; a site's citations are weighed by
    1 - weight + weight x that share (gateway.query.fusion).

    Why: a site's scores are cosines against its own chunks, and a question that names nothing
    outside its paragraph ("Who destroyed the Jesuit college?") is about equally close to passages
    at several sites; the words it shares with each site's answer are the gateway's own,
    comparable evidence."""

    words: QuestionWords
    weight: float

    @classmethod
    def weighing(cls, words: QuestionWords | None, weight: float) -> "AnswerCoverage | None":
        """None when `weight` is 0 or there are no words (nothing to weigh by)."""
        return cls(words, float(weight)) if words is not None and weight > 0 else None

    def factor(self, texts: Iterable[str]) -> float:
        return 1.0 - self.weight + self.weight * self.words.share(texts)


SECOND_HIT_BONUS = 0.1
DEFAULT_MARGIN = GatewayConfig.site_margin  # [gateway] site_margin: summaries and term statistics
# The margin for scores from summaries alone (the learned router's cold start: its features are the
# summaries') is the embedder's `summary_margin` (adapters/embedder/scales.toml): 0.24 for MiniLM.
DEFAULT_LEXICAL_WEIGHT = GatewayConfig.lexical_weight  # [gateway] lexical_weight


@dataclass(frozen=True)
class SiteScore:
    site_id: str
    score: float
    summaries: tuple[str, ...]  # evidence: the site's matching summary ids, best first
    richness: int  # summed over the matching summaries
    lexical: float | None = None  # the site's CORI term score (None: no term statistics used)

    @property
    def mode(self) -> str | None:
        """The retrieval mode to ask the site in (a tiered router's, query.tiers); None: the query's."""
        return None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"site_id": self.site_id, "score": round(self.score, 6),
                                  "summaries": list(self.summaries)}
        if self.lexical is not None:
            out["lexical"] = round(self.lexical, 6)
        return out


def routable_terms(lexical: Mapping[str, float] | None, active_sites: Collection[str],
                   lexical_weight: float) -> tuple[dict[str, float], float]:
    """The routable sites' CORI term scores (gateway.query.route) and the best of them, what a router
    blends in as `lexical_weight x score / best`; empty when the blend is off."""
    terms = {s: v for s, v in (lexical or {}).items() if s in active_sites} if lexical_weight else {}
    return terms, max(terms.values(), default=0.0)


def score_sites(hits: Sequence[SummaryHit], active_sites: Collection[str], min_score: float = 0.0,
                lexical: Mapping[str, float] | None = None,
                lexical_weight: float = DEFAULT_LEXICAL_WEIGHT) -> list[SiteScore]:
    """Every routable site with hits (or, given `lexical`, a term score above 0), ranked best first
    (what a trace shows as considered)."""
    per_site: dict[str, list[SummaryHit]] = {}
    for hit in hits:
        if hit.site_id in active_sites:
            per_site.setdefault(hit.site_id, []).append(hit)
    terms, leader = routable_terms(lexical, active_sites, lexical_weight)
    ranked: list[SiteScore] = []
    for site_id in per_site.keys() | {s for s, v in terms.items() if v > 0}:
        site_hits = sorted(per_site.get(site_id, ()), key=lambda h: (-h.score, h.summary_id))
        best = site_hits[0].score if site_hits else 0.0
        word = terms.get(site_id)
        if best <= min_score and not word:
            continue
        second = site_hits[1].score if len(site_hits) > 1 else 0.0
        vector = best + SECOND_HIT_BONUS * max(second, 0.0) if best > min_score else 0.0
        ranked.append(
            SiteScore(
                site_id=site_id,
                score=vector + (lexical_weight * word / leader if word else 0.0),
                summaries=tuple(h.summary_id for h in site_hits),
                richness=sum(h.richness for h in site_hits),
                lexical=word,
            )
        )
    ranked.sort(key=lambda s: (-s.score, -s.richness, s.site_id))
    return ranked


def select_sites(ranked: Sequence[SiteScore], top_k: int, margin: float = DEFAULT_MARGIN) -> list[SiteScore]:
    """From ranked sites, the ones to call: the first `top_k` within `margin` of the leader."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise InputError(f"top_k sites must be a positive integer, got {top_k!r}")
    if not ranked:
        return []
    floor = ranked[0].score - margin
    return [s for s in ranked[:top_k] if s.score >= floor]

if TYPE_CHECKING:
    from hansa.gateway.query.fusion import FusedAnswer


class Router(Protocol):
    # whether it ranks with the sites' term scores: `route` computes them only for a router that does
    reads_lexical: bool

    def rank(self, question_vector: np.ndarray, hits: Sequence[SummaryHit], routable: Collection[str],
             lexical: Mapping[str, float] | None = None) -> list[SiteScore]:
        """Every routable site worth considering, best first; `lexical` is each site's CORI term
        score (gateway.query.route) for routers that use it."""
        ...

    def select(self, ranked: Sequence[SiteScore], k: int) -> list[SiteScore]:
        """Of `ranked`, the sites to call (at most k)."""
        ...

    def describe(self) -> dict[str, Any]:
        """What the trace records as `router`: its name and, for a learned router, its model version."""
        ...


@runtime_checkable
class LearningRouter(Router, Protocol):
    """A router that learns from outcomes (gateway.query.learned): after fusion the engine tells it which
    sites were considered, selected and called, and the answer they made."""

    def observe(self, question: str, considered: Sequence[SiteScore], selected: Sequence[str],
                calls: Sequence[SiteCall], fused: "FusedAnswer") -> None: ...


@dataclass(frozen=True)
class SummaryRouter:
    """DGRAG's summary matching (gateway.query.route): best summary plus a small second-hit bonus,
    called within `margin` of the leader."""

    margin: float = DEFAULT_MARGIN
    lexical_weight: float = DEFAULT_LEXICAL_WEIGHT  # 0: summaries alone

    @property
    def reads_lexical(self) -> bool:
        return self.lexical_weight != 0

    def rank(self, question_vector: np.ndarray, hits: Sequence[SummaryHit], routable: Collection[str],
             lexical: Mapping[str, float] | None = None) -> list[SiteScore]:
        return score_sites(hits, routable, lexical=lexical, lexical_weight=self.lexical_weight)

    def select(self, ranked: Sequence[SiteScore], k: int) -> list[SiteScore]:
        return select_sites(ranked, k, self.margin)

    def describe(self) -> dict[str, Any]:
        return {"name": type(self).__name__, "model_version": None}


@dataclass(frozen=True)
class Routing:
    question_vector: np.ndarray
    hits: list[SummaryHit]
    considered: list[SiteScore]
    selected: list[str]
    excluded: list[dict[str, str]]
    selection: str  # "routed" or "explicit"
    embed_ms: float
    search_ms: float  # summary search, term scoring and ranking
    # the question's words weighed by their rarity among the routable sites (None: no word to weigh)
    words: QuestionWords | None = None
    embedder: Embedder | None = None  # what the assessment measures passages with (None: sites' own figures)

    def best_summary(self, site_id: str) -> float | None:
        """The site's best summary similarity among the top-m hits (None: none of its summaries
        made the top-m, itself a sign it holds little on the question)."""
        return next((h.score for h in self.hits if h.site_id == site_id), None)

    def site_prior(self, called: Collection[str], weight: float) -> dict[str, float] | None:
        """Each called site's factor for fusion's citation ranking: 1 - weight + weight x its routing
        score as a share of the best called site's (a site routing did not score: the floor,
        1 - weight). Why: a site's retrieval scores rank its own documents well but compare poorly
        across sites (each scores against its own corpus); how well the site as a whole matched
        the question is the gateway's own, comparable measure (CORI's result merging). None when
        `weight` is 0 or nothing called was scored."""
        if weight <= 0 or not called:
            return None
        scores = {s.site_id: max(s.score, 0.0) for s in self.considered if s.site_id in called}
        best = max(scores.values(), default=0.0)
        if best <= 0:
            return None
        return {site: 1.0 - weight + weight * scores.get(site, 0.0) / best for site in called}

    def behind_leader(self, asked: Collection[str], *, among: bool) -> float:
        """How far the best-ranked site in `asked` (`among`; else outside it) trails the leader: 0
        when one ties it, the leader's whole score when routing ranked none such (0 when nothing
        was ranked). Outside `asked` it is the trailing gap: the leader's whole score when every
        ranked site was asked, nothing ranked is left to find. Among `asked` it is the routing
        deficit: an origin that is not the leader has a trailing gap of 0 whether it ranks a close
        second or last, a deficit that tells the two apart."""
        if not self.considered:
            return 0.0
        lead = self.considered[0].score
        found = next((s.score for s in self.considered if (s.site_id in asked) == among), None)
        return lead - found if found is not None else lead

    def evidence(self, question: str, calls: Sequence[SiteCall], screen: Screen | None = None) -> list[Passage]:
        """The passages of `calls` as the assessment weighs them (query.assess.passages)."""
        return passages(calls, question, self._measured if self.embedder is not None else None, screen)

    def assess(self, question: str, calls: Sequence[SiteCall], screen: Screen | None = None) -> Assessment:
        """The evidence of `calls` with what routing knew of their sites: the assessed sites' best
        summary similarity, the trailing gap of the sites left unasked, how far the asked trail the
        leader, the question's weighed words, and what the lowest-ranked site asked added
        (query.assess; `screen`: `question`'s, gateway.query.fusion.Screen)."""
        asked = {c.site_id for c in calls}
        best = max((self.best_summary(s) or 0.0 for s in asked), default=0.0)
        # in the order of the ranking (sites it does not rank, e.g. a named origin, first): the
        # last is the newest site escalation asked
        rank = {s.site_id: i for i, s in enumerate(self.considered)}
        ordered = sorted(calls, key=lambda c: rank.get(c.site_id, -1))
        return assess(question, ordered, best, self.behind_leader(asked, among=False), words=self.words,
                      routing_deficit=self.behind_leader(asked, among=True),
                      measured=self._measured if self.embedder is not None else None, screen=screen)

    def _measured(self, texts: Sequence[str]) -> Sequence[float]:
        """The gateway's cosine of `texts` with the question (gateway.query.fusion.measure)."""
        assert self.embedder is not None
        return measure(self.question_vector, texts, self.embedder).tolist()


def exclusion(rec: SiteRecord | None) -> str:
    if rec is None:
        return "not enrolled"
    if rec.status == REVOKED:
        return "revoked"
    if rec.is_withdrawn:
        return "withdrawn (its publication holds no summary)"
    return "publication expired"


def route(
    question: str,
    *,
    embedder: Embedder,
    index: SummaryIndex,
    records: Mapping[str, SiteRecord],
    routable: Collection[str],
    top_m: int,
    k: int,
    router: Router,
    explicit: Sequence[str] | None = None,
    discounts: Mapping[str, float] | None = None,
    held: Mapping[str, str] | None = None,
    levels: str = "all",
    unproven: Collection[str] | None = None,
) -> Routing:
    """`discounts`: what to subtract from a site's summary similarities, its routing claims' excess
    over what it answered (gateway.query.conduct); every router ranks the discounted hits (`discounted`).
    `unproven`: the routable sites without standing (gateway.query.reliability), none of whom is
    asked alone (`accompanied`; None: the rule is off).
    `held`: quarantined sites and the operator's reason (they are not in `routable`; the trace
    says why they were left out). `levels` ([gateway] route_levels): "all" lets the summaries of
    every community level vote (a site's best match over its levels, GraphRAG's coarse summaries
    included), "finest" only level 0's."""
    t0 = time.perf_counter()
    vector = embedder.embed_query(question)
    t1 = time.perf_counter()
    hits = index.search(vector, top_m)
    if levels == "finest":  # [gateway] route_levels: coarser levels' summaries do not vote
        hits = [h for h in hits if h.level == 0]
    # term scores cost ~0.3 ms at 16 sites and ~1 ms at 64: only for a router that reads them. Named
    # sites are ranked the same way as routed ones, so what is derived from the ranking (fusion's site
    # prior, an assessment's routing_gap) does not depend on how the sites were chosen: the gate's
    # calibration rows name the origin, the gate itself sees it routed (gateway.query.calibrate.gate_rows)
    sketches = index.term_sketches(routable)
    words = QuestionWords.of(question, sketches)  # the question's words, hashed once for both uses
    keys = words.keys if words is not None else np.zeros(0, dtype=np.uint32)
    lexical = lexical_scores(keys, sketches) if router.reads_lexical else None
    considered = router.rank(vector, discounted(hits, discounts), routable, lexical=lexical)
    if explicit is None:
        selected = accompanied([s.site_id for s in router.select(considered, k)], considered, k, unproven)
    else:
        selected = list(explicit)
    withdrawn = {sid for sid, rec in records.items() if rec.is_withdrawn}  # no hit says why they are missing
    held = held or {}
    excluded = [{"site_id": sid, "reason": f"quarantined by an operator: {held[sid]}" if sid in held
                 else exclusion(records.get(sid))}
                for sid in sorted(({h.site_id for h in hits} | withdrawn) - set(routable))]
    t2 = time.perf_counter()
    return Routing(vector, hits, considered, selected, excluded, "routed" if explicit is None else "explicit",
                   (t1 - t0) * 1000, (t2 - t1) * 1000, words, embedder)


def accompanied(selected: list[str], considered: Sequence[SiteScore], k: int,
                unproven: Collection[str] | None) -> list[str]:
    """`selected`, and beside it the best-ranked site with standing when none selected has any (the
    runner-up when a lone leader has no considered site with standing to stand beside), within `k`.

    Why: the claim-gap discount (gateway.query.conduct) compares a site's summaries with its answers
    against the federation's median, so it needs other sites asked beside it. A newcomer whose
    summary is the very question asked is the only site within the margin of itself: asked alone,
    nothing it answers is ever compared, and it keeps the question from the honest holder for good.
    Beside a site with standing, the honest answer is there from the first question, and the
    newcomer's gap settles within MIN_CALLS calls. Standing is earned only by sentences something
    independent confirmed, so a member that only echoes or copies never has it. The cost: one call
    more for a question led only by sites still without standing (every question's leader at a
    federation's start, until its sites have answered a few)."""
    if not unproven or not selected or len(selected) >= k or any(s not in unproven for s in selected):
        return selected
    rest = [s.site_id for s in considered if s.site_id not in selected]
    companion = next((s for s in rest if s not in unproven), rest[0] if len(selected) == 1 and rest else None)
    return selected if companion is None else [*selected, companion]


def discounted(hits: Sequence[SummaryHit], discounts: Mapping[str, float] | None) -> list[SummaryHit]:
    """`hits` with each discounted site's similarities lowered by its discount, best first again
    (ties keep the index's order): what every router ranks.

    Why the hits and not the router's ranking: a discount says that a site's summaries promise more
    than its answers hold (gateway.query.conduct), which is a statement about its summaries'
    similarities, and every router reads those. Subtracting it from the routers' scores afterwards
    served the summary router, whose score is a similarity, but not the learned one: its features
    (the gap to the leader, the leader's best, positions among the top-m and the 16 best hits) were
    read from the undiscounted hits, so a discounted newcomer whose summaries are the very questions
    still made every honest site look far behind; and re-sorting its ranking by the discounted
    similarity undid the order its model chose. The published hits stay as they are in `Routing`
    (conduct compares them with the answers: discounting them there would discount the discount)."""
    if not discounts or not any(h.site_id in discounts for h in hits):
        return list(hits)
    lowered = [h._replace(score=h.score - discounts[h.site_id]) if h.site_id in discounts else h for h in hits]
    return sorted(lowered, key=lambda h: -h.score)  # a stable sort: ties keep the index's order


def site_term_scores(question: str, index: SummaryIndex, routable: Collection[str]) -> dict[str, float]:
    """Each routable site's CORI score for the question's words (sites without term statistics
    are absent)."""
    return lexical_scores(term_keys(question), index.term_sketches(routable))
