"""Communities: Leiden on the entity graph, small ones merged, each summarized and embedded.

The community summaries are what a site publishes, so they must be few enough to route on and
stable enough to version: ids are the hash of the sorted member ids (unchanged membership, same id,
across runs and machines), and Leiden runs with a fixed seed. Communities below
`site.min_community_size` say too little to route on; each is merged into the neighbouring
community it shares the most relation weight with (the DGRAG practice of merging subgraphs that are
too small), and a small group with no neighbour at all is left out.

An incremental run (`incremental=True`: `ingest --sync`, `delete`, `communities --incremental`)
is local where the stored set's record (plugin/community_state.py) says which documents changed
since it was built: every stored community that holds no entity of a changed document (nor one
whose chunks named a removed or replaced document, nor an entity that lost all its relations) keeps
its exact membership, id, summary and vector; Leiden runs only on the subgraph of the other entities
(the touched communities' members and new entities, `GraphStore.detect_communities(within=...)`, at
the resolution that weighs that subgraph as the whole graph's modularity does), and only the
communities it forms are summarized again, or keep the summary text of the stored community
they nearly equal (`[site] summary_keep_overlap`, `_summary_sources`), and a summary text already
embedded is not embedded again (`[site] summary_text_cache`, `_text_cache`). Why not seeded Leiden
over the whole graph, as before: it renames or reshapes communities far from the edit (with 1% of
a site's documents edited, 37 of 127 summaries were embedded again; a refresh after 5% edits cost a
full rebuild's time, most of it embedding summaries). Without such a record (none yet, or a mapped
graph) the run is seeded: Leiden starts from the stored communities.

Either way the result is checked against an unseeded run: when its modularity (at `leiden_gamma`)
falls below DRIFT_MODULARITY_RATIO of the unseeded run's, or its largest community grows past
DRIFT_LARGEST_FACTOR times the unseeded run's, the unseeded (full) partition is used instead and the
report says so (`fallback`); a local partition that drifted is first tried once more over a wider
region (also the communities that share a document with a touched one). A seeded run is checked
against an unseeded run on the same graph. A local refresh is first checked against the last
unseeded run on record (plugin/community_state.py), while at most `[site]
drift_reference_max_change` of the documents changed since it ran: on Neo4j the two Leiden runs
and the scoring of both partitions were about half of a refresh's time. Only a local partition that fails that check pays
for an unseeded run on the current graph, and falls back only if it drifted from that one too
(`reference_changed` in the report says which run it was checked against). So a site that syncs
for months cannot drift into a few giant communities whatever the engine does (issue 34: GDS's
seeded Leiden took a site from 80 communities to 12 in three unchanged runs; its cause, GDS
mislabelling a seeded run's later levels, is dealt with in adapters/graph/neo4j_gds.py).

Writes are ordered so that a crash leaves nothing inconsistent behind: summary vectors first, then
the graph's community set (the commit point), then stale vectors are deleted; a final count check
rebuilds the summary collection if an earlier crashed run left strays in it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import heapq
import statistics
import time
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Callable, Iterator, Sequence

import numpy as np
from tqdm import tqdm

from hansa.adapters.embedder.base import Embedder
from hansa.adapters.embedder.cached import CachedEmbedder
from hansa.adapters.graph.base import GraphStats, LeidenParams
from hansa.adapters.records import Community, CommunityAssignment
from hansa.core.crash_points import crash_point
from hansa.core.errors import ConfigError, InputError
from hansa.core.logs import get_logger
from hansa.core.entities import normalize
from hansa.plugin import community_state
from hansa.plugin.hierarchy import Parent, check_levels, coarser_levels
from hansa.plugin.vocabulary import build_terms
from hansa.plugin.site import CHUNKS, SUMMARIES, SiteContext, summary_collection
from hansa.plugin.summarize import EXTRACTIVE, summarize

log = get_logger(__name__)

# Level 0, the finest a site publishes, is Leiden's final partition at resolution `leiden_gamma`
# (GDS's last level, leidenalg's only one), so both graph backends cut a graph alike. GDS's finest
# level is only its first local-moving pass: on 10,000 SQuAD paragraphs it held 12x the final
# level's communities, and the Neo4j site published 150% of its corpus. The resolution, not GDS's
# levels, is the knob for finer communities (config.py: leiden_gamma); coarser levels are built
# above level 0 by clustering the community graph (plugin/hierarchy.py, `[site] community_levels`).
LEVEL = 0  # the finest level's number
MAX_COMMUNITY_CHUNKS = 1000  # chunks recorded per community (richness saturates here)
SUMMARY_ENTITIES = 40  # candidates the summarizer re-ranks by salience (degree ties are common)
SUMMARY_RELATIONS = 40
ALL_RELATIONS = 2**62  # "no limit" for the one call that reads the whole entity graph
REUSE_MIN_COSINE = 0.999  # a stored summary vector is reused only if it still matches the embedder
SUMMARY_VECTOR_MODES = ("blend", "text", "centroid")
SIZE_BUCKETS = ((1, 2), (3, 5), (6, 10), (11, 20), (21, 50), (51, 100), (101, None))
# When a seeded (incremental) partition counts as drifted from an unseeded one on the same graph
# (issue 34's targets): modularity below this share of the unseeded run's, or a largest community
# above this many times the unseeded run's largest.
DRIFT_MODULARITY_RATIO = 0.95
DRIFT_LARGEST_FACTOR = 2.0
SUMMARY_TEXT_CACHE = "summary-text-vectors.sqlite"  # in the site's home (`_text_cache`)


@dataclass(frozen=True)
class CommunityReport:
    communities: int
    entities: int  # entities that ended up in a community
    detected: int  # communities in Leiden's final partition
    merged: int  # communities merged into a neighbour: too small, or over the summary budget
    dropped: int  # small communities without any neighbour, left out
    dropped_entities: int
    size_min: int
    size_median: float
    size_max: int
    sizes: dict[str, int] = field(default_factory=dict)  # "3-5": how many communities of that size
    summaries_extractive: int = 0
    summaries_llm: int = 0
    summaries_embedded: int = 0  # the others were unchanged and kept their stored vectors
    # Of those, the texts the model embedded (the others came from the summary text cache), and the
    # communities a local refresh clustered again that kept a stored summary text (`_summary_sources`).
    summary_texts_embedded: int = 0
    summaries_kept: int = 0
    # Modularity at the site's resolution (`leiden_gamma`) of the Leiden partition used, and, for an
    # incremental run, of the unseeded partition it was checked against.
    modularity: float = 0.0
    modularity_full: float | None = None
    # Share of the documents changed since the unseeded run behind `modularity_full` (0.0: it ran
    # on this graph, in this build; more: a local refresh checked against the one on record).
    reference_changed: float | None = None
    # Why an incremental run used the unseeded (full) partition instead of the seeded one ("": it did not).
    fallback: str = ""
    # Communities per coarser level, level 1 first (plugin/hierarchy.py); the fields above are level 0's.
    coarser: tuple[int, ...] = ()
    seconds: float = 0.0
    # An incremental run found the graph and settings as the stored set was built from, and kept it
    # (plugin/community_state.py); the figures above are that build's.
    unchanged: bool = False
    # A local refresh: the communities it kept exactly as stored (summary and vector untouched), and
    # how many entities it clustered again (None: not a local refresh).
    kept: int = 0
    reclustered: int | None = None


def community_id(entity_ids: set[str] | frozenset[str] | list[str], level: int = LEVEL) -> str:
    """Stable across runs and machines: a function of membership (and, above level 0, the level:
    a parent with one child has the child's members, and must not share its id)."""
    head = "" if level == LEVEL else f"level {level}\n"
    digest = hashlib.sha256((head + "\n".join(sorted(entity_ids))).encode("utf-8")).hexdigest()
    return f"c{digest[:32]}"


def final_partition(assignments: Sequence[CommunityAssignment]) -> dict[int, set[str]]:
    """Entities per community of Leiden's final (coarsest) level: the last of each assignment's
    levels, whatever number of levels the backend reports."""
    groups: dict[int, set[str]] = defaultdict(set)
    for a in assignments:
        if a.communities:
            groups[a.communities[-1]].add(a.entity_id)
    return groups


def _community_links(ctx: SiteContext, member_of: dict[str, int]) -> dict[int, dict[int, float]]:
    """Summed relation weight between each pair of communities.

    The graph port exposes relations only through `community_context`, so this asks it once for
    the context of every assigned entity (no chunks) and maps relation names back to ids."""
    context = ctx.graph.community_context(
        list(member_of), max_entities=len(member_of), max_relations=ALL_RELATIONS, max_chunks=0
    )
    by_name: dict[str, str | None] = {}
    for eid, name, _degree in context.entities:
        by_name[name] = None if name in by_name and by_name[name] != eid else eid
    links: dict[int, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    for a_name, b_name, weight in context.relations:
        a = by_name.get(a_name) or _by_normalized(a_name, member_of)
        b = by_name.get(b_name) or _by_normalized(b_name, member_of)
        if a is None or b is None:
            continue
        ca, cb = member_of[a], member_of[b]
        if ca != cb:
            links[ca][cb] += weight
            links[cb][ca] += weight
    return links


def _by_normalized(name: str, member_of: dict[str, int]) -> str | None:
    key = normalize(name)
    return key if key in member_of else None


@dataclass
class _Merge:
    groups: dict[int, set[str]]
    merged: int = 0
    dropped: int = 0
    dropped_entities: int = 0
    # Relation weight between the merged groups (merge_small keeps it up to date as it merges), or
    # None when nothing was merged and the links were never read: the hierarchy reuses them.
    links: dict[int, dict[int, float]] | None = None


def merge_small(
    groups: dict[int, set[str]], links: dict[int, dict[int, float]], min_size: int, max_groups: int | None = None
) -> _Merge:
    """Merge each community below `min_size` (smallest first) into the neighbour it is most
    connected to; drop it if it has none. Ties go to the larger neighbour, then the one whose
    smallest member id sorts first, so the result never depends on Leiden's label numbers.

    `max_groups` (the site's summary budget, `summary_budget`) goes on merging the smallest
    communities the same way until at most that many are left: a large site publishes coarser
    summaries instead of more of them. A community merged only for the budget and without any
    neighbour is kept, never dropped: it is over the size floor and its knowledge must stay routable."""
    groups = {k: set(v) for k, v in groups.items()}
    key = {k: min(v) for k, v in groups.items()}
    result = _Merge(groups, links=links)

    def queued(size: int) -> bool:
        return size < min_size or (max_groups is not None and len(groups) > max_groups)

    heap = [(len(v), key[k], k) for k, v in groups.items() if queued(len(v))]
    heapq.heapify(heap)
    while heap:
        size, _key, c = heapq.heappop(heap)
        if c not in groups or len(groups[c]) != size:
            continue  # stale entry: merged away or grown since it was queued
        if not queued(size):
            break  # the smallest left is big enough and the budget is met: so is every other
        neighbours = links.get(c, {})
        if not neighbours:
            if size < min_size:
                result.dropped += 1
                result.dropped_entities += len(groups.pop(c))
            continue
        target = min(neighbours, key=lambda n: (-neighbours[n], -len(groups[n]), key[n]))
        groups[target] |= groups.pop(c)
        key[target] = min(key[target], key[c])
        for n, w in neighbours.items():
            links[n].pop(c, None)
            if n != target:
                links[target][n] = links[target].get(n, 0.0) + w
                links[n][target] = links[n].get(target, 0.0) + w
        links.pop(c, None)
        links[target].pop(c, None)
        result.merged += 1
        if queued(len(groups[target])):
            heapq.heappush(heap, (len(groups[target]), key[target], target))
    return result


def summary_budget(chunks: int, chunks_per_summary: int) -> int | None:
    """At most how many summaries a site of `chunks` chunks publishes (`[site] chunks_per_summary`;
    0: no budget). Why a budget: Leiden's resolution fit on ~90-passage sites cuts a 1,000-chunk
    site into ~175 communities, and the gateway would hold more bytes of summaries than the site
    holds text; a fixed number of chunks per summary keeps the gateway's share of the corpus bounded."""
    if chunks_per_summary <= 0:
        return None
    return max(1, -(-chunks // chunks_per_summary))


def _size_buckets(sizes: list[int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for low, high in SIZE_BUCKETS:
        label = f"{low}-{high}" if high else f"{low}+"
        n = sum(1 for s in sizes if s >= low and (high is None or s <= high))
        if n:
            out[label] = n
    return out


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0, 1.0, norms)).astype(np.float32)


def _centroids(ctx: SiteContext, communities: Sequence[Community]) -> np.ndarray:
    """Mean chunk embedding per community: what its chunks are about, not just what its summary says."""
    wanted = sorted({cid for c in communities for cid in c.chunk_ids})
    stored = ctx.vectors.get(CHUNKS, wanted) if wanted else {}
    out = np.zeros((len(communities), ctx.embedder.dim), dtype=np.float32)
    for i, community in enumerate(communities):
        rows = [stored[cid] for cid in community.chunk_ids if cid in stored]
        if rows:
            out[i] = np.mean(rows, axis=0)
    return out


def summary_vectors(ctx: SiteContext, communities: Sequence[Community], texts: Embedder | None = None) -> np.ndarray:
    """The vector each community is published and searched by (`[site] summary_vector`).

    "blend" won in routing-only experiments on MTRAG (16 random shards, 511 questions): gold-site
    recall@4 0.941 against 0.929 for the summary text alone, 0.897 for the chunk centroid alone and
    0.931 for a router that sees every chunk. Each vector still aggregates a whole community.
    `texts` embeds the summary texts (the site's summary text cache, `_text_cache`; default the
    site's embedder)."""
    mode = ctx.cfg.site.summary_vector
    if mode not in SUMMARY_VECTOR_MODES:
        raise ConfigError(f"[site] summary_vector must be one of {', '.join(SUMMARY_VECTOR_MODES)}, not {mode!r}")
    if not communities:
        return np.zeros((0, ctx.embedder.dim), dtype=np.float32)
    parts = []
    if mode in ("text", "blend"):
        parts.append((texts or ctx.embedder).embed([c.summary for c in communities]))
    if mode in ("centroid", "blend"):
        parts.append(_unit_rows(_centroids(ctx, communities)))
    return _unit_rows(np.sum(parts, axis=0))


def _summary_vectors(ctx: SiteContext, communities: list[Community], previous: Sequence[Community],
                     texts: Embedder | None = None) -> tuple[np.ndarray, list[int], list[int]]:
    """All summary vectors, computing only those of changed summaries; returns them with the
    indexes that were (re)computed and those whose vector was reused from a community of another id
    (both need a row written under their own id).

    A vector is a function of the summary text and the community's chunks (the blend of both,
    `summary_vectors`; chunk ids are content hashes), so a stored vector is reused whenever a stored
    community had the same text and chunks, whatever its id: a refresh that moves a peripheral
    entity renames its community but need not embed it again. One reused vector is first checked
    against a fresh computation, so a model (or `summary_vector` mode) swapped for another of the
    same dimension cannot leave old-space vectors behind. The others are computed with `texts`
    embedding their summary texts (`summary_vectors`)."""
    out = np.zeros((len(communities), ctx.embedder.dim), dtype=np.float32)
    earlier = {(c.summary, tuple(c.chunk_ids)): c.id for c in previous}
    keys = ((i, (c.summary, tuple(c.chunk_ids))) for i, c in enumerate(communities))
    source = {i: earlier[key] for i, key in keys if key in earlier}
    stored = ctx.vectors.get(SUMMARIES, sorted(set(source.values()))) if source else {}
    reuse = [i for i in sorted(source) if source[i] in stored]
    if reuse:
        probe = reuse[0]
        if float(np.dot(summary_vectors(ctx, [communities[probe]])[0], stored[source[probe]])) < REUSE_MIN_COSINE:
            reuse = []
    for i in reuse:
        out[i] = stored[source[i]]
    reused = set(reuse)
    todo = [i for i in range(len(communities)) if i not in reused]
    if todo:
        out[todo] = summary_vectors(ctx, [communities[i] for i in todo], texts)
    renamed = [i for i in reuse if source[i] != communities[i].id]
    return out, todo, renamed


@contextmanager
def _text_cache(ctx: SiteContext) -> Iterator[CachedEmbedder | None]:
    """The site's summary text vectors by content (`[site] summary_text_cache`), or None when off.

    Why: a refresh after 5% edits spent 73-85% of its time embedding the summaries of the
    communities it touched (a 120-paragraph SQuAD site, benchmarks/README.md), and a stored vector
    is reused only when both a summary's text and its chunks are unchanged (`_summary_vectors`),
    while a touched community whose summary is kept (`[site] summary_keep_overlap`) has the same
    text over other chunks. The cache holds the text vectors of the stored summaries alone
    (`CachedEmbedder.retain` after each write), so it stays the size of the summary set."""
    if not ctx.cfg.site.summary_text_cache:
        yield None
        return
    cache = CachedEmbedder(ctx.embedder, ctx.cfg.home / SUMMARY_TEXT_CACHE)
    try:
        yield cache
    finally:
        cache.close()


def _write_summaries(ctx: SiteContext, communities: list[Community]) -> tuple[int, int]:
    """Vectors, then the graph (commit point), then stale vectors; repair strays by a rebuild.

    Returns how many summary vectors were computed (the rest kept their stored vectors), and for
    how many of them the model embedded the text (the others' came from the text cache)."""
    with _text_cache(ctx) as texts:
        embedded = _write_summary_set(ctx, communities, texts)
        if texts is None:
            return embedded, embedded if ctx.cfg.site.summary_vector != "centroid" else 0
        texts.retain([c.summary for c in communities])
        return embedded, texts.misses


def _write_summary_set(ctx: SiteContext, communities: list[Community], texts: CachedEmbedder | None) -> int:
    before = ctx.graph.communities()
    previous = {c.id for c in before}
    ids = [c.id for c in communities]
    fields = [{"level": c.level} for c in communities]
    spec = summary_collection(ctx.embedder.dim)
    ctx.vectors.ensure_collection(spec)
    vectors, embedded, renamed = _summary_vectors(ctx, communities, before, texts)
    write = sorted({*embedded, *renamed})
    if write:
        ctx.vectors.upsert(SUMMARIES, [ids[i] for i in write], vectors[write], [fields[i] for i in write])
    crash_point("communities.after_vectors")
    ctx.graph.replace_communities(communities)
    crash_point("communities.after_graph")
    stale = sorted(set(previous) - set(ids))
    if stale:
        ctx.vectors.delete(SUMMARIES, ids=stale)
    found = ctx.vectors.count(SUMMARIES)
    if found != len(communities):
        # Only after a crashed earlier run: rows that no stored community names. Rebuild the set.
        log.warning("communities.summaries_rebuilt", expected=len(communities), found=found)
        ctx.vectors.drop(SUMMARIES)
        ctx.vectors.ensure_collection(spec)
        if communities:
            ctx.vectors.upsert(SUMMARIES, ids, vectors, fields)
    return len(embedded)


def stored_partition(ctx: SiteContext) -> dict[str, int]:
    """entity id -> index of its stored level-0 community: the seeds of an incremental Leiden run
    (coarser levels are rebuilt above level 0 on every run)."""
    finest = [c for c in ctx.graph.communities() if c.level == LEVEL]
    return {e: i for i, c in enumerate(finest) for e in c.entity_ids}


@dataclass(frozen=True)
class Detection:
    groups: dict[int, set[str]]  # entities per community of the partition used
    modularity: float
    modularity_full: float | None = None  # the unseeded run's, when the run was incremental
    fallback: str = ""
    # A local refresh's stored communities kept as they were, by id (their summaries are reused),
    # and the number of entities it clustered again (None: not a local refresh).
    kept: dict[str, Community] = field(default_factory=dict)
    reclustered: int | None = None
    # A local refresh's stored communities the edit touched (clustered again): their summaries may
    # be kept by the communities that replace them (`_summary_sources`).
    touched: tuple[Community, ...] = ()
    # The unseeded run's figures to record for the next refresh's check: this build's own run, or
    # (no run needed) the record's, whose `changed` then counts this build's documents too.
    reference: community_state.Reference | None = None


def _labels(groups: dict[int, set[str]]) -> dict[str, int]:
    return {e: c for c, members in groups.items() for e in members}


def drift(modularity: float, modularity_full: float, largest: int, largest_full: int, what: str = "seeded Leiden") -> str:
    """Why an incremental partition (`what` made it) counts as drifted from the unseeded one (""
    when it does not). The modularity floor is taken on |Q| so that it also holds for a (tiny)
    graph whose Q is negative."""
    floor = modularity_full - (1.0 - DRIFT_MODULARITY_RATIO) * abs(modularity_full)
    if modularity < floor:
        return (f"{what}'s modularity {modularity:.4f} is below {DRIFT_MODULARITY_RATIO} of a full "
                f"run's {modularity_full:.4f}")
    if largest > DRIFT_LARGEST_FACTOR * largest_full:
        return (f"{what}'s largest community ({largest} entities) is over {DRIFT_LARGEST_FACTOR:g}x "
                f"a full run's ({largest_full})")
    return ""


def _local(ctx: SiteContext, params: LeidenParams, unseeded: "_Unseeded", related: set[str], changed: set[str],
           stored: Sequence[Community], widen: bool) -> tuple[dict[int, set[str]], dict[str, Community], int]:
    """A local refresh's partition (see the module doc): the stored communities no changed document
    touched, as they are, beside Leiden's communities of everything else; with those kept ones by
    id and the number of entities clustered again.

    A stored community is touched when it holds an entity a changed document mentions now, when its
    chunks came from a changed (removed or replaced) document, or when one of its entities has no
    relation left (not in `related`). `widen` also re-clusters
    the communities that share a document with a touched one (a relation is a shared chunk, so
    these are its neighbours): the second try when the first drifted. Entities of the region that
    Leiden leaves out (related only to kept communities) stay alone here; merge_small then joins
    them to the community they are most related to, as it does any small community."""
    edited = ctx.graph.document_entities(sorted(changed)) if changed else set()
    kept = {c.id: c for c in stored
            if not changed.intersection(c.doc_ids) and all(e in related and e not in edited for e in c.entity_ids)}
    if widen:
        near = changed.union(*(c.doc_ids for c in stored if c.id not in kept))
        kept = {cid: c for cid, c in kept.items() if not near.intersection(c.doc_ids)}
    groups = {i: set(c.entity_ids) for i, c in enumerate(kept.values())}
    region = related.difference(*groups.values())
    if region == related:
        return dict(unseeded.groups()), {}, len(region)  # the edit touched every community: a full run's partition
    if region:
        found = final_partition(ctx.graph.detect_communities(params, within=region))
        for members in found.values():
            groups[len(groups)] = set(members)
        for entity in sorted(region.difference(*found.values())):
            groups[len(groups)] = {entity}
    return groups, kept, len(region)


class _Unseeded:
    """Leiden over the whole graph, unseeded, and its modularity: each run at most once per build,
    and only when something needs it (a local refresh that passes its check against the record
    needs neither)."""

    def __init__(self, ctx: SiteContext, params: LeidenParams) -> None:
        self._ctx, self._params = ctx, params
        self._groups: dict[int, set[str]] | None = None
        self._modularity: float | None = None

    @property
    def ran(self) -> bool:
        return self._groups is not None

    def groups(self) -> dict[int, set[str]]:
        if self._groups is None:
            self._groups = final_partition(self._ctx.graph.detect_communities(self._params))
        return self._groups

    def modularity(self) -> float:
        if self._modularity is None:
            self._modularity = self._ctx.graph.modularity(_labels(self.groups()), self._params.gamma)
        return self._modularity

    def largest(self) -> int:
        return max(map(len, self.groups().values()), default=0)

    def reference(self) -> community_state.Reference:
        return community_state.Reference(self.modularity(), self.largest(), 0.0)


def detect(ctx: SiteContext, incremental: bool, changed: set[str] | None = None,
           reference: community_state.Reference | None = None) -> Detection:
    """Leiden's partition for this build: unseeded, or (incremental) local where `changed` (the
    documents changed since the stored set was built) is known and else seeded from the stored
    communities, unless that drifted from an unseeded run on the same graph (see the module doc). A
    local refresh that drifted is tried once more over a wider region before the full run is used.

    `reference`: the last unseeded run's figures on record, `changed` counted in. While the share
    of documents changed since that run is at most `[site] drift_reference_max_change`, a local
    refresh is checked against them instead of running Leiden over the whole graph (profiled on a
    200-paragraph SQuAD site, the region's run and that one with the scoring of both partitions took
    1.1-1.8 s of a 5.4-7.0 s embedded refresh and 6.3-7.6 s of a 15 s one on Neo4j); one that fails
    that check is then checked exactly, so
    only a partition that also drifted from an unseeded run on this graph falls back to it."""
    site = ctx.cfg.site
    allowed = site.drift_reference_max_change
    if not 0.0 <= allowed <= 1.0:
        raise ConfigError(f"[site] drift_reference_max_change must be between 0 and 1, got {allowed!r}")
    params = LeidenParams(gamma=site.leiden_gamma, seed=site.leiden_seed)
    unseeded = _Unseeded(ctx, params)
    tries: list[Callable[[], tuple[dict[int, set[str]], dict[str, Community], int | None]]] = []
    what = "seeded Leiden"
    stored: list[Community] = []
    if incremental and changed is not None:
        stored = [c for c in ctx.graph.communities() if c.level == LEVEL]
        if stored:
            related = ctx.graph.related_entities()
            tries = [partial(_local, ctx, params, unseeded, related, changed, stored, widen) for widen in (False, True)]
            what = "the local refresh"
    elif incremental:
        seeds = stored_partition(ctx)
        if seeds:
            tries = [lambda: (final_partition(ctx.graph.detect_communities(params, seeds=seeds)), {}, None)]
    if not tries:
        return Detection(unseeded.groups(), unseeded.modularity(), reference=unseeded.reference())
    recorded = reference if reference is not None and changed is not None and reference.changed <= allowed else None
    reason = ""
    for attempt in tries:
        candidate, kept, reclustered = attempt()
        q_candidate = ctx.graph.modularity(_labels(candidate), site.leiden_gamma)
        largest = max(map(len, candidate.values()), default=0)
        if recorded is not None and not unseeded.ran:
            on_record = drift(q_candidate, recorded.modularity, largest, recorded.largest, what)
            if not on_record:
                return Detection(candidate, q_candidate, recorded.modularity, kept=kept, reclustered=reclustered,
                                 reference=recorded, touched=tuple(c for c in stored if c.id not in kept))
            log.info("communities.check_exactly", reason=on_record, reference_changed=recorded.changed)
        reason = drift(q_candidate, unseeded.modularity(), largest, unseeded.largest(), what)
        if not reason:
            return Detection(candidate, q_candidate, unseeded.modularity(), kept=kept, reclustered=reclustered,
                             reference=unseeded.reference(), touched=tuple(c for c in stored if c.id not in kept))
        log.info("communities.drifted", reason=reason, reclustered=reclustered)
    log.warning("communities.drift_fallback", reason=reason, incremental=len(candidate), full=len(unseeded.groups()))
    return Detection(unseeded.groups(), unseeded.modularity(), unseeded.modularity(), f"full build: {reason}",
                     reference=unseeded.reference())


def plan(ctx: SiteContext, incremental: bool, stats: GraphStats, changed: set[str] | None = None,
         reference: community_state.Reference | None = None) -> tuple[Detection, _Merge]:
    """The communities a build would publish (Leiden, then small ones merged), nothing written:
    what a build stores, and what a check can compare an incremental set against. `stats`: the
    graph's counts, as the caller read them (each read is a count query on Neo4j); `changed`: the
    documents changed since the stored set was built, for a local refresh, and `reference` what it
    is checked against (`detect`)."""
    site = ctx.cfg.site
    detection = detect(ctx, incremental, changed, reference)
    detected = detection.groups
    merge = _Merge(dict(detected))
    budget = summary_budget(stats.chunks, site.chunks_per_summary)
    if any(len(members) < site.min_community_size for members in detected.values()) or (budget and len(detected) > budget):
        merge = merge_small(detected, _community_links(ctx, _labels(detected)), site.min_community_size, budget)
    if not detected:
        log.warning("communities.none", reason="no entity has a relation: documents share no co-occurring entities")
    return detection, merge


def _hierarchy(ctx: SiteContext, merge: _Merge, ids: dict[int, str]) -> list[list[Parent]]:
    """The coarser levels above the finest communities (`[site] community_levels`; 1: none), linked
    by the relation weight the merge step already summed, read from the graph only if nothing merged.
    `ids`: each merged group's community id."""
    levels = check_levels(ctx.cfg.site.community_levels)
    if levels == 1 or len(merge.groups) <= 1:
        return []
    links = merge.links
    if links is None:
        links = _community_links(ctx, _labels(merge.groups))
    named = {ids[a]: {ids[b]: w for b, w in row.items() if b in ids and w}
             for a, row in links.items() if a in ids}
    finest = {ids[k]: frozenset(members) for k, members in merge.groups.items()}
    return coarser_levels(finest, named, levels, ctx.cfg.site.leiden_seed, community_id)


def _summary_sources(touched: Sequence[Community], changed: set[str], finest: dict[str, frozenset[str]],
                     overlap: float) -> dict[str, Community]:
    """The stored community whose summary text each new community keeps (`[site] summary_keep_overlap`):
    the touched one it shares the most members with, when their Jaccard overlap is at least
    `overlap` and none of its documents changed, so every sentence its summary quotes is still in
    the site as it was. Why: after 5% edits a third of a site's communities are touched, and most
    of them come back from Leiden with nearly the same members; summarizing them again changes their
    text (28 of 31 texts changed on a 120-paragraph SQuAD site) and so their vector, and embedding
    those texts was most of a refresh's time. Above 0.5 no two new communities can keep one text."""
    if overlap != 0.0 and not 0.5 < overlap <= 1.0:
        raise ConfigError(f"[site] summary_keep_overlap must be 0 (off) or above 0.5 and at most 1, got {overlap!r}")
    if overlap == 0.0 or not touched:
        return {}
    donors = [c for c in touched if not changed.intersection(c.doc_ids)]
    owner = {e: i for i, c in enumerate(donors) for e in c.entity_ids}
    out: dict[str, Community] = {}
    for cid, members in finest.items():
        shared = Counter(owner[e] for e in members if e in owner)
        if not shared:
            continue
        best, count = min(shared.items(), key=lambda item: (-item[1], item[0]))
        donor = donors[best]
        if count / len(members.union(donor.entity_ids)) >= overlap:
            out[cid] = donor
    return out


def clear_communities(ctx: SiteContext) -> None:
    """Withdraw every community (an emptied site): the next publish sends only tombstones."""
    community_state.forget(ctx)
    _write_summaries(ctx, [])
    build_terms(ctx)


def build_communities(ctx: SiteContext, progress: bool = False, incremental: bool = False,
                      stats: GraphStats | None = None) -> CommunityReport:
    """Detect, merge, summarize, embed and store the site's communities (replacing the old set).

    `incremental` refreshes the stored set after a small change (a deletion, a few new documents):
    locally where the stored set's record says which documents changed, else with Leiden seeded
    from the stored communities (see the module doc), so most communities keep their ids and are
    neither summarized, re-embedded nor re-published. That partition is used only if it has not
    drifted from an unseeded run (`detect`); otherwise the report's `fallback` says why not.
    `stats`: the graph's counts when the caller already read them (each read is a count query on
    Neo4j); nothing may have written to the graph since."""
    started = time.perf_counter()
    if stats is None:
        stats = ctx.graph.stats()  # read once, and nothing writes before detection
    if stats.documents == 0:
        raise InputError("the graph holds no documents: run `hansa site ingest <paths>` before building communities")
    current = community_state.basis(ctx, stats)
    kept = community_state.unchanged_report(ctx, current.fingerprint if current else None) if incremental else None
    if kept is not None and stats.communities:
        names = {f.name for f in dataclasses.fields(CommunityReport)}
        figures = {k: v for k, v in kept.items() if k in names} | {"coarser": tuple(kept.get("coarser", ()))}
        report = replace(CommunityReport(**figures), summaries_extractive=0, summaries_llm=0, summaries_embedded=0,
                         summary_texts_embedded=0, summaries_kept=0,
                         unchanged=True, seconds=round(time.perf_counter() - started, 3))
        log.info("communities.unchanged", communities=report.communities)
        return report
    changed = community_state.changed_documents(ctx, current) if incremental else None
    reference = None  # the last unseeded run on record, with this build's changed documents counted in
    if changed is not None and current is not None and (recorded := community_state.reference(ctx)) is not None:
        reference = replace(recorded, changed=recorded.changed + len(changed) / max(1, len(current.documents)))
    community_state.forget(ctx)
    detection, merge = plan(ctx, incremental, stats, changed, reference)
    detected = detection.groups

    ids = {k: community_id(members) for k, members in merge.groups.items()}
    finest = {ids[k]: frozenset(members) for k, members in merge.groups.items()}
    parents = _hierarchy(ctx, merge, ids)
    parent_of = {child: p.id for level in parents for p in level for child in p.children}
    memberships = [(cid, LEVEL, finest[cid]) for cid in sorted(finest)]
    memberships += [(p.id, p.level, p.members) for level in parents for p in level]
    sources = _summary_sources(detection.touched, changed or set(),
                               {cid: m for cid, m in finest.items() if cid not in detection.kept},
                               ctx.cfg.site.summary_keep_overlap)
    communities: list[Community] = []
    methods: dict[str, int] = defaultdict(int)
    for cid, level, members in tqdm(memberships, desc="communities", unit="community", disable=not progress):
        if level == LEVEL and cid in detection.kept:  # the same members, untouched by the edit
            communities.append(replace(detection.kept[cid], parent=parent_of.get(cid, "")))
            continue
        context = ctx.graph.community_context(
            sorted(members), max_entities=SUMMARY_ENTITIES, max_relations=SUMMARY_RELATIONS,
            max_chunks=MAX_COMMUNITY_CHUNKS
        )
        if level == LEVEL and cid in sources:  # nearly the same members, and its text still true
            summary = sources[cid].summary
        else:
            summary, method = summarize(replace(context, community_id=cid), ctx.llm)
            methods[method] += 1
        chunk_ids = tuple(chunk.chunk_id for chunk in context.chunks)
        communities.append(
            Community(
                id=cid,
                level=level,
                entity_ids=tuple(sorted(members)),
                summary=summary,
                chunk_ids=chunk_ids,
                doc_ids=tuple(sorted({chunk.doc_id for chunk in context.chunks})),
                rank=float(len(chunk_ids)),
                parent=parent_of.get(cid, ""),
            )
        )
    embedded, texts_embedded = _write_summaries(ctx, communities)
    build_terms(ctx)

    sizes = sorted(len(c.entity_ids) for c in communities if c.level == LEVEL)
    report = CommunityReport(
        communities=len(sizes),
        entities=sum(sizes),
        detected=len(detected),
        merged=merge.merged,
        dropped=merge.dropped,
        dropped_entities=merge.dropped_entities,
        size_min=sizes[0] if sizes else 0,
        size_median=float(statistics.median(sizes)) if sizes else 0.0,
        size_max=sizes[-1] if sizes else 0,
        sizes=_size_buckets(sizes),
        summaries_extractive=methods[EXTRACTIVE],
        summaries_llm=sum(n for m, n in methods.items() if m != EXTRACTIVE),
        summaries_embedded=embedded,
        summary_texts_embedded=texts_embedded,
        summaries_kept=len(sources),
        modularity=round(detection.modularity, 6),
        modularity_full=None if detection.modularity_full is None else round(detection.modularity_full, 6),
        reference_changed=(None if detection.modularity_full is None or detection.reference is None
                           else round(detection.reference.changed, 6)),
        fallback=detection.fallback,
        coarser=tuple(len(level) for level in parents),
        seconds=round(time.perf_counter() - started, 3),
        kept=sum(1 for cid in finest if cid in detection.kept),
        reclustered=detection.reclustered,
    )
    log.info("communities.done", **{k: v for k, v in vars(report).items() if k != "sizes"})
    community_state.record(ctx, current, dataclasses.asdict(report), detection.reference)
    return report
