"""Contradictions between sites, found in their claims and resolved by weight (SPLIT-RAG's
conflict-resistant merge, without an LLM).

Two claims from different sources are *about the same thing* (one slot) when they are comparable
(same kind; numbers in the same unit), their sentences' other words overlap (frame Jaccard at least
FRAME_MIN, POLARITY_FRAME for a negation) and the words around the value overlap (CONTEXT_MIN). A
pair that disagrees is a contradiction unless either sentence also states the other's value (then
they are two values of one sentence, misaligned, not a dispute). Slots are the connected
components of these pairs.

Resolution follows SPLIT-RAG: claims that do not contradict each other form a compatibility graph,
and the kept set is its maximum-weight clique; contradictions only link claims within a slot, so
the clique decomposes into one small clique problem per slot, solved exactly (igraph's maximal
cliques) up to EXACT_LIMIT claims and greedily beyond. A set's weight counts each site once (its
best claim) plus DOC_SUPPORT of each further document of that site stating it: independent sites
are independent evidence, one site's copies of a text mostly are not. One source against one whose
weights are within NEAR_TIE is left unresolved: both sentences stay, and the answer says the
sources disagree without picking one (a 0.01 margin of relevance is not evidence of truth).

Broadly disputed sites (`broad`: gateway.query.conduct's dispute breadth, the sites that have
contradicted many distinct others) are not independent sources: a set's weight is compared on its
other sites first and on theirs only between sets equal on that, so their side never outweighs a
site that is not broadly disputed, two of them agreeing outvote nobody, a dispute of one of them
against one other site is not left unresolved, and the sites counted as "more independent sites"
leave them out.

Sites without standing (`unproven`: gateway.query.reliability's `SiteReliability.unproven`, sites
nothing independent has confirmed often enough yet) are discounted the same way in a slot where a
site with standing disagrees with them: a member with no record cannot win, or tie, a head-on
contradiction against one that has a record, however many copies of its text its accomplices hold.
Where no site of a slot has standing (a new federation) nothing changes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Iterable, Sequence

import igraph

from hansa.core.text import jaccard
from hansa.gateway.query.claims import POLARITY, Claim, agree, comparable

FRAME_MIN = 0.5
POLARITY_FRAME = 0.8  # "X is Y" vs "X is not Y": the rest of the sentence must nearly match
MIN_POLARITY_WORDS = 3
CONTEXT_MIN = 0.34
STATEMENT_MIN = 0.3  # sentences sharing fewer words than this are never compared claim by claim
DOC_SUPPORT = 0.25
NEAR_TIE = 0.8  # a single source weighing at least this share of the other single source's: unresolved
EXACT_LIMIT = 24


@dataclass(frozen=True)
class Statement:
    """A sentence one site offers from one document, weighted by the gateway (reliability x measured
    relevance), with its claims."""

    key: int
    site_id: str
    doc_id: str
    text: str
    weight: float
    claims: tuple[Claim, ...]


@dataclass(frozen=True)
class Side:
    value: str
    sites: tuple[str, ...]
    documents: tuple[tuple[str, str], ...]  # (site, document)
    weight: float
    won: bool

    def to_json(self) -> dict[str, object]:
        return {"value": self.value, "sites": list(self.sites),
                "documents": [{"site_id": s, "doc_id": d} for s, d in self.documents],
                "weight": round(self.weight, 4), "won": self.won}


@dataclass(frozen=True)
class Conflict:
    """One disputed claim: what it is about, each side, which won and why."""

    subject: str
    predicate: str
    kind: str
    sides: tuple[Side, ...]  # the winner first
    reason: str
    unresolved: bool = False  # two single sources of nearly equal weight: neither side is kept over the other

    @property
    def winner(self) -> Side:
        return self.sides[0]

    def to_json(self) -> dict[str, object]:
        return {"claim": {"subject": self.subject, "predicate": self.predicate, "kind": self.kind},
                "sides": [s.to_json() for s in self.sides], "winner": None if self.unresolved else self.winner.value,
                "reason": self.reason, "unresolved": self.unresolved}

    def summary(self) -> str:
        """One sentence for the answer: the chosen value, and that sources disagree."""
        if self.unresolved:
            return "Sources disagree, unresolved: " + " / ".join(f"{s.value} ({', '.join(s.sites)})" for s in self.sides) + "."
        others = "; ".join(f"{s.value} ({', '.join(s.sites)})" for s in self.sides[1:])
        return (f"Sources disagree: {self.winner.value} ({', '.join(self.winner.sites)}) against {others}; "
                f"{self.winner.value} is kept because {self.reason}.")


@dataclass
class Resolution:
    conflicts: tuple[Conflict, ...] = ()
    rejected: frozenset[int] = frozenset()  # statement keys on a losing side
    agreeing_sites: dict[int, set[str]] = field(default_factory=dict)  # key -> other sites that agree
    # What the conflicts teach about the sites (gateway.query.reliability): only a side stated by more
    # independent sites than the other counts, as won for its sites and lost for the others'. A
    # dispute settled by weight (one site against one) is not evidence of who is wrong: on SQuAD's
    # 16 sites, claims of two cities' census boilerplate ("a total area of 62 square miles") were read
    # as one slot, and counting them cut an honest site's reliability to 0.12 in 250 questions.
    won: dict[str, int] = field(default_factory=dict)  # site -> conflicts its side won by more sites
    lost: dict[str, int] = field(default_factory=dict)  # site -> times it stood against a majority
    broad: frozenset[str] = frozenset()  # the broadly disputed sites this resolution discounted

    def disputes(self) -> set[tuple[str, str]]:
        """Pairs of sites on opposite sides of a conflict (unresolved ones too): what dispute
        breadth counts (gateway.query.conduct)."""
        return dispute_pairs(self.conflicts)


def dispute_pairs(conflicts: Iterable["Conflict"]) -> set[tuple[str, str]]:
    """Pairs of distinct sites on opposite sides of any of `conflicts` (each pair sorted)."""
    out: set[tuple[str, str]] = set()
    for conflict in conflicts:
        for i, side in enumerate(conflict.sides):
            for other in conflict.sides[i + 1:]:
                out.update((min(a, b), max(a, b)) for a in side.sites for b in other.sites if a != b)
    return out


def _same_slot(a: Claim, b: Claim) -> bool:
    if not comparable(a, b):
        return False
    if a.kind == POLARITY:
        return min(len(a.frame), len(b.frame)) >= MIN_POLARITY_WORDS and jaccard(a.frame, b.frame) >= POLARITY_FRAME
    if jaccard(a.frame, b.frame) < FRAME_MIN:
        return False
    return (not a.context and not b.context) or jaccard(a.context, b.context) >= CONTEXT_MIN


def _states(statement: Statement, claim: Claim) -> bool:
    return any(comparable(c, claim) and agree(c, claim) for c in statement.claims)


def _score(items: Iterable[tuple[Statement, Claim]]) -> float:
    """Each site counts once at its best weight; its further documents add DOC_SUPPORT each."""
    per_site: dict[str, dict[str, float]] = {}
    for st, _ in items:
        docs = per_site.setdefault(st.site_id, {})
        docs[st.doc_id] = max(docs.get(st.doc_id, 0.0), st.weight)
    total = 0.0
    for docs in per_site.values():
        ws = sorted(docs.values(), reverse=True)
        total += ws[0] + DOC_SUPPORT * sum(ws[1:])
    return total


def _ranked_score(items: list[tuple[Statement, Claim]], broad: frozenset[str]) -> tuple[float, float]:
    """(the weight of the sites not broadly disputed, that of those that are): compared in this order."""
    return (_score(it for it in items if it[0].site_id not in broad),
            _score(it for it in items if it[0].site_id in broad))


def _best_consistent(nodes: list[int], items: list[tuple[Statement, Claim]], conflict: set[tuple[int, int]],
                     broad: frozenset[str] = frozenset()) -> set[int]:
    """The maximum-weight set of claims with no contradiction among them (exact when small), the
    weight of sites not broadly disputed first."""
    local = {n: i for i, n in enumerate(nodes)}
    if len(nodes) <= EXACT_LIMIT:
        compat = [(local[a], local[b]) for i, a in enumerate(nodes) for b in nodes[i + 1:]
                  if (a, b) not in conflict and (b, a) not in conflict]
        g = igraph.Graph(n=len(nodes), edges=compat)
        cliques = g.maximal_cliques() or [(i,) for i in range(len(nodes))]
        best = max(cliques, key=lambda c: (_ranked_score([items[nodes[i]] for i in c], broad), -min(c)))
        return {nodes[i] for i in best}
    chosen: set[int] = set()
    for n in sorted(nodes, key=lambda n: (items[n][0].site_id in broad, -items[n][0].weight)):
        if all((n, c) not in conflict and (c, n) not in conflict for c in chosen):
            chosen.add(n)
    return chosen


def _sides(nodes: list[int], items: list[tuple[Statement, Claim]], chosen: set[int]) -> list[list[int]]:
    """Group a slot's claims by value (the heaviest claim of each group names it), winners first."""
    groups: list[list[int]] = []
    for n in sorted(nodes, key=lambda n: (n not in chosen, -items[n][0].weight, n)):
        home = next((g for g in groups if (g[0] in chosen) == (n in chosen) and agree(items[g[0]][1], items[n][1])), None)
        if home is None:
            groups.append([n])
        else:
            home.append(n)
    return groups


def _reason(win: Side, lose: Side, broad: frozenset[str] = frozenset(), unproven: frozenset[str] = frozenset()) -> str:
    ours, theirs = _independent(win, broad | unproven), _independent(lose, broad | unproven)
    if not theirs and ours and lose.sites:
        one = len(lose.sites) == 1
        if set(lose.sites) & broad:
            return (f"the other side's {'site is' if one else 'sites are'} broadly disputed "
                    f"(contradicting many distinct sites): {', '.join(lose.sites)}")
        return (f"the other side's {'site has' if one else 'sites have'} no confirmed record yet, against "
                f"{'a site' if len(ours) == 1 else 'sites'} with one: {', '.join(lose.sites)}")
    if len(ours) > len(theirs):
        return f"more independent sites state it ({len(ours)} against {len(theirs)})"
    return (f"its sources weigh more (reliability x measured relevance x support: {win.weight:.2f} "
            f"against {lose.weight:.2f})")


@dataclass
class _Pairs:
    """What comparing every pair of statements found: contradicting claim pairs (indices into
    `items`), the other sites agreeing with each statement, and the slots (connected components of
    compared claims, in order of first claim)."""

    items: list[tuple[Statement, Claim]]
    conflict: set[tuple[int, int]]
    agreeing: dict[int, set[str]]
    slots: list[list[int]]


def _pairs(statements: Sequence[Statement]) -> _Pairs:
    items = [(st, c) for st in statements for c in st.claims]
    words = [frozenset().union(*(c.frame for c in st.claims)) if st.claims else frozenset() for st in statements]
    by_statement: dict[int, list[int]] = {}
    for i, (st, _) in enumerate(items):
        by_statement.setdefault(st.key, []).append(i)
    parent = list(range(len(items)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    conflict: set[tuple[int, int]] = set()
    agreeing: dict[int, set[str]] = {}
    for si, sj in _compared(statements, words):
        a, b = statements[si], statements[sj]
        for i in by_statement.get(a.key, []):
            for j in by_statement.get(b.key, []):
                relation = _relation(a, b, items[i][1], items[j][1])
                if relation == _AGREE and a.site_id != b.site_id:
                    agreeing.setdefault(a.key, set()).add(b.site_id)
                    agreeing.setdefault(b.key, set()).add(a.site_id)
                elif relation == _CONTRADICT:
                    conflict.add((i, j))
                if relation in (_AGREE, _CONTRADICT):  # one slot (a misaligned pair links nothing)
                    parent[find(i)] = find(j)
    slots: dict[int, list[int]] = {}
    for i in range(len(items)):
        slots.setdefault(find(i), []).append(i)
    return _Pairs(items, conflict, agreeing, list(slots.values()))


def _compared(statements: Sequence[Statement], words: Sequence[frozenset[str]]) -> Iterable[tuple[int, int]]:
    """Pairs of statements worth comparing claim by claim: other documents sharing enough words."""
    for si, a in enumerate(statements):
        for sj in range(si + 1, len(statements)):
            b = statements[sj]
            if (a.site_id, a.doc_id) != (b.site_id, b.doc_id) and jaccard(words[si], words[sj]) >= STATEMENT_MIN:
                yield si, sj


_AGREE, _CONTRADICT, _MISALIGNED = "agree", "contradict", "misaligned"


def _relation(a: Statement, b: Statement, ca: Claim, cb: Claim) -> str | None:
    """How claim `ca` (of `a`) and `cb` (of `b`) relate; None when they are not about one slot."""
    if not _same_slot(ca, cb):
        return None
    if agree(ca, cb):
        return _AGREE
    # each sentence also stating the other's value: misaligned, not disputed
    return _MISALIGNED if _states(b, ca) or _states(a, cb) else _CONTRADICT


def _side(group: list[int], items: list[tuple[Statement, Claim]], chosen: set[int]) -> Side:
    sts = [items[n][0] for n in group]
    return Side(items[group[0]][1].value, tuple(sorted({s.site_id for s in sts})),
                tuple(sorted({(s.site_id, s.doc_id) for s in sts})), _score(items[n] for n in group),
                won=group[0] in chosen)


def _independent(side: Side, broad: frozenset[str]) -> set[str]:
    """A side's sites that count as independent sources: those not broadly disputed."""
    return set(side.sites) - broad


def _near_tie(sides: Sequence[Side], broad: frozenset[str]) -> bool:
    """One source against one, weighing nearly the same, and neither broadly disputed unless both are."""
    return (len(sides) == 2 and len(sides[0].sites) == len(sides[1].sites) == 1
            and sides[1].weight >= NEAR_TIE * sides[0].weight
            and len(_independent(sides[0], broad)) == len(_independent(sides[1], broad)))


def _discounted(nodes: list[int], items: list[tuple[Statement, Claim]], broad: frozenset[str],
                unproven: frozenset[str]) -> frozenset[str]:
    """The slot's sites whose side counts only against each other: the broadly disputed, and the
    unproven where a site with standing (and not broadly disputed) is in the slot too."""
    sites = {items[n][0].site_id for n in nodes}
    standing = sites - broad - unproven
    return broad | (frozenset(sites & unproven) if standing else frozenset())


def _settle(nodes: list[int], pairs: _Pairs, broad: frozenset[str] = frozenset(),
            unproven: frozenset[str] = frozenset()) -> tuple[Conflict, set[int], frozenset[str]] | None:
    """One slot's conflict, the claims it keeps and the sites it discounted (`_discounted`), or
    None when the slot holds no dispute."""
    items, conflict = pairs.items, pairs.conflict
    if len(nodes) < 2 or not any((a, b) in conflict for a in nodes for b in nodes):
        return None
    discount = _discounted(nodes, items, broad, unproven)
    unproven = discount - broad
    broad = discount
    chosen = _best_consistent(nodes, items, conflict, broad)
    groups = _sides(nodes, items, chosen)
    sides = [_side(g, items, chosen) for g in groups]
    sides = [s for s in sides if s.won][:1] + [s for s in sides if not s.won]
    if len(sides) < 2 or not sides[0].won:
        return None
    head = items[groups[0][0]][1]
    if _near_tie(sides, broad):
        # one source against one, weighing nearly the same: nothing here says which is right
        reason = (f"one source against one of nearly equal weight ({sides[0].weight:.2f} against "
                  f"{sides[1].weight:.2f}): unresolved")
        return Conflict(head.subject, head.predicate, head.kind, tuple(sides), reason, unresolved=True), set(nodes), broad
    return (Conflict(head.subject, head.predicate, head.kind, tuple(sides), _reason(sides[0], sides[1], broad - unproven, unproven)),
            chosen, broad)


def _tally(found: Conflict, won: dict[str, int], lost: dict[str, int], broad: frozenset[str] = frozenset()) -> None:
    """Sides outvoted by more independent sites (broadly disputed ones are not); one decided by
    weight says nothing of who is wrong."""
    winners = set(found.sides[0].sites)
    outvoted = [losers for side in found.sides[1:]
                if len(winners - broad) > len((losers := set(side.sites) - winners) - broad)]
    for s in winners if outvoted else ():
        won[s] = won.get(s, 0) + 1
    for losers in outvoted:
        for s in losers:
            lost[s] = lost.get(s, 0) + 1


def resolve(statements: Sequence[Statement], broad: Collection[str] = (), unproven: Collection[str] = ()) -> Resolution:
    """Find the contradictions among the statements and keep the heaviest consistent claims,
    `broad` sites (broadly disputed) counting only against each other, and `unproven` ones (without
    standing) only against each other where a site with standing is in the dispute."""
    broad, unproven = frozenset(broad), frozenset(unproven)
    pairs = _pairs(statements)
    conflicts: list[Conflict] = []
    rejected: set[int] = set()
    won: dict[str, int] = {}
    lost: dict[str, int] = {}
    for nodes in pairs.slots:
        settled = _settle(nodes, pairs, broad, unproven)
        if settled is None:
            continue
        found, kept, discount = settled
        conflicts.append(found)
        if found.unresolved:
            continue  # both sides stay
        _tally(found, won, lost, discount)
        rejected.update(pairs.items[n][0].key for n in nodes if n not in kept)
    conflicts.sort(key=lambda c: -c.winner.weight)
    return Resolution(tuple(conflicts), frozenset(rejected), pairs.agreeing, won, lost, broad)
