"""An incremental refresh keeps the stored communities when nothing they were built from changed
(plugin/community_state.py), on both graph stores, rebuilds as soon as anything did, and after an
edit re-clusters only the communities the changed documents touch (a local refresh)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from hansa.core.config import load_config
from hansa.core.errors import ConfigError
from hansa.evaluation.squad import load_passages
from hansa.plugin import community_state
from hansa.plugin.communities import (DRIFT_LARGEST_FACTOR, DRIFT_MODULARITY_RATIO, build_communities, plan, stored_partition,
                                      summary_vectors)
from hansa.plugin.deletion import refresh_communities
from hansa.plugin.ingest import ingest_paths
from hansa.plugin.site import SUMMARIES, SiteContext


def _write(path: Path, rows: list[dict[str, str]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture(params=["embedded", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def site(request: pytest.FixtureRequest, shared_dir: Path, tmp_path: Path) -> Iterator[tuple[SiteContext, Path, list[Any]]]:
    env: dict[str, str] = {"HANSA_HOME": str(tmp_path / "home"), "HANSA_SITE_SITE_ID": "state-site"}
    if request.param == "neo4j":
        uri = request.getfixturevalue("neo4j_uri")
        from neo4j import GraphDatabase

        with GraphDatabase.driver(uri, auth=None) as driver:
            driver.execute_query("MATCH (n) WHERE any(l IN labels(n) WHERE l STARTS WITH 'Hansa') DETACH DELETE n",
                                 database_="neo4j")
        env |= {"HANSA_GRAPH_BACKEND": "neo4j", "HANSA_NEO4J_URI": uri, "HANSA_NEO4J_PASSWORD": ""}
    rows = [p.as_document() for p in load_passages(shared_dir / "datasets" / "squad")[:40]]
    folder = tmp_path / "corpus"
    folder.mkdir()
    _write(folder / "squad.jsonl", rows[:30])
    with SiteContext.open(load_config(env=env)) as ctx:
        ctx.graph.install()
        ingest_paths(ctx, [folder])
        yield ctx, folder, rows
        ctx.graph.uninstall()  # the session's Neo4j is shared


def _state(ctx: SiteContext) -> tuple[dict[str, tuple[str, tuple[str, ...]]], dict[str, Any]]:
    communities = {c.id: (c.summary, c.chunk_ids) for c in ctx.graph.communities()}
    return communities, ctx.vectors.get(SUMMARIES, sorted(communities))


def test_an_unchanged_graph_keeps_its_communities_and_a_change_rebuilds(site: tuple[SiteContext, Path, list[Any]]) -> None:
    ctx, folder, rows = site
    full = build_communities(ctx)
    before, vectors = _state(ctx)
    again = refresh_communities(ctx)
    assert again is not None and again.unchanged and again.summaries_embedded == 0
    assert (again.communities, again.size_max, again.modularity) == (full.communities, full.size_max, full.modularity)
    after, kept_vectors = _state(ctx)
    assert after == before and all((kept_vectors[i] == vectors[i]).all() for i in before)

    _write(folder / "squad.jsonl", rows[:29] + rows[30:31])  # one paragraph replaced by another
    ingest_paths(ctx, [folder], sync=True)
    refreshed = refresh_communities(ctx)
    assert refreshed is not None and not refreshed.unchanged and refreshed.summaries_embedded > 0
    assert set(_state(ctx)[0]) != set(before)
    assert refresh_communities(ctx).unchanged  # type: ignore[union-attr]

    ctx.cfg.site.leiden_gamma *= 2  # a setting that shapes communities
    assert not build_communities(ctx, incremental=True).unchanged
    assert build_communities(ctx, incremental=True).unchanged
    assert not build_communities(ctx, incremental=False).unchanged  # a full build always runs


def test_a_build_that_fails_midway_leaves_no_record_to_vouch_for_its_set(site: tuple[SiteContext, Path, list[Any]],
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, _, _ = site
    build_communities(ctx)
    assert community_state.unchanged_report(ctx, community_state.fingerprint(ctx, ctx.graph.stats())) is not None

    def fail(communities: Any) -> None:
        raise OSError("disk full")  # the graph write of a rebuild fails after its vectors were written

    ctx.cfg.site.min_community_size += 1
    monkeypatch.setattr(ctx.graph, "replace_communities", fail)
    with pytest.raises(OSError):
        build_communities(ctx, incremental=True)
    monkeypatch.undo()
    ctx.cfg.site.min_community_size -= 1  # back to what the surviving set was built with
    assert community_state.unchanged_report(ctx, community_state.fingerprint(ctx, ctx.graph.stats())) is None
    assert not build_communities(ctx, incremental=True).unchanged


def test_a_mapped_graph_never_takes_the_shortcut(site: tuple[SiteContext, Path, list[Any]]) -> None:
    ctx, _, _ = site
    ctx.cfg.site.graph_map.document_label = "Report"  # relations may change outside hansa's documents
    assert community_state.fingerprint(ctx, ctx.graph.stats()) is None
    build_communities(ctx)
    assert not build_communities(ctx, incremental=True).unchanged


def test_a_build_counts_the_graph_once(site: tuple[SiteContext, Path, list[Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    """The empty check, the fingerprint, the "any communities stored" check and the summary budget
    share one read of the counts: each read is a count query over the whole graph on Neo4j."""
    ctx, _, _ = site
    reads = []
    real = ctx.graph.stats
    monkeypatch.setattr(ctx.graph, "stats", lambda: reads.append(1) or real())  # the real store, counted
    assert not build_communities(ctx).unchanged
    assert len(reads) == 1
    assert build_communities(ctx, incremental=True).unchanged
    assert len(reads) == 2


def _edit(ctx: SiteContext, folder: Path, rows: list[Any]) -> None:
    """One paragraph deleted and one replaced by another's text, applied as `ingest --sync` does."""
    _write(folder / "squad.jsonl", rows[1:2] + [{**rows[2], "text": rows[35]["text"]}] + rows[3:30])
    ingest_paths(ctx, [folder], sync=True)


def test_an_edit_keeps_every_community_it_does_not_touch(site: tuple[SiteContext, Path, list[Any]]) -> None:
    """Communities holding no entity of a deleted or changed document (before or after the edit)
    keep their members, ids, summaries and vectors; only the rest is clustered and summarized again,
    and the refreshed set stays within issue 34's tolerance of a full build on the same graph."""
    ctx, folder, rows = site
    build_communities(ctx)
    before = {c.id: c for c in ctx.graph.communities()}
    vectors = ctx.vectors.get(SUMMARIES, sorted(before))
    hashes = ctx.graph.document_hashes(sorted(ctx.graph.documents_by_source("")))
    mentioned = {d: ctx.graph.document_entities([d]) for d in hashes}
    _edit(ctx, folder, rows)
    now = ctx.graph.document_hashes(sorted(hashes))
    changed = sorted(d for d in hashes if now.get(d) != hashes[d])
    assert len(changed) == 2
    touched = ctx.graph.document_entities(changed).union(*(mentioned[d] for d in changed))
    untouched = {cid for cid, c in before.items() if not touched.intersection(c.entity_ids)}
    assert len(untouched) > len(before) / 2  # the edit is far from most communities

    report = refresh_communities(ctx)
    assert report is not None and not report.unchanged and report.fallback == ""
    assert report.reclustered is not None and 0 < report.reclustered
    after = {c.id: c for c in ctx.graph.communities()}
    kept = untouched & set(after)
    assert report.kept == len(kept) >= 0.8 * len(untouched)
    kept_vectors = ctx.vectors.get(SUMMARIES, sorted(kept))
    for cid in kept:
        assert (after[cid].entity_ids, after[cid].summary, after[cid].chunk_ids) == \
            (before[cid].entity_ids, before[cid].summary, before[cid].chunk_ids)
        assert (kept_vectors[cid] == vectors[cid]).all()
    assert report.summaries_embedded <= report.communities - report.kept

    gamma = ctx.cfg.site.leiden_gamma
    _, full = plan(ctx, incremental=False, stats=ctx.graph.stats())
    q_full = ctx.graph.modularity({e: i for i, members in enumerate(full.groups.values()) for e in members}, gamma)
    assert ctx.graph.modularity(stored_partition(ctx), gamma) >= DRIFT_MODULARITY_RATIO * q_full
    largest = max(len(c.entity_ids) for c in after.values())
    assert largest <= DRIFT_LARGEST_FACTOR * max(map(len, full.groups.values()))


def test_a_refresh_counts_the_graph_once(site: tuple[SiteContext, Path, list[Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    """refresh_communities reads the counts (is the site emptied?) and hands them to the build."""
    ctx, folder, rows = site
    build_communities(ctx)
    _edit(ctx, folder, rows)
    reads = []
    real = ctx.graph.stats
    monkeypatch.setattr(ctx.graph, "stats", lambda: reads.append(1) or real())  # the real store, counted
    report = refresh_communities(ctx)
    assert report is not None and not report.unchanged and report.reclustered is not None
    assert len(reads) == 1


def _count_leiden(ctx: SiteContext, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Leiden runs on the real store from here on, each True when it ran over the whole graph."""
    runs: list[bool] = []
    real = ctx.graph.detect_communities

    def counted(params: Any, seeds: Any = None, within: Any = None) -> Any:
        runs.append(within is None)
        return real(params, seeds, within)

    monkeypatch.setattr(ctx.graph, "detect_communities", counted)
    return runs


def _edit_again(ctx: SiteContext, folder: Path, rows: list[Any]) -> None:
    """After `_edit`: one more paragraph replaced by another's text."""
    _write(folder / "squad.jsonl", rows[1:2] + [{**rows[2], "text": rows[35]["text"]}]
           + [{**rows[3], "text": rows[36]["text"]}] + rows[4:30])
    ingest_paths(ctx, [folder], sync=True)


def test_a_clean_local_refresh_runs_no_leiden_over_the_whole_graph(site: tuple[SiteContext, Path, list[Any]],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Its check compares against the last unseeded run on record, and counts the documents changed
    since; once more changed than `drift_reference_max_change` allows, a refresh runs one again."""
    ctx, folder, rows = site
    built = build_communities(ctx)
    _edit(ctx, folder, rows)
    runs = _count_leiden(ctx, monkeypatch)
    report = refresh_communities(ctx)
    assert report is not None and report.fallback == "" and report.reclustered
    assert runs == [False]  # Leiden within the touched region only
    assert report.modularity_full == built.modularity and report.reference_changed == pytest.approx(2 / 29, abs=1e-6)
    assert report.modularity >= DRIFT_MODULARITY_RATIO * built.modularity

    ctx.cfg.site.drift_reference_max_change = 0.05  # below the 3 of 29 documents changed since the full build
    _edit_again(ctx, folder, rows)
    runs.clear()
    again = refresh_communities(ctx)
    assert again is not None and again.fallback == "" and again.reference_changed == 0.0
    assert runs[:2] == [False, True] and runs.count(True) == 1  # the region, then the unseeded run it is checked against
    recorded = community_state.reference(ctx)
    assert recorded is not None and recorded.changed == 0.0 and recorded.modularity == pytest.approx(again.modularity_full, abs=1e-6)


def test_a_refresh_that_fails_the_check_on_record_is_checked_exactly(site: tuple[SiteContext, Path, list[Any]],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A record no partition can match (a modularity of 10) makes the refresh run Leiden over the
    whole graph and compare with that: the local partition passes, and nothing falls back."""
    ctx, folder, rows = site
    build_communities(ctx)
    path = ctx.cfg.home / community_state.FILENAME
    stored = json.loads(path.read_text(encoding="utf-8"))
    assert stored["reference"]["changed"] == 0.0
    stored["reference"]["modularity"] = 10.0
    path.write_text(json.dumps(stored), encoding="utf-8")
    _edit(ctx, folder, rows)
    runs = _count_leiden(ctx, monkeypatch)
    report = refresh_communities(ctx)
    assert report is not None and report.fallback == "" and report.kept > 0
    assert runs == [False, True] and report.reference_changed == 0.0 and report.modularity_full < 1.0


def _model_texts(ctx: SiteContext, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts the site's real embedder embeds from here on (passages, not queries)."""
    texts: list[str] = []
    real = ctx.embedder.embed

    def counted(batch: Any) -> Any:
        texts.extend(batch)
        return real(batch)

    monkeypatch.setattr(ctx.embedder, "embed", counted)
    return texts


def test_a_summary_text_already_embedded_is_not_embedded_again(site: tuple[SiteContext, Path, list[Any]],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """With the summary vectors gone (no stored vector to reuse), a build takes every text's vector
    from the summary text cache, and each published vector is what a fresh computation gives."""
    ctx, _, _ = site
    built = build_communities(ctx)
    assert built.summary_texts_embedded == built.summaries_embedded == built.communities
    ctx.vectors.drop(SUMMARIES)
    texts = _model_texts(ctx, monkeypatch)
    again = build_communities(ctx)
    assert again.summaries_embedded == again.communities and again.summary_texts_embedded == 0 and texts == []
    monkeypatch.undo()
    stored = ctx.graph.communities()
    vectors = ctx.vectors.get(SUMMARIES, [c.id for c in stored])
    fresh = summary_vectors(ctx, stored)
    assert all(float(np.dot(vectors[c.id], row)) > 0.9999 for c, row in zip(stored, fresh))

    ctx.cfg.site.summary_text_cache = False  # off: every text is embedded again
    ctx.vectors.drop(SUMMARIES)
    texts = _model_texts(ctx, monkeypatch)
    off = build_communities(ctx)
    assert off.summary_texts_embedded == off.communities and len(texts) == off.communities


def test_a_touched_community_with_nearly_the_same_members_keeps_its_summary(
        site: tuple[SiteContext, Path, list[Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    """`summary_keep_overlap`: a community the edit touched keeps the text of the stored community it
    shares at least that Jaccard overlap with, when none of that one's documents changed; its vector
    blends that text (from the cache, not the model) with its current chunks. The membership is the
    refresh's own (the same as with the option off)."""
    ctx, folder, rows = site
    ctx.cfg.site.summary_keep_overlap = 0.6
    build_communities(ctx)
    before = {c.id: c for c in ctx.graph.communities()}
    hashes = ctx.graph.document_hashes(sorted(ctx.graph.documents_by_source("")))
    _edit(ctx, folder, rows)
    now = ctx.graph.document_hashes(sorted(hashes))
    changed = {d for d in hashes if now.get(d) != hashes[d]}
    texts = _model_texts(ctx, monkeypatch)
    report = refresh_communities(ctx)
    monkeypatch.undo()
    assert report is not None and report.fallback == "" and report.summaries_kept > 0
    after = ctx.graph.communities()
    by_text = {c.summary: c for c in before.values()}
    donated = [c for c in after if c.id not in before and c.summary in by_text]
    assert len(donated) == report.summaries_kept
    for c in donated:
        donor = by_text[c.summary]
        assert len(set(c.entity_ids) & set(donor.entity_ids)) / len(set(c.entity_ids) | set(donor.entity_ids)) >= 0.6
        assert not changed.intersection(donor.doc_ids)
    stored_texts = {c.summary for c in before.values()}
    assert not [t for t in texts if t in stored_texts][1:]  # at most the reuse check's one text
    assert report.summary_texts_embedded == len({c.summary for c in after} - stored_texts)
    vectors = ctx.vectors.get(SUMMARIES, [c.id for c in after])
    fresh = summary_vectors(ctx, after)
    assert all(float(np.dot(vectors[c.id], row)) > 0.9999 for c, row in zip(after, fresh))

    ctx.cfg.site.summary_keep_overlap = 0.5  # two communities could keep one text
    _edit_again(ctx, folder, rows)
    with pytest.raises(ConfigError, match="summary_keep_overlap"):
        refresh_communities(ctx)
