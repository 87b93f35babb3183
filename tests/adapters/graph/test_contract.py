"""The GraphStore contract, checked identically on the embedded store and on Neo4j + GDS; then what
only the embedded store promises (a file that persists, a clear refusal when not installed, other
tables left alone).

The builders live here because pytest runs with --import-mode=importlib: test modules cannot import
each other."""
from __future__ import annotations

import hashlib
import random
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Mapping, Sequence

import igraph
import leidenalg
import pytest

from hansa.adapters.graph.base import GraphStats, GraphStore, LeidenParams
from hansa.adapters.graph.embedded import SCHEMA_VERSION, TABLES as EMBEDDED_TABLES, EmbeddedGraphStore
from hansa.adapters.records import (
    Chunk,
    Community,
    CommunityAssignment,
    Document,
    DocumentGraph,
    Entity,
    Mention,
)
from hansa.core.errors import BackendError, InputError


# -- builders -----------------------------------------------------------------------------------
def doc(
    doc_id: str,
    chunks: Mapping[str, Sequence[str]],
    *,
    version: str = "v1",
    title: str | None = None,
    names: Mapping[str, str] | None = None,
    texts: Mapping[str, str] | None = None,
) -> DocumentGraph:
    """A small DocumentGraph: `chunks` maps chunk id -> the entity ids it mentions (in order), so
    two entities relate with the number of chunks that mention both; entities are all ids used,
    named `names[id]` (default: the id upper-cased)."""
    names = names or {}
    texts = texts or {}
    chunk_records, mentions, pos = [], [], 0
    for ordinal, (chunk_id, entity_ids) in enumerate(chunks.items()):
        text = texts.get(chunk_id, f"{version} text of {chunk_id} about " + ", ".join(entity_ids))
        chunk_records.append(Chunk(id=chunk_id, doc_id=doc_id, ordinal=ordinal, text=text, start=pos, end=pos + len(text)))
        pos += len(text)
        mentions.extend(Mention(chunk_id=chunk_id, entity_id=e, count=1 + i) for i, e in enumerate(entity_ids))
    used = [m.entity_id for m in mentions]
    entities = tuple(Entity(id=e, name=names.get(e, e.upper()), kind="concept") for e in dict.fromkeys(used))
    sha = hashlib.sha256(f"{doc_id}/{version}".encode()).hexdigest()
    title = title if title is not None else f"Title of {doc_id}"
    document = Document(id=doc_id, title=title, source=f"src/{doc_id}", sha256=sha)
    return DocumentGraph(document, tuple(chunk_records), entities, tuple(mentions))


def all_chunk_ids(*graphs: DocumentGraph) -> list[str]:
    return [c.id for g in graphs for c in g.chunks]


def all_entity_ids(*graphs: DocumentGraph) -> list[str]:
    return sorted({e.id for g in graphs for e in g.entities})


def partition(assignments: Sequence[CommunityAssignment], level: int = -1) -> set[frozenset[str]]:
    """Communities at one level as sets of entity ids (community numbers are arbitrary)."""
    groups: dict[int, set[str]] = {}
    for a in assignments:
        groups.setdefault(a.communities[level], set()).add(a.entity_id)
    return {frozenset(g) for g in groups.values()}


def snapshot(store: GraphStore, graphs: Sequence[DocumentGraph]) -> tuple:
    """Everything the port can read back about `graphs`: equal snapshots mean equal contents."""
    chunk_ids = all_chunk_ids(*graphs)
    entity_ids = all_entity_ids(*graphs)
    return (
        store.stats(),
        store.document_hashes([g.document.id for g in graphs]),
        store.chunks(chunk_ids),
        store.expand(chunk_ids[:1], limit=50),
        store.community_context(entity_ids, max_entities=100, max_relations=100, max_chunks=100),
        partition(store.detect_communities(LeidenParams())),
    )


# Two documents sharing entity "b" (relations a-b, b-c and b-d, one chunk each).
DOC1 = doc("doc1", {"c1": ["a", "b"], "c2": ["b", "c"]})
DOC2 = doc("doc2", {"c3": ["b", "d"]}, names={"b": "b as doc2 writes it"})



TWO_CLIQUES_A = ["a1", "a2", "a3", "a4", "a5"]
TWO_CLIQUES_B = ["b1", "b2", "b3", "b4", "b5"]


def two_cliques() -> list[DocumentGraph]:
    """Two 5-cliques (three chunks mention each whole clique: weight 3) joined by one weak edge
    (one chunk mentions a1 and b1); `swing` shares a chunk with a1 once and with b1 in three
    documents (summed, it belongs with B); `lonely` is mentioned alone, so it has no relation."""
    return [
        doc("da", {"ca1": TWO_CLIQUES_A, "ca2": TWO_CLIQUES_A, "ca3": TWO_CLIQUES_A, "cab": ["a1", "b1"],
                   "cas": ["swing", "a1"]}),
        doc("db", {"cb1": TWO_CLIQUES_B, "cb2": TWO_CLIQUES_B, "cb3": TWO_CLIQUES_B, "cbs": ["swing", "b1"],
                   "cl": ["lonely"]}),
        doc("dx", {"cx": ["swing", "b1"]}),
        doc("dy", {"cy": ["swing", "b1"]}),
    ]


def planted(groups: int = 8, size: int = 12, seed: int = 5) -> list[DocumentGraph]:
    """`groups` communities of `size` entities (dense inside: 2 x size chunks each mention three
    members) in a ring, each tied to the next by one chunk: Leiden runs several levels on it."""
    rng = random.Random(seed)
    docs = []
    for g in range(groups):
        members = [f"g{g}e{i}" for i in range(size)]
        following = [f"g{(g + 1) % groups}e{i}" for i in range(size)]
        chunks = {f"g{g}c{j}": rng.sample(members, 3) for j in range(2 * size)}
        chunks[f"g{g}x"] = [rng.choice(members), rng.choice(following)]
        docs.append(doc(f"planted{g}", chunks))
    return docs


def labels(groups: set[frozenset[str]] | Sequence[frozenset[str]]) -> dict[str, int]:
    return {e: i for i, members in enumerate(sorted(groups, key=min)) for e in members}


# -- lifecycle ----------------------------------------------------------------------------------
def test_install_is_idempotent(graph_store: GraphStore) -> None:
    first = graph_store.install()
    again = graph_store.install()
    assert again.created is False
    assert again.schema_version == first.schema_version >= 1
    assert again.backend == first.backend == graph_store.backend
    assert again.server_version and again.gds_version
    assert graph_store.stats() == GraphStats(0, 0, 0, 0, 0)


# -- documents ----------------------------------------------------------------------------------
def test_write_documents_and_stats(graph_store: GraphStore) -> None:
    graph_store.write_documents([DOC1, DOC2])
    # entities a, b, c, d (b merged across documents); relations a-b, b-c and b-d
    assert graph_store.stats() == GraphStats(documents=2, chunks=3, entities=4, relations=3, communities=0)
    assert graph_store.document_hashes(["doc1", "doc2", "nope"]) == {
        "doc1": DOC1.document.sha256,
        "doc2": DOC2.document.sha256,
    }
    # entities merge by id and keep the name they were first seen with
    assert graph_store.community_context(["b"]).entities == (("b", "B", 0.0),)
    hit = graph_store.chunks(["c3"])[0]
    assert (hit.chunk_id, hit.doc_id, hit.title, hit.text, hit.score) == ("c3", "doc2", "Title of doc2", DOC2.chunks[0].text, 0.0)


def test_rewriting_the_same_graph_changes_nothing(graph_store: GraphStore) -> None:
    graph_store.write_documents([DOC1, DOC2])
    before = snapshot(graph_store, [DOC1, DOC2])
    graph_store.write_documents([DOC1])
    graph_store.write_documents([DOC2, DOC1])
    assert snapshot(graph_store, [DOC1, DOC2]) == before


def test_replacing_a_document_removes_its_old_contribution(graph_store: GraphStore) -> None:
    graph_store.write_documents([DOC1, DOC2])
    doc1_v2 = doc("doc1", {"c9": ["a", "b"]}, version="v2", title="New title")
    graph_store.write_documents([doc1_v2])

    # c is gone (only the old doc1 used it); a, b, d remain; relations a-b (c9) and b-d (c3)
    assert graph_store.stats() == GraphStats(documents=2, chunks=2, entities=3, relations=2, communities=0)
    assert graph_store.document_hashes(["doc1"]) == {"doc1": doc1_v2.document.sha256}
    assert graph_store.chunks(["c1", "c2"]) == []
    new = graph_store.chunks(["c9"])[0]
    assert (new.title, new.text) == ("New title", doc1_v2.chunks[0].text)
    context = graph_store.community_context(["a", "b", "c"])
    assert [e[0] for e in context.entities] == ["a", "b"]  # c no longer exists
    assert context.relations == (("A", "B", 1.0),)  # not 2.0: the old chunk c1 went with its document
    # old mentions are gone: c3 (b, d) now reaches only c9 through b
    assert [h.chunk_id for h in graph_store.expand(["c3"])] == ["c9"]


def test_document_chunk_ids_are_the_stored_versions(graph_store: GraphStore) -> None:
    graph_store.write_documents([DOC1, DOC2])
    assert graph_store.document_chunk_ids(["doc1", "nope"]) == {c.id for c in DOC1.chunks}
    assert graph_store.document_chunk_ids(["doc1", "doc2"]) == {c.id for c in DOC1.chunks + DOC2.chunks}
    assert graph_store.document_chunk_ids([]) == set()
    graph_store.write_documents([doc("doc1", {"c9": ["a", "b"]}, version="v2")])
    assert graph_store.document_chunk_ids(["doc1"]) == {"c9"}


def test_delete_documents_drops_orphans_and_keeps_shared_entities(graph_store: GraphStore) -> None:
    graph_store.write_documents([DOC1, DOC2])
    graph_store.delete_documents(["doc1", "unknown-doc"])

    assert graph_store.stats() == GraphStats(documents=1, chunks=1, entities=2, relations=1, communities=0)
    assert graph_store.document_hashes(["doc1", "doc2"]) == {"doc2": DOC2.document.sha256}
    assert graph_store.chunks(["c1", "c2", "c3"]) == graph_store.chunks(["c3"])
    context = graph_store.community_context(["a", "b", "c", "d"])
    assert sorted(e[0] for e in context.entities) == ["b", "d"]
    assert [c.chunk_id for c in context.chunks] == ["c3"]

    graph_store.delete_documents(["doc2"])
    assert graph_store.stats() == GraphStats(0, 0, 0, 0, 0)


def test_chunks_in_given_order_skipping_unknown_ids(graph_store: GraphStore) -> None:
    graph_store.write_documents([DOC1, DOC2])
    hits = graph_store.chunks(["c3", "missing", "c1", "c2"])
    assert [(h.chunk_id, h.doc_id) for h in hits] == [("c3", "doc2"), ("c1", "doc1"), ("c2", "doc1")]
    assert all(h.score == 0.0 for h in hits)
    assert graph_store.chunks([]) == []


def test_chunk_texts_pages_every_chunk_in_id_order(graph_store: GraphStore) -> None:
    graphs = [
        doc("d1", {"k3": ["a"], "k1": ["b"], "k5": ["a", "b"]}),
        doc("d2", {"k2": ["c"], "k6": ["a"]}),
        doc("d3", {"k4": ["d"]}, texts={"k4": "Straße: 'quoted' $after\n"}),
    ]
    graph_store.write_documents(graphs)
    expected = sorted((c.id, c.doc_id, c.text) for g in graphs for c in g.chunks)
    pages, after = [], None
    while page := graph_store.chunk_texts(after=after, limit=2):
        assert len(page) <= 2
        pages.append(page)
        after = page[-1][0]
    assert [row for page in pages for row in page] == expected
    assert len(pages) == 3
    assert graph_store.chunk_texts() == expected
    assert graph_store.chunk_texts(after="k2", limit=2) == expected[2:4]
    assert graph_store.chunk_texts(after="k6") == []
    assert graph_store.chunk_texts(limit=0) == []


def test_a_bad_batch_writes_nothing(graph_store: GraphStore) -> None:
    good = doc("good", {"g1": ["x", "y"]})
    bad = doc("bad", {"b1": ["x"]})
    bad = DocumentGraph(bad.document, bad.chunks, bad.entities, bad.mentions + (Mention("b1", "not-listed"),))
    with pytest.raises(InputError, match="not-listed"):
        graph_store.write_documents([good, bad])
    assert graph_store.stats() == GraphStats(0, 0, 0, 0, 0)
    assert graph_store.document_hashes(["good", "bad"]) == {}


def test_a_chunk_id_owned_by_another_document_is_refused_and_nothing_written(graph_store: GraphStore) -> None:
    graph_store.write_documents([DOC1])
    before = snapshot(graph_store, [DOC1])
    thief = doc("thief", {"c1": ["z"]})  # c1 belongs to doc1
    with pytest.raises(InputError, match="(?i)nothing was written"):
        graph_store.write_documents([doc("fine", {"f1": ["y"]}), thief])
    assert snapshot(graph_store, [DOC1]) == before
    assert graph_store.document_hashes(["fine", "thief"]) == {}
    assert graph_store.stats() == GraphStats(documents=1, chunks=2, entities=3, relations=2, communities=0)


def test_documents_without_chunks_and_chunks_without_mentions_are_kept(graph_store: GraphStore) -> None:
    """The documents, their chunks and their mentions are written together (one statement on
    Neo4j): a document with nothing in it, or a chunk naming no entity, must not be lost."""
    empty = doc("empty", {})
    quiet = doc("quiet", {"q1": [], "q2": ["a", "b"], "q3": []})
    graph_store.write_documents([empty, quiet, DOC2])
    assert graph_store.stats() == GraphStats(documents=3, chunks=4, entities=3, relations=2, communities=0)
    assert set(graph_store.document_hashes(["empty", "quiet"])) == {"empty", "quiet"}
    assert [h.chunk_id for h in graph_store.chunks(["q1", "q2", "q3"])] == ["q1", "q2", "q3"]
    assert graph_store.document_chunk_ids(["quiet"]) == {"q1", "q2", "q3"}


# -- graph --------------------------------------------------------------------------------------
def test_expand_ranks_by_relation_weight_and_excludes_seeds(graph_store: GraphStore) -> None:
    seed = doc("s", {"seed": ["a", "b", "c"]})
    other = doc(
        "o",
        {
            "strong": ["a", "z"],  # shares a: tied to the seeds' b (two chunks) and c (one): 3
            "weak": ["c", "y"],  # shares c: tied to the seeds' a and b, one chunk each: 2
            "unrelated": ["y", "z"],  # shares nothing with the seeds
            "seed2": ["a", "b"],  # a second seed
        },
    )
    graph_store.write_documents([seed, other])
    hits = graph_store.expand(["seed", "seed2"], limit=10)
    assert [h.chunk_id for h in hits] == ["strong", "weak"]
    assert all(h.via == "graph" for h in hits)
    assert hits[0].score > hits[1].score
    assert (hits[0].doc_id, hits[0].title, hits[0].text) == ("o", "Title of o", other.chunks[0].text)
    assert [h.chunk_id for h in graph_store.expand(["seed"], limit=1)] == ["seed2"]  # shares a and b: 3 + 3
    assert graph_store.expand(["missing"]) == []


def test_detect_communities_separates_two_cliques(graph_store: GraphStore) -> None:
    graph_store.write_documents(two_cliques())
    assignments = graph_store.detect_communities(LeidenParams(gamma=1.0, seed=7))

    assert sorted(a.entity_id for a in assignments) == sorted(TWO_CLIQUES_A + TWO_CLIQUES_B + ["swing"])  # no "lonely"
    levels = {len(a.communities) for a in assignments}
    assert len(levels) == 1 and levels.pop() >= 1
    assert partition(assignments, level=-1) == {frozenset(TWO_CLIQUES_A), frozenset(TWO_CLIQUES_B + ["swing"])}
    for level in range(len(assignments[0].communities)):  # finer levels never mix the cliques
        for group in partition(assignments, level):
            assert group <= set(TWO_CLIQUES_A) or group <= set(TWO_CLIQUES_B + ["swing"])


def test_detect_communities_is_reproducible_with_a_seed(graph_store: GraphStore) -> None:
    graph_store.write_documents(two_cliques())
    params = LeidenParams(gamma=1.0, seed=11)
    first = sorted(graph_store.detect_communities(params), key=lambda a: a.entity_id)
    second = sorted(graph_store.detect_communities(params), key=lambda a: a.entity_id)
    assert [partition(first, lvl) for lvl in range(len(first[0].communities))] == [
        partition(second, lvl) for lvl in range(len(second[0].communities))
    ]


def test_detect_communities_on_a_graph_without_relations(graph_store: GraphStore) -> None:
    assert graph_store.detect_communities(LeidenParams()) == []
    graph_store.write_documents([doc("solo", {"s1": ["alone"]})])
    assert graph_store.detect_communities(LeidenParams()) == []


def test_replace_communities_round_trip_and_replacement(graph_store: GraphStore) -> None:
    graph_store.write_documents([DOC1, DOC2])
    first = [
        Community(id="k2", level=1, entity_ids=("a", "b", "c", "d"), summary="all", rank=2.5),
        Community(id="k1", level=0, entity_ids=("c", "a", "b"), summary="abc", chunk_ids=("c1", "c2"), doc_ids=("doc1",),
                  rank=1.0, parent="k2"),
        Community(id="k0", level=0, entity_ids=("d",), summary="", chunk_ids=("c3",), doc_ids=("doc2",), parent="k2"),
    ]
    graph_store.replace_communities(first)
    assert graph_store.communities() == sorted(first, key=lambda c: (c.level, c.id))
    assert graph_store.stats().communities == 3

    second = [Community(id="k9", level=0, entity_ids=("b", "d"), summary="bd", rank=0.5)]
    graph_store.replace_communities(second)
    assert graph_store.communities() == second
    graph_store.replace_communities([])
    assert graph_store.communities() == []


def test_bad_communities_are_refused(graph_store: GraphStore) -> None:
    graph_store.write_documents([DOC1])
    kept = [Community(id="k", level=0, entity_ids=("a", "b"))]
    graph_store.replace_communities(kept)
    with pytest.raises(InputError, match="twice"):
        graph_store.replace_communities(
            [Community(id="j", level=0, entity_ids=("a",)), Community(id="j", level=0, entity_ids=("b",))]
        )
    assert graph_store.communities() == kept
    with pytest.raises(InputError, match="not a community of level 1"):  # a parent link to nothing
        graph_store.replace_communities([Community(id="j", level=0, entity_ids=("a",), parent="missing")])
    with pytest.raises(InputError, match="members its parent"):  # a parent lacking a child's member
        graph_store.replace_communities([Community(id="j", level=0, entity_ids=("a", "b"), parent="p"),
                                         Community(id="p", level=1, entity_ids=("a",))])
    with pytest.raises(InputError, match="not a community of level 1"):  # a parent two levels up
        graph_store.replace_communities([Community(id="j", level=0, entity_ids=("a",), parent="p"),
                                         Community(id="p", level=2, entity_ids=("a",))])
    assert graph_store.communities() == kept


def test_community_context_picks_the_high_degree_entity_first(graph_store: GraphStore) -> None:
    names = {"hub": "Hub", "x": "Ex", "y": "Why", "z": "Zed", "out": "Outside"}
    d1 = doc(
        "ctx1",
        {"k1": ["hub", "x", "y"], "k2": ["z", "hub"], "k3": ["z"], "k4": ["out"], "k6": ["x", "out"], "k7": ["x", "out"]},
        names=names,
    )
    d2 = doc("ctx2", {"k5": ["hub", "x"]}, names=names, title="Second")
    graph_store.write_documents([d1, d2])

    context = graph_store.community_context(["x", "hub", "y", "z", "ghost"])
    # weighted degree inside the set: hub 2+1+1, x 2+1, y 1+1, z 1 (x-out, 2, is outside the set)
    assert context.entities == (("hub", "Hub", 4.0), ("x", "Ex", 3.0), ("y", "Why", 2.0), ("z", "Zed", 1.0))
    assert context.relations[0] == ("Hub", "Ex", 2.0)  # k1 and k5: summed over both documents
    assert sorted(context.relations[1:]) == [("Ex", "Why", 1.0), ("Hub", "Why", 1.0), ("Hub", "Zed", 1.0)]
    # k1 mentions three of the set, k2 and k5 two each, k3, k6 and k7 one; k4 none (only "out")
    ranked = [c.chunk_id for c in context.chunks]
    assert ranked[0] == "k1" and set(ranked[1:3]) == {"k2", "k5"} and set(ranked[3:]) == {"k3", "k6", "k7"}
    assert {c.chunk_id: c.title for c in context.chunks}["k5"] == "Second"

    small = graph_store.community_context(["x", "hub", "y", "z"], max_entities=1, max_relations=1, max_chunks=1)
    assert small.entities == (("hub", "Hub", 4.0),)
    assert small.relations == (("Hub", "Ex", 2.0),)
    assert [c.chunk_id for c in small.chunks] == ["k1"]


HOSTILE = [
    "it's \"quoted\"",
    "`backtick` name",
    "'}) DETACH DELETE n //",
    "\"}) MATCH (m) DETACH DELETE m RETURN 1 //",
    "Ünïcödé — 漢字 — 🚀 — עברית",
    "line one\nline two\r\nline three\ttab",
    "back\\slash $param {curly} ; DROP TABLE hansa_documents; --",
]


def test_hostile_strings_round_trip_verbatim(graph_store: GraphStore) -> None:
    graphs = []
    for i, s in enumerate(HOSTILE):
        e1, e2 = f"{s} #1", f"{s} #2"
        chunk_id = f"{s} chunk{i}"
        graphs.append(
            doc(f"{s} doc{i}", {chunk_id: [e1, e2]}, title=s, names={e1: s, e2: s + "!"}, texts={chunk_id: s})
        )
    graph_store.write_documents(graphs)
    assert graph_store.stats() == GraphStats(len(HOSTILE), len(HOSTILE), 2 * len(HOSTILE), len(HOSTILE), 0)

    expected_hashes = {g.document.id: g.document.sha256 for g in graphs}
    assert graph_store.document_hashes(list(expected_hashes)) == expected_hashes
    hits = graph_store.chunks(all_chunk_ids(*graphs))
    assert [(h.chunk_id, h.doc_id, h.title, h.text) for h in hits] == [
        (g.chunks[0].id, g.document.id, s, s) for g, s in zip(graphs, HOSTILE)
    ]
    for g, s in zip(graphs, HOSTILE):
        context = graph_store.community_context([e.id for e in g.entities])
        assert sorted(e[:2] for e in context.entities) == sorted((e.id, e.name) for e in g.entities)
        assert sorted(context.relations[0][:2]) == sorted([s, s + "!"])

    communities = [
        Community(
            id=f"{s} k",
            level=0,
            entity_ids=tuple(e.id for e in g.entities),
            summary=s,
            chunk_ids=(g.chunks[0].id,),
            doc_ids=(g.document.id,),
        )
        for g, s in zip(graphs, HOSTILE)
    ]
    graph_store.replace_communities(communities)
    assert graph_store.communities() == sorted(communities, key=lambda c: (c.level, c.id))
    assignments = graph_store.detect_communities(LeidenParams())
    assert {a.entity_id for a in assignments} == set(all_entity_ids(*graphs))

    graph_store.delete_documents([g.document.id for g in graphs])
    assert graph_store.stats().documents == 0


# -- embedded store only ---------------------------------------------------------------------
def test_embedded_fresh_install_reports_what_it_created(tmp_path: Path) -> None:
    with EmbeddedGraphStore(tmp_path / "deep" / "graph.sqlite") as store:
        report = store.install()
    assert report.created is True
    assert report.backend == "embedded"
    assert report.schema_version == SCHEMA_VERSION
    assert report.server_version == sqlite3.sqlite_version
    assert report.gds_version == f"leidenalg {leidenalg.version}"


def test_embedded_contents_persist_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "graph.sqlite"
    with EmbeddedGraphStore(path) as store:
        store.install()
        store.write_documents([DOC1, DOC2])
    with EmbeddedGraphStore(path) as store:
        assert store.install().created is False
        assert store.stats() == GraphStats(documents=2, chunks=3, entities=4, relations=3, communities=0)
        assert store.document_hashes(["doc1"]) == {"doc1": DOC1.document.sha256}


def test_embedded_uninstalled_store_refuses_with_a_clear_message(tmp_path: Path) -> None:
    with EmbeddedGraphStore(tmp_path / "graph.sqlite") as store:
        with pytest.raises(BackendError, match="hansa install"):
            store.stats()


def test_embedded_not_a_database_is_a_backend_error(tmp_path: Path) -> None:
    path = tmp_path / "graph.sqlite"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(BackendError):
        with EmbeddedGraphStore(path) as store:
            store.install()


def test_embedded_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "graph.sqlite"
    with EmbeddedGraphStore(path) as store:
        store.install()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE hansa_schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    with EmbeddedGraphStore(path) as store:
        with pytest.raises(BackendError, match="newer"):
            store.install()


def test_embedded_other_tables_in_the_file_are_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "graph.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE documents (id TEXT PRIMARY KEY, body TEXT)")
        db.execute("INSERT INTO documents VALUES ('doc1', 'the organization''s own row')")
    with EmbeddedGraphStore(path) as store:
        store.install()
        store.write_documents([DOC1])
        store.delete_documents(["doc1"])
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT body FROM documents").fetchall() == [("the organization's own row",)]


def test_embedded_leiden_returns_one_level(tmp_path: Path) -> None:
    with EmbeddedGraphStore(tmp_path / "graph.sqlite") as store:
        store.install()
        store.write_documents(two_cliques())
        assignments = store.detect_communities(LeidenParams(max_levels=5))
    assert {len(a.communities) for a in assignments} == {1}


# -- site claim, sources, pages, seeded Leiden, uninstall (both backends) ------------------------
def test_a_store_is_claimed_by_one_site_and_refuses_another(graph_store: GraphStore) -> None:
    assert graph_store.installed_site() is None  # installed without a site: unclaimed
    graph_store.install("site-a")
    assert graph_store.installed_site() == "site-a"
    assert graph_store.install("site-a").created is False  # the same site again: idempotent
    graph_store.write_documents([DOC1])
    with pytest.raises(BackendError, match="already holds .*site 'site-a'") as err:
        graph_store.install("site-b")
    assert "site-b" in str(err.value)
    assert graph_store.installed_site() == "site-a" and graph_store.stats().documents == 1  # nothing changed


def test_documents_by_source_prefix(graph_store: GraphStore) -> None:
    graphs = [
        doc("kb/a.md", {"k1": ["a"]}),
        doc("kb/sub/b.md", {"k2": ["b"]}),
        doc("rec-1", {"k3": ["c"]}),
        doc("kbx/c.md", {"k4": ["d"]}),
    ]
    sources = {"kb/a.md": "kb:a.md", "kb/sub/b.md": "kb:sub/b.md", "rec-1": "kb:sub/r.jsonl", "kbx/c.md": "kbx:c.md"}
    graph_store.write_documents(
        [DocumentGraph(replace(g.document, source=sources[g.document.id]), g.chunks, g.entities, g.mentions) for g in graphs]
    )
    assert graph_store.documents_by_source("kb:") == {k: v for k, v in sources.items() if v.startswith("kb:")}
    assert graph_store.documents_by_source("kb:sub/") == {"kb/sub/b.md": "kb:sub/b.md", "rec-1": "kb:sub/r.jsonl"}
    assert graph_store.documents_by_source("nothing:") == {}
    assert len(graph_store.documents_by_source("")) == 4


def test_chunk_pages_and_document_source_come_back_with_hits(graph_store: GraphStore) -> None:
    paged = doc("rep.pdf", {"p1": ["a", "b"], "p2": ["b", "c"]})
    chunks = (replace(paged.chunks[0], page=1), replace(paged.chunks[1], page=7))
    paged = DocumentGraph(replace(paged.document, source="reports:rep.pdf"), chunks, paged.entities, paged.mentions)
    graph_store.write_documents([paged, DOC2])
    hits = {h.chunk_id: h for h in graph_store.chunks(["p1", "p2", "c3"])}
    assert (hits["p1"].page, hits["p2"].page, hits["c3"].page) == (1, 7, None)
    assert hits["p2"].source == "reports:rep.pdf" and hits["c3"].source == "src/doc2"
    assert {h.chunk_id: h.page for h in graph_store.expand(["p1"])}.get("p2") == 7
    context = graph_store.community_context(["a", "b", "c"], max_chunks=10)
    assert {c.chunk_id: c.page for c in context.chunks}["p2"] == 7


def test_seeded_leiden_starts_from_the_given_partition(graph_store: GraphStore) -> None:
    graph_store.write_documents(two_cliques())
    fresh = partition(graph_store.detect_communities(LeidenParams()))
    seeds = {e: i for i, members in enumerate(sorted(fresh, key=min)) for e in members}
    seeded = graph_store.detect_communities(LeidenParams(), seeds=seeds)
    assert partition(seeded) == fresh  # a stable partition stays as it was
    # seeds for only some entities: the others start alone and still find their clique
    partial = {e: c for e, c in seeds.items() if e.startswith("a")}
    assert partition(graph_store.detect_communities(LeidenParams(), seeds=partial)) == fresh
    assert graph_store.stats().entities == len(all_entity_ids(*two_cliques()))  # seeding left no trace in the data


def test_seeded_leiden_stays_as_good_as_unseeded(graph_store: GraphStore) -> None:
    """Seeded from an unseeded run's partition, as is and with one entity in ten moved at random
    (an incremental run after a small change), Leiden must find a partition as good: GDS 2.13
    mislabels the levels after the first of a seeded run (they merged unrelated communities: issue
    34), which hansa must not publish."""
    graph_store.write_documents(planted())
    for gamma in (1.0, 8.0):
        params = LeidenParams(gamma=gamma)
        fresh = partition(graph_store.detect_communities(params))
        q_fresh = graph_store.modularity(labels(fresh), gamma)
        rng = random.Random(1)
        moved = dict(labels(fresh))
        for entity in rng.sample(sorted(moved), len(moved) // 10):
            moved[entity] = rng.randrange(len(fresh))
        for seeds in (labels(fresh), moved):
            seeded = partition(graph_store.detect_communities(params, seeds=seeds))
            assert graph_store.modularity(labels(seeded), gamma) >= 0.95 * q_fresh, (gamma, len(seeded), len(fresh))
            assert max(map(len, seeded)) <= 2 * max(map(len, fresh)), (gamma, sorted(map(len, seeded)))


def test_leiden_within_a_set_clusters_it_as_the_whole_graph_does(graph_store: GraphStore) -> None:
    """A local community refresh runs Leiden on the touched part of the graph only: at the site's
    resolution scaled to that subgraph (quality.region_resolution) it must find what a run on the
    whole graph finds there. Unscaled, gamma 8 on three of eight planted groups splits them."""
    graph_store.write_documents(planted())
    region = {f"g{g}e{i}" for g in range(3) for i in range(12)}
    for gamma in (1.0, 8.0):
        params = LeidenParams(gamma=gamma)
        fresh = partition(graph_store.detect_communities(params))
        within = partition(graph_store.detect_communities(params, within=region))
        assert within == {m & region for m in fresh if m & region}, gamma
        outside = [m for m in fresh if not m & region]
        q = graph_store.modularity(labels(outside + sorted(within, key=min)), gamma)
        assert q >= 0.95 * graph_store.modularity(labels(fresh), gamma)
    assert graph_store.detect_communities(LeidenParams(), within={"g0e0", "g5e5"}) == []  # no relation inside
    with pytest.raises(InputError):
        graph_store.detect_communities(LeidenParams(), seeds={"g0e0": 0}, within=region)


def test_document_entities_are_what_the_documents_mention(graph_store: GraphStore) -> None:
    graph_store.write_documents(two_cliques())
    assert graph_store.document_entities(["da", "nope"]) == set(TWO_CLIQUES_A) | {"b1", "swing"}
    assert graph_store.document_entities(["dx", "dy"]) == {"swing", "b1"}
    assert graph_store.document_entities([]) == set()


def test_related_entities_are_those_leiden_assigns(graph_store: GraphStore) -> None:
    """What a local community refresh reads instead of running Leiden over the whole graph."""
    assert graph_store.related_entities() == set()
    graph_store.write_documents(two_cliques())
    assigned = {a.entity_id for a in graph_store.detect_communities(LeidenParams())}
    assert graph_store.related_entities() == assigned == set(all_entity_ids(*two_cliques())) - {"lonely"}


def test_modularity_scores_a_partition_as_igraph_does(graph_store: GraphStore) -> None:
    graph_store.write_documents(two_cliques())
    # The graph two_cliques() defines, built independently: each clique's pairs weigh 3.
    pairs = [(a, b, 3.0) for clique in (TWO_CLIQUES_A, TWO_CLIQUES_B) for i, a in enumerate(clique) for b in clique[i + 1:]]
    pairs += [("a1", "b1", 1.0), ("a1", "swing", 1.0), ("b1", "swing", 3.0)]
    names = sorted({e for a, b, _ in pairs for e in (a, b)})
    reference = igraph.Graph(n=len(names), edges=[(names.index(a), names.index(b)) for a, b, _ in pairs])
    weights = [w for _, _, w in pairs]
    cliques = {**{e: 0 for e in TWO_CLIQUES_A}, **{e: 1 for e in TWO_CLIQUES_B + ["swing"]}}
    for gamma in (1.0, 8.0):
        for part in (cliques, {e: 0 for e in names}, {e: i for i, e in enumerate(names)}):
            expected = reference.modularity([part[e] for e in names], weights=weights, resolution=gamma)
            assert graph_store.modularity(part, gamma) == pytest.approx(expected, abs=1e-9)
    # entities the partition leaves out count alone ("lonely" has no relation and counts for nothing)
    assert graph_store.modularity({}, 1.0) == pytest.approx(graph_store.modularity({e: i for i, e in enumerate(names)}, 1.0))
    assert graph_store.modularity(cliques, 1.0) > 0.4


def test_uninstall_removes_everything_hansa_and_allows_a_new_install(graph_store: GraphStore) -> None:
    graph_store.install("site-a")
    graph_store.write_documents([DOC1, DOC2])
    report = graph_store.uninstall()
    assert report.site_id == "site-a" and report.nodes > 0 and report.schema
    with pytest.raises(BackendError, match="install"):
        graph_store.stats()
    assert graph_store.installed_site() is None
    graph_store.install("site-b")  # the store is free again
    assert graph_store.installed_site() == "site-b" and graph_store.stats() == GraphStats(0, 0, 0, 0, 0)


def test_embedded_uninstall_keeps_the_organizations_tables(tmp_path: Path) -> None:
    path = tmp_path / "graph.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE documents (id TEXT PRIMARY KEY, body TEXT)")
        db.execute("CREATE INDEX documents_body ON documents(body)")
        db.execute("INSERT INTO documents VALUES ('doc1', 'kept')")
    with EmbeddedGraphStore(path) as store:
        store.install("site-a")
        store.write_documents([DOC1])
        report = store.uninstall()
    assert set(report.schema) == set(EMBEDDED_TABLES)
    with sqlite3.connect(path) as db:
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
        assert names == {"documents", "documents_body", "sqlite_autoindex_documents_1"}
        assert db.execute("SELECT body FROM documents").fetchall() == [("kept",)]


def as_older(path: Path, version: int, *statements: str) -> None:
    """Make a current store exactly what schema `version` left: `statements` undo the later changes."""
    with sqlite3.connect(path) as db:
        for statement in statements:
            db.execute(statement)
        db.execute("UPDATE hansa_schema_version SET version = ?", (version,))


def refused_then_upgraded(store: EmbeddedGraphStore, version: int) -> None:
    """An older store is refused until `install` upgrades it."""
    with pytest.raises(BackendError, match=f"schema version {version}"):
        store.stats()
    assert store.install("site-a").created is True


def test_embedded_v1_store_is_upgraded_by_install(tmp_path: Path) -> None:
    """A store written by schema v1 (no page column, no site): install upgrades it in place."""
    path = tmp_path / "graph.sqlite"
    with EmbeddedGraphStore(path) as store:
        store.install()
        store.write_documents([DOC1])
    as_older(path, 1, "ALTER TABLE hansa_chunks DROP COLUMN page", "ALTER TABLE hansa_schema_version DROP COLUMN site_id",
             "ALTER TABLE hansa_communities DROP COLUMN parent")
    with EmbeddedGraphStore(path) as store:
        refused_then_upgraded(store, 1)
        assert store.installed_site() == "site-a"
        assert [h.page for h in store.chunks(["c1"])] == [None]
        assert store.stats().documents == 1


# Schema v2's relation table, as v2 created it (v3 derives relations from the mentions instead).
V2_RELATIONS = """
CREATE TABLE hansa_relations (
    source TEXT NOT NULL REFERENCES hansa_entities(id),
    target TEXT NOT NULL REFERENCES hansa_entities(id),
    doc_id TEXT NOT NULL REFERENCES hansa_documents(id) ON DELETE CASCADE,
    weight REAL NOT NULL,
    description TEXT NOT NULL,
    PRIMARY KEY (source, target, doc_id)
) WITHOUT ROWID;
CREATE INDEX hansa_relations_target ON hansa_relations(target);
CREATE INDEX hansa_relations_doc ON hansa_relations(doc_id);
"""


def make_embedded_v2(path: Path, graphs: Sequence[DocumentGraph]) -> None:
    """A store as schema v2 left it: the same rows, plus one stored relation per pair and document."""
    with sqlite3.connect(path) as db:
        db.executescript(V2_RELATIONS)
        db.executemany(
            "INSERT INTO hansa_relations VALUES (?, ?, ?, ?, '')",
            [(a, b, g.document.id, float(n)) for g in graphs for (a, b), n in g.co_mentions().items()],
        )
        db.execute("ALTER TABLE hansa_communities DROP COLUMN parent")
        db.execute("UPDATE hansa_schema_version SET version = 2")


def test_embedded_v2_store_is_upgraded_by_install_its_stored_relations_dropped(tmp_path: Path) -> None:
    path = tmp_path / "graph.sqlite"
    with EmbeddedGraphStore(path) as store:
        store.install("site-a")
        store.write_documents([DOC1, DOC2])
        before = snapshot(store, [DOC1, DOC2])
    make_embedded_v2(path, [DOC1, DOC2])
    with EmbeddedGraphStore(path) as store:
        with pytest.raises(BackendError, match="schema version 2"):
            store.stats()
        assert store.install("site-a").created is True
        assert snapshot(store, [DOC1, DOC2]) == before
        store.delete_documents(["doc1"])  # the relations' rows would have kept doc1's entities
        assert store.stats() == GraphStats(documents=1, chunks=1, entities=2, relations=1, communities=0)
    with sqlite3.connect(path) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'index')")}
        assert not {"hansa_relations", "hansa_relations_target", "hansa_relations_doc"} & tables
        assert db.execute("SELECT version FROM hansa_schema_version").fetchone() == (SCHEMA_VERSION,)


def test_embedded_v3_store_is_upgraded_by_install_its_communities_kept_as_tops(tmp_path: Path) -> None:
    path = tmp_path / "graph.sqlite"
    with EmbeddedGraphStore(path) as store:
        store.install("site-a")
        store.write_documents([DOC1])
        kept = [Community(id="k", level=0, entity_ids=("a", "b"), summary="ab")]
        store.replace_communities(kept)
    as_older(path, 3, "ALTER TABLE hansa_communities DROP COLUMN parent")
    with EmbeddedGraphStore(path) as store:
        refused_then_upgraded(store, 3)
        assert store.communities() == kept and kept[0].parent == ""


def test_embedded_uninstall_of_a_v2_store_drops_its_relation_table_too(tmp_path: Path) -> None:
    path = tmp_path / "graph.sqlite"
    with EmbeddedGraphStore(path) as store:
        store.install()
        store.write_documents([DOC1])
    make_embedded_v2(path, [DOC1])
    with EmbeddedGraphStore(path) as store:
        report = store.uninstall()
    assert "hansa_relations" in report.schema and set(report.schema) == set(EMBEDDED_TABLES) | {"hansa_relations"}
    with sqlite3.connect(path) as db:
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE name LIKE 'hansa%'")] == []
