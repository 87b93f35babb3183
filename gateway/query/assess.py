"""Stage: assess — how good is the evidence in hand? Cheap features, no LLM, embedding only what fusion would.

Contract: `assess(question, calls, best_summary=..., measured=...) -> Assessment`, computed from the
"ok" calls' partial answers (the passages sites stand behind: their answer sentences with their
relevance, i.e. cosine with the question in the federation's one embedding space). Given
`measured` (what routing hands in: the gateway's own cosine, memoized from the call stage's early
measuring), a passage's relevance is what the gateway measured, lowered (never raised) by what the
site reported: each site's likeliest-used sentences are measured (gateway.query.fusion.first_measured)
and its other sentences are capped at the best of those, so a site claiming 1.0 everywhere moves
no feature. Sentences that are not evidence (gateway.query.fusion: an echo of the question, an
instruction to the reader) are left out. Why: the gate and abstention must read what the gateway
measured, not what a site says of itself (issue 32: an origin answering alone at 1.0 blocked
escalation). Without `measured` (offline tools) the sites' reported relevance is used. Given
`screen` (the question's gateway.query.fusion.Screen, which fusion reads too), a sentence is screened
once for every round's assessment and for fusion.

  best_relevance  the best passage's relevance (0 with no passage)
  margin          best minus the next passage's relevance (0 if none; a clear winner is confidence)
  coverage        share of the question's content words found in the top passages
  agreement       mean pairwise word overlap (Jaccard of content words) among the top passages:
                  passages that say the same thing corroborate each other
  best_summary    the best summary similarity of the assessed sites (from routing; 0 if none of
                  their summaries reached the top-m)
  routing_gap     how far the best-ranked site *not* assessed trails the router's leader (from
                  routing; 0: an unasked site ties the leader, so the answer may well be there;
                  the leader's whole score when no ranked site is left unasked)
  sites_answered  calls that were ok and offered at least one passage
  passages        passages seen
  relevance_gain  what the newest site (the last of `calls`; routing orders them by rank) added to
                  the best relevance: best minus the best without it (the best itself for one site)
  coverage_gain   the same for coverage
  sites_since_best  sites asked after the one holding the best passage (0: the newest holds it)
  weighted_coverage  coverage with each question word weighed by its rarity in the federation
                  (gateway.query.route.QuestionWords, from the routable sites' term statistics; every
                  word the same without them; 0 when routing had no word to weigh): a question's
                  common words ("year", "first") turn up in any site's passages, its rare ones
                  only where it is answered
  routing_deficit how far the best-ranked site assessed trails the router's leader (from routing;
                  0 when an assessed site leads): an origin ranked a close second and one ranked
                  last both have a routing_gap of 0

relevance_gain, coverage_gain and sites_since_best are escalation's "is asking further still
paying?": on SQuAD's fit split a model with them stopped at the same gold-site recall with fewer
sites (held-out halves: 0.947 at 3.88 sites against 0.934 at 4.02 without them). The last two are
the gate's: with them its cross-validated AUROC on SQuAD's fit rows rose from 0.974 to 0.981.

These are the gate's and the refiner's inputs (DGRAG's gate, SCOUT-RAG's completeness); what they
weigh and where the thresholds lie is calibrated elsewhere, not here.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from itertools import combinations
from typing import TYPE_CHECKING, Any, Callable, Sequence

from hansa.gateway.client import OK, SiteCall
from hansa.gateway.query.fusion import first_measured, trusted
from hansa.gateway.query.fusion import Screen
from hansa.core.text import content_words, jaccard  # the sites' own notion of a content word

if TYPE_CHECKING:  # route imports this module
    from hansa.gateway.query.route import QuestionWords

TOP_PASSAGES = 5  # passages whose words count for coverage
AGREEMENT_PASSAGES = 3


@dataclass(frozen=True)
class Passage:
    site_id: str
    doc_id: str
    text: str
    relevance: float


@dataclass(frozen=True)
class Assessment:
    best_relevance: float = 0.0
    margin: float = 0.0
    coverage: float = 0.0
    agreement: float = 0.0
    best_summary: float = 0.0
    sites_answered: int = 0
    passages: int = 0
    routing_gap: float = 0.0
    relevance_gain: float = 0.0
    coverage_gain: float = 0.0
    sites_since_best: int = 0
    weighted_coverage: float = 0.0
    routing_deficit: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}


Measure = Callable[[Sequence[str]], Sequence[float]]  # texts -> the gateway's cosine with the question


def passages(calls: Sequence[SiteCall], question: str = "", measured: Measure | None = None,
             screen: Screen | None = None) -> list[Passage]:
    """Every passage the ok calls offer that is evidence for `question`, most relevant first. A
    sentence without a reported relevance takes its document's citation score (0 if uncited);
    with `measured`, the gateway's measurement bounds it (the module's contract). `screen`:
    `question`'s, shared with the other assessments and fusion (None: one for this call)."""
    screen = Screen(question) if screen is None else screen
    out: list[Passage] = []
    for call in calls:
        if call.status != OK or call.answer is None:
            continue
        offered = _offered(call, screen)
        if measured is not None and offered:
            offered = _bounded(offered, call, screen, measured)
        out.extend(offered)
    out.sort(key=lambda p: (-p.relevance, p.site_id, p.doc_id))
    return out


def _offered(call: SiteCall, screen: Screen) -> list[Passage]:
    """A call's sentences that are evidence, at the relevance the site reports (a sentence without
    one takes its document's citation score, 0 if uncited)."""
    assert call.answer is not None
    scores = {c.doc_id: c.score for c in call.answer.citations}
    out = []
    for s in call.answer.sentences:
        text, doc_id = s[0], s[1]
        rel = float(s[2]) if len(s) > 2 else float(scores.get(doc_id, 0.0))  # type: ignore[misc]
        if text.strip() and screen.why(text) is None:
            out.append(Passage(call.site_id, doc_id, text, rel))
    return out


def _bounded(offered: Sequence[Passage], call: SiteCall, screen: Screen, measured: Measure) -> list[Passage]:
    """The gateway's measurement of the site's likeliest-used sentences bounds what it reports."""
    assert call.answer is not None
    first = [t for t in first_measured(call.answer) if screen.why(t) is None]
    value = dict(zip(first, (float(v) for v in measured(first)))) if first else {}
    cap = max(value.values(), default=0.0)
    return [Passage(p.site_id, p.doc_id, p.text, trusted(value.get(p.text, cap), p.relevance)) for p in offered]


def _coverage(q_words: frozenset[str], found: Sequence[Passage]) -> float:
    covered = frozenset().union(*(content_words(p.text) for p in found[:TOP_PASSAGES]))
    return len(q_words & covered) / len(q_words) if q_words else 0.0


def assess(question: str, calls: Sequence[SiteCall], best_summary: float | None = None,
           routing_gap: float = 0.0, words: QuestionWords | None = None,
           routing_deficit: float = 0.0, measured: Measure | None = None,
           screen: Screen | None = None) -> Assessment:
    """`calls` in the order their sites were asked (the last is the newest); `words` the question's
    words as routing weighed them (None: weighted_coverage is 0); `measured` the gateway's own
    relevance (None: the sites' reported relevance); `screen` as for `passages`."""
    found = passages(calls, question, measured, screen)
    answered = len({p.site_id for p in found})
    if not found:
        return Assessment(best_summary=best_summary or 0.0, routing_gap=routing_gap, routing_deficit=routing_deficit)
    best = found[0].relevance
    margin = best - found[1].relevance if len(found) > 1 else best
    q_words = content_words(question)
    top_words = [content_words(p.text) for p in found[:TOP_PASSAGES]]
    coverage = _coverage(q_words, found)
    pairs = list(combinations(top_words[:AGREEMENT_PASSAGES], 2))
    agreement = sum(jaccard(a, b, empty=0.0) for a, b in pairs) / len(pairs) if pairs else 0.0
    order = [c.site_id for c in calls]
    gain, coverage_gain = _newest_gain(found, order[-1], q_words, best, coverage)
    return Assessment(best, margin, coverage, agreement, best_summary or 0.0, answered, len(found), routing_gap,
                      relevance_gain=gain, coverage_gain=coverage_gain,
                      sites_since_best=len(order) - 1 - order.index(found[0].site_id),
                      weighted_coverage=words.share(p.text for p in found[:TOP_PASSAGES]) if words else 0.0,
                      routing_deficit=routing_deficit)


def _newest_gain(found: Sequence[Passage], newest: str, q_words: frozenset[str], best: float,
                 coverage: float) -> tuple[float, float]:
    """What the newest site's answer added: relevance and coverage beyond the others' passages."""
    earlier = [p for p in found if p.site_id != newest]
    if not earlier:
        return best, coverage
    return best - earlier[0].relevance, coverage - _coverage(q_words, earlier)
