"""`build_communities` on a real site (embedded graph, Milvus Lite, packaged embedder), and the
pure merge step."""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from hansa.core.errors import ConfigError

from hansa.adapters.graph.base import LeidenParams
from hansa.adapters.llm.openai_compat import OpenAICompatibleLLM
from hansa.core.config import load_config
from hansa.core.errors import InputError
from hansa.adapters.records import CommunityAssignment
from hansa.plugin.communities import build_communities, community_id, final_partition, merge_small, summary_budget, summary_vectors
from hansa.plugin.ingest import ingest_paths
from hansa.plugin.site import SUMMARIES, SiteContext, summary_collection

PASSAGES = 24
MIN_SIZE = 20  # above the smallest Leiden communities of this corpus, so merging really happens


@pytest.fixture(scope="module")
def site(mtrag_passages: dict[str, list[dict[str, str]]], tmp_path_factory: pytest.TempPathFactory) -> Iterator[SiteContext]:
    """One ingested site for the module: MTRAG passages from all four domains."""
    by_domain = mtrag_passages
    rows = [row for domain in sorted(by_domain) for row in by_domain[domain][: PASSAGES // len(by_domain)]]
    data = tmp_path_factory.mktemp("corpus") / "passages.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    home = tmp_path_factory.mktemp("site")
    cfg = load_config(env={"HANSA_HOME": str(home), "HANSA_SITE_MIN_COMMUNITY_SIZE": str(MIN_SIZE)})
    with SiteContext.open(cfg) as ctx:
        ctx.graph.install()
        ingest_paths(ctx, [data])
        yield ctx


def _assigned(site: SiteContext) -> dict[int, set[str]]:
    groups: dict[int, set[str]] = {}
    for a in site.graph.detect_communities(LeidenParams(gamma=site.cfg.site.leiden_gamma, seed=site.cfg.site.leiden_seed)):
        groups.setdefault(a.communities[0], set()).add(a.entity_id)
    return groups


def test_build_stores_merged_communities_with_summaries_and_vectors(site: SiteContext) -> None:
    detected = _assigned(site)
    assert any(len(g) < MIN_SIZE for g in detected.values()), "the corpus must exercise merging"
    report = build_communities(site, progress=False)
    stored = site.graph.communities()

    assert report.communities == len(stored) > 0
    assert report.detected == len(detected)
    assert report.merged + report.dropped >= 1
    assert report.communities == report.detected - report.merged - report.dropped  # each merge/drop removes one
    assert report.entities + report.dropped_entities == sum(len(g) for g in detected.values())
    assert report.summaries_extractive == len(stored) and report.summaries_llm == 0
    sizes = sorted(len(c.entity_ids) for c in stored)
    assert (report.size_min, report.size_max) == (sizes[0], sizes[-1])
    assert sum(report.sizes.values()) == len(stored)

    members_seen: set[str] = set()
    for c in stored:
        assert len(c.entity_ids) >= MIN_SIZE
        assert c.id == community_id(c.entity_ids) and c.level == 0
        assert members_seen.isdisjoint(c.entity_ids)
        members_seen |= set(c.entity_ids)
        assert c.rank == len(c.chunk_ids) > 0
        assert c.doc_ids and set(site.graph.document_hashes(c.doc_ids)) == set(c.doc_ids)
        assert {h.doc_id for h in site.graph.chunks(c.chunk_ids)} == set(c.doc_ids)
        top = site.graph.community_context(c.entity_ids, max_entities=1, max_relations=0, max_chunks=0).entities[0]
        assert c.summary.startswith("Topics: ") and top[1] in c.summary
        assert len(c.summary) <= 1200

    assert site.vectors.count(SUMMARIES) == len(stored)
    vectors = site.vectors.get(SUMMARIES, [c.id for c in stored])
    assert set(vectors) == {c.id for c in stored}
    first = stored[0]
    assert float(np.dot(vectors[first.id], summary_vectors(site, [first])[0])) > 0.999
    # "blend": the published vector leans towards both the summary text and the chunks' centroid
    text_part = site.embedder.embed([first.summary])[0]
    assert 0.5 < float(np.dot(vectors[first.id], text_part)) < 0.999
    [hit] = site.vectors.search(SUMMARIES, vectors[first.id][None, :], limit=1, output_fields=["level"])[0]
    assert hit.id == first.id and hit.fields["level"] == 0


def test_ids_are_stable_across_runs(site: SiteContext) -> None:
    build_communities(site)
    first = site.graph.communities()
    vectors = site.vectors.get(SUMMARIES, [c.id for c in first])
    report = build_communities(site)
    second = site.graph.communities()
    assert report.summaries_embedded == 0  # unchanged summaries keep their vectors
    again = site.vectors.get(SUMMARIES, [c.id for c in second])
    assert all(np.array_equal(vectors[k], again[k]) for k in vectors)
    assert [(c.id, c.entity_ids, c.summary, c.chunk_ids) for c in first] == [
        (c.id, c.entity_ids, c.summary, c.chunk_ids) for c in second
    ]
    assert site.vectors.count(SUMMARIES) == len(second)


def test_a_vector_is_reused_by_its_text_and_chunks_not_by_its_id(site: SiteContext) -> None:
    """A refresh that renames a community (a peripheral member moved) but leaves its summary and
    chunks as they were need not embed it again; one that keeps its id but changes its chunks must
    (the vector blends the chunks' centroid)."""
    from dataclasses import replace

    from hansa.plugin.communities import _write_summaries

    build_communities(site)
    first, second, *rest = site.graph.communities()
    assert len(second.chunk_ids) > 1
    vectors = site.vectors.get(SUMMARIES, [first.id, second.id])
    renamed = replace(first, id=community_id(first.entity_ids[1:]), entity_ids=first.entity_ids[1:])
    fewer_chunks = replace(second, chunk_ids=second.chunk_ids[1:])
    try:
        embedded, texts = _write_summaries(site, [renamed, fewer_chunks, *rest])
        assert embedded == 1  # only the community whose chunks changed
        assert texts == 0  # and its text's vector came from the summary text cache
        stored = site.vectors.get(SUMMARIES, [renamed.id, first.id, second.id])
        assert set(stored) == {renamed.id, second.id}  # the old id's row is gone, the new one written
        assert np.array_equal(stored[renamed.id], vectors[first.id])
        assert float(np.dot(stored[second.id], summary_vectors(site, [fewer_chunks])[0])) > 0.999
        assert not np.array_equal(stored[second.id], vectors[second.id])
        assert site.vectors.count(SUMMARIES) == 2 + len(rest)
    finally:
        build_communities(site)  # the module's other tests start from a real build


def test_a_new_partition_replaces_the_whole_summary_set(site: SiteContext) -> None:
    build_communities(site)
    before = {c.id for c in site.graph.communities()}
    site.cfg.site.leiden_gamma = 4.0
    try:
        build_communities(site)
        after = {c.id for c in site.graph.communities()}
    finally:
        site.cfg.site.leiden_gamma = 1.0
    assert after != before
    assert site.vectors.count(SUMMARIES) == len(after)
    assert set(site.vectors.get(SUMMARIES, sorted(before | after))) == after  # stale ids deleted


def test_stray_summary_vectors_from_a_crashed_run_are_cleaned(site: SiteContext) -> None:
    site.vectors.ensure_collection(summary_collection(site.embedder.dim))
    site.vectors.upsert(SUMMARIES, ["cstray"], site.embedder.embed(["left behind"]), [{"level": 0}])
    build_communities(site)
    stored = {c.id for c in site.graph.communities()}
    assert site.vectors.get(SUMMARIES, ["cstray"]) == {}
    assert site.vectors.count(SUMMARIES) == len(stored)


@pytest.mark.llm
def test_llm_summaries_and_fallback_to_extractive(
    built_site: SiteContext, llm_base_url: str, llm_model: str, dead_llm_url: str
) -> None:
    """The real SmolLM2 server summarizes every community; an unreachable endpoint falls back.

    On the small four-document site (conftest.py): a real model writes every summary, and the
    24-passage `site` would cost minutes of generation on a 2-core machine."""
    site = built_site
    build_communities(site)
    extractive = {c.id: c.summary for c in site.graph.communities()}
    try:
        site.llm = OpenAICompatibleLLM(dead_llm_url, model="any", timeout_s=2, max_retries=0)
        report = build_communities(site)
        assert report.summaries_extractive == report.communities and report.summaries_llm == 0
        assert {c.id: c.summary for c in site.graph.communities()} == extractive

        site.llm = OpenAICompatibleLLM(llm_base_url, model=llm_model, timeout_s=120)
        report = build_communities(site)
        assert report.summaries_llm == report.communities and report.summaries_extractive == 0
        stored = site.graph.communities()
        assert {c.id for c in stored} == set(extractive)  # same partition, new texts
        for c in stored:
            assert c.summary and c.summary == " ".join(c.summary.split()) and len(c.summary) <= 1200
            assert c.summary != extractive[c.id]
        assert len({c.summary for c in stored}) == len(stored)  # each community's own material
        vectors = site.vectors.get(SUMMARIES, [c.id for c in stored])
        fresh = summary_vectors(site, stored)
        assert all(float(np.dot(vectors[c.id], fresh[i])) > 0.999 for i, c in enumerate(stored))
    finally:
        site.llm = None


def test_an_empty_site_is_refused(tmp_path: Path) -> None:
    cfg = load_config(env={"HANSA_HOME": str(tmp_path)})
    with SiteContext.open(cfg) as ctx:
        ctx.graph.install()
        with pytest.raises(InputError, match="run `hansa site ingest"):
            build_communities(ctx)


# -- the merge step, on hand-made graphs ------------------------------------------------------

def _links(*edges: tuple[int, int, float]) -> dict[int, dict[int, float]]:
    out: dict[int, dict[int, float]] = {}
    for a, b, w in edges:
        out.setdefault(a, {})[b] = out.setdefault(a, {}).get(b, 0.0) + w
        out.setdefault(b, {})[a] = out.setdefault(b, {}).get(a, 0.0) + w
    return out


def test_small_community_joins_its_most_connected_neighbour() -> None:
    groups = {0: {"a1", "a2", "a3"}, 1: {"b1", "b2", "b3"}, 2: {"s"}}
    result = merge_small(groups, _links((2, 0, 1.0), (2, 1, 5.0)), min_size=3)
    assert result.groups == {0: {"a1", "a2", "a3"}, 1: {"b1", "b2", "b3", "s"}}
    assert (result.merged, result.dropped) == (1, 0)
    assert groups[1] == {"b1", "b2", "b3"}  # the input is not modified


def test_isolated_small_community_is_dropped() -> None:
    result = merge_small({0: {"a", "b", "c"}, 1: {"x", "y"}}, _links(), min_size=3)
    assert result.groups == {0: {"a", "b", "c"}}
    assert (result.merged, result.dropped, result.dropped_entities) == (0, 1, 2)


def test_merges_cascade_and_links_are_carried_over() -> None:
    # 1 (size 1) joins 2 (size 1): still small, so the pair joins 0 through 2's link to 0.
    groups = {0: {"a", "b", "c"}, 1: {"x"}, 2: {"y"}}
    result = merge_small(groups, _links((1, 2, 3.0), (2, 0, 1.0)), min_size=3)
    assert result.groups == {0: {"a", "b", "c", "x", "y"}}
    assert result.merged == 2


def test_ties_go_to_the_larger_then_the_first_sorted_neighbour() -> None:
    groups = {0: {"m", "n", "o"}, 1: {"p", "q", "r", "s"}, 2: {"z"}}
    assert merge_small(groups, _links((2, 0, 1.0), (2, 1, 1.0)), 3).groups[1] >= {"z"}
    groups = {0: {"d", "e", "f"}, 1: {"a", "b", "c"}, 2: {"z"}}
    assert "z" in merge_small(groups, _links((2, 0, 1.0), (2, 1, 1.0)), 3).groups[1]  # "a" < "d"


def test_nothing_to_merge_when_all_are_big_enough() -> None:
    groups = {0: {"a"}, 1: {"b"}}
    assert merge_small(groups, _links((0, 1, 1.0)), 1).groups == groups


def test_stored_vectors_from_another_model_are_not_reused(site: SiteContext) -> None:
    build_communities(site)
    stored = site.graph.communities()
    # same dimension, different space: what a swapped embedding model would have left behind
    rng = np.random.default_rng(0)
    foreign = rng.normal(size=(len(stored), site.embedder.dim)).astype(np.float32)
    foreign /= np.linalg.norm(foreign, axis=1, keepdims=True)
    site.vectors.upsert(SUMMARIES, [c.id for c in stored], foreign, [{"level": 0}] * len(stored))
    report = build_communities(site)
    assert report.summaries_embedded == report.communities == len(stored)
    fresh = summary_vectors(site, stored)
    kept = site.vectors.get(SUMMARIES, [c.id for c in stored])
    assert all(float(np.dot(kept[c.id], fresh[i])) > 0.999 for i, c in enumerate(stored))


def test_summary_vector_modes(site: SiteContext) -> None:
    """`[site] summary_vector` chooses text, centroid or blend; anything else is a ConfigError."""
    communities = site.graph.communities()[:3]
    text = site.embedder.embed([c.summary for c in communities])
    try:
        site.cfg.site.summary_vector = "text"
        assert np.allclose(summary_vectors(site, communities), text, atol=1e-5)
        site.cfg.site.summary_vector = "centroid"
        centroid = summary_vectors(site, communities)
        assert np.allclose(np.linalg.norm(centroid, axis=1), 1.0, atol=1e-5)
        assert all(float(np.dot(centroid[i], text[i])) < 0.999 for i in range(len(communities)))
        site.cfg.site.summary_vector = "blend"
        blend = summary_vectors(site, communities)
        expected = text + centroid
        expected /= np.linalg.norm(expected, axis=1, keepdims=True)
        assert np.allclose(blend, expected, atol=1e-5)
        site.cfg.site.summary_vector = "chunks"
        with pytest.raises(ConfigError, match="summary_vector"):
            summary_vectors(site, communities)
    finally:
        site.cfg.site.summary_vector = "blend"


def test_budget_merges_the_smallest_until_within_it() -> None:
    groups = {0: {"a1", "a2", "a3", "a4"}, 1: {"b1", "b2", "b3"}, 2: {"c1", "c2", "c3"}, 3: {"d1", "d2", "d3", "d4", "d5"}}
    links = _links((1, 0, 2.0), (2, 3, 1.0), (2, 1, 0.5), (0, 3, 0.1))
    result = merge_small(groups, links, min_size=3, max_groups=2)
    # 1 (smallest, "b1" < "c1") joins 0; then 2 is the smallest and joins 3, its strongest link
    assert result.groups == {0: groups[0] | groups[1], 3: groups[3] | groups[2]}
    assert (result.merged, result.dropped) == (2, 0)


def test_budget_never_drops_a_community_without_neighbours() -> None:
    groups = {0: {"a", "b", "c"}, 1: {"x", "y", "z"}, 2: {"p", "q", "r", "s"}}
    result = merge_small(groups, _links((0, 2, 1.0)), min_size=3, max_groups=1)
    assert result.groups == {2: groups[0] | groups[2], 1: groups[1]}  # 1 has no link: kept, over budget
    assert result.dropped == 0


def test_the_merge_hands_over_the_links_between_the_merged_communities() -> None:
    """The hierarchy reuses the merge's links instead of reading the graph again: they must be what
    summing the entity relations over the merged communities gives."""
    rng = random.Random(5)
    entities = [f"e{i:02d}" for i in range(60)]
    groups = {g: set() for g in range(15)}
    for i, e in enumerate(entities):
        groups[i % 15 if i < 30 else rng.randrange(15)].add(e)
    group_of = {e: g for g, members in groups.items() for e in members}
    edges = [(rng.choice(entities), rng.choice(entities), float(rng.randint(1, 4))) for _ in range(120)]
    links = _links(*((group_of[a], group_of[b], w) for a, b, w in edges if group_of[a] != group_of[b]))
    result = merge_small(groups, links, min_size=5, max_groups=6)
    assert result.merged > 0 and result.links is not None
    merged_of = {e: g for g, members in result.groups.items() for e in members}
    expected = _links(*((merged_of[a], merged_of[b], w) for a, b, w in edges
                        if a in merged_of and b in merged_of and merged_of[a] != merged_of[b]))
    handed = {a: {b: w for b, w in row.items() if w} for a, row in result.links.items() if a in result.groups}
    assert {a: row for a, row in handed.items() if row} == expected


def test_the_final_level_is_the_one_published() -> None:
    """GDS reports every level (finest first), the embedded store one: both are grouped by the last."""
    gds_like = [CommunityAssignment("a", (0, 7)), CommunityAssignment("b", (1, 7)), CommunityAssignment("c", (2, 9))]
    assert dict(final_partition(gds_like)) == {7: {"a", "b"}, 9: {"c"}}
    one_level = [CommunityAssignment("a", (4,)), CommunityAssignment("b", (4,)), CommunityAssignment("c", ())]
    assert dict(final_partition(one_level)) == {4: {"a", "b"}}


def test_summary_budget() -> None:
    assert summary_budget(1000, 0) is None
    assert summary_budget(1000, 30) == 34
    assert summary_budget(5, 30) == 1


def test_a_budget_bounds_the_published_summaries(site: SiteContext) -> None:
    unbounded = build_communities(site)
    assert unbounded.communities > 2
    chunks = site.graph.stats().chunks
    budget = unbounded.communities // 2
    site.cfg.site.chunks_per_summary = -(-chunks // budget)
    try:
        bounded = build_communities(site)
    finally:
        site.cfg.site.chunks_per_summary = 0
    assert bounded.communities <= budget < unbounded.communities
    assert site.vectors.count(SUMMARIES) == bounded.communities == len(site.graph.communities())
    # coarser, not poorer: every entity of the unbounded set is still in a community
    assert bounded.entities == unbounded.entities
    build_communities(site)  # the module's site as the other tests expect it
