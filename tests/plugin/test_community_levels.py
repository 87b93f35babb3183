"""The community hierarchy (plugin/hierarchy.py) on a real SQuAD site, on both graph stores: levels
built above the published partition, parent links consistent, kept through an incremental refresh,
and published with their parents in a verifiable publication."""
from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import pytest

from hansa.adapters.records import Community
from hansa.core.config import load_config
from hansa.core.errors import ConfigError
from hansa.evaluation.squad import load_passages
from hansa.plugin.communities import build_communities, community_id
from hansa.plugin.hierarchy import TOP_COMMUNITIES, cluster, coarser_levels
from hansa.plugin.ingest import ingest_paths
from hansa.plugin.install import install_site, load_identity
from hansa.plugin.publish import publish_summaries
from hansa.plugin.site import SUMMARIES, SiteContext
from hansa.sync.publication import open_publication
from hansa.sync.wire import EmbeddingSpace

PASSAGES = 80
LEVELS = 4
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="module", params=["embedded", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def site(request: pytest.FixtureRequest, shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SiteContext]:
    """A site of SQuAD passages on each store, ingested once; each test sets `community_levels`."""
    tmp_path = tmp_path_factory.mktemp("levels")
    env = {"HANSA_HOME": str(tmp_path / "home"), "HANSA_SITE_SITE_ID": "levels-site",
           "HANSA_SITE_COMMUNITY_LEVELS": str(LEVELS)}
    if request.param == "neo4j":
        uri = request.getfixturevalue("neo4j_uri")
        from neo4j import GraphDatabase

        with GraphDatabase.driver(uri, auth=None) as driver:
            driver.execute_query("MATCH (n) WHERE any(l IN labels(n) WHERE l STARTS WITH 'Hansa') DETACH DELETE n",
                                 database_="neo4j")
        env.update({"HANSA_GRAPH_BACKEND": "neo4j", "HANSA_NEO4J_URI": uri, "HANSA_NEO4J_PASSWORD": ""})
    rows = [p.as_document() for p in load_passages(shared_dir / "datasets" / "squad")[:PASSAGES]]
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "squad.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with SiteContext.open(load_config(env=env)) as ctx:
        install_site(ctx)
        ingest_paths(ctx, [folder])
        yield ctx
        ctx.graph.uninstall()  # the session's Neo4j is shared: later tests expect it free of hansa data


def _check_hierarchy(communities: list[Community]) -> dict[int, list[Community]]:
    """Every non-top community has a parent one level up; a parent's members are the union of its
    children's; every level partitions level 0's entities; ids name membership and level."""
    by_level: dict[int, list[Community]] = defaultdict(list)
    for c in communities:
        by_level[c.level].append(c)
    top = max(by_level)
    assert sorted(by_level) == list(range(top + 1))
    by_id = {c.id: c for c in communities}
    children: dict[str, list[Community]] = defaultdict(list)
    for c in communities:
        assert c.id == community_id(c.entity_ids, c.level)
        if c.level == top:
            assert c.parent == ""
        else:
            assert by_id[c.parent].level == c.level + 1
            children[c.parent].append(c)
    finest = sorted(e for c in by_level[0] for e in c.entity_ids)
    for level, members in by_level.items():
        assert sorted(e for c in members for e in c.entity_ids) == finest  # a partition of the same entities
        if level > 0:
            for parent in members:
                assert children[parent.id], "a parent has at least one child"
                assert set(parent.entity_ids) == set().union(*(set(c.entity_ids) for c in children[parent.id]))
            assert len(members) < len(by_level[level - 1]), "a level exists only when something merged"
    assert len(by_level[top]) <= TOP_COMMUNITIES or top == LEVELS - 1 or len(by_level) == 1
    return by_level


def test_levels_are_built_stored_and_published_with_parents(site: SiteContext) -> None:
    site.cfg.site.community_levels = LEVELS
    report = build_communities(site)
    stored = site.graph.communities()
    by_level = _check_hierarchy(stored)
    assert len(by_level) >= 2, "SQuAD passages must give at least one coarser level"
    assert report.communities == len(by_level[0]) and list(report.coarser) == [len(by_level[n]) for n in sorted(by_level)[1:]]
    assert all(c.summary and c.chunk_ids for c in stored)
    assert site.vectors.count(SUMMARIES) == len(stored)

    # An incremental refresh seeds Leiden with level 0 only and rebuilds the levels above it.
    again = build_communities(site, incremental=True)
    refreshed = site.graph.communities()
    assert len(_check_hierarchy(refreshed)) >= 2 and again.coarser
    assert site.vectors.count(SUMMARIES) == len(refreshed)
    stored = refreshed

    out = site.cfg.home / "pub.json"
    publish_summaries(site, out=out, now=NOW)
    pub = open_publication(out.read_bytes(), "levels-site", [load_identity(site).public_key],
                           EmbeddingSpace.of(site.embedder), now=NOW)
    got = {r.summary_id: (r.level, r.parent) for r in pub.summaries}
    assert got == {c.id: (c.level, c.parent or None) for c in stored}


def test_one_level_is_todays_behaviour(site: SiteContext) -> None:
    site.cfg.site.community_levels = 1
    build_communities(site)
    stored = site.graph.communities()
    assert stored and all(c.level == 0 and c.parent == "" for c in stored)


def test_a_bad_level_count_is_a_config_error(site: SiteContext) -> None:
    for bad in (0, LEVELS + 100, "2"):
        site.cfg.site.community_levels = bad
        with pytest.raises(ConfigError, match="community_levels"):
            build_communities(site)


def test_clustering_the_community_graph() -> None:
    # Two triangles joined by one weak link: two groups; isolated nodes stay alone.
    links = {"a": {"b": 5, "c": 5, "d": 0.1}, "b": {"a": 5, "c": 5}, "c": {"a": 5, "b": 5},
             "d": {"e": 5, "f": 5, "a": 0.1}, "e": {"d": 5, "f": 5}, "f": {"d": 5, "e": 5}}
    assert cluster(sorted(links) + ["g"], links, seed=42) == [["a", "b", "c"], ["d", "e", "f"], ["g"]]
    finest = {n: frozenset({n.upper()}) for n in "abcdefg"}
    levels = coarser_levels(finest, links, levels=4, seed=42, name=lambda m, lv: f"L{lv}:" + "".join(sorted(m)))
    assert [[(p.id, p.children) for p in level] for level in levels] == [
        [("L1:ABC", ("a", "b", "c")), ("L1:DEF", ("d", "e", "f")), ("L1:G", ("g",))]]  # 3 <= TOP: the top
    assert coarser_levels(finest, links, levels=1, seed=42, name=lambda m, lv: "") == []
    nothing = {n: frozenset({n}) for n in "abcdef"}
    assert coarser_levels(nothing, {}, levels=4, seed=42, name=lambda m, lv: "") == []  # nothing merges
