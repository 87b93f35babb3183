"""How `hansa site map` turns one organization document into hansa's document graph (no database:
plugin/graph_map.document_graph_of). The whole path on a real Neo4j: test_graph_map_neo4j.py."""
from __future__ import annotations

from types import SimpleNamespace

from hansa.adapters.graph.neo4j_source import OrgDocument
from hansa.adapters.graph.validation import check_document_graphs
from hansa.core.config import Config, GraphMapConfig
from hansa.plugin.graph_map import document_graph_of

TEXT = ("Alma Okafor founded Karsholm Shipping in 1990. " * 12 + "Later, the harbour board asked Bruno Tanaka to audit it. " * 12)


def _ctx(chunk_size: int = 300) -> SimpleNamespace:
    cfg = Config()
    cfg.site.chunk_size, cfg.site.chunk_overlap = chunk_size, 0
    return SimpleNamespace(cfg=cfg)


def _mapping(extract: bool = False) -> GraphMapConfig:
    return GraphMapConfig(document_label="Doc", entity_labels=["Person", "Company"], mention_type="MENTIONS", extract=extract)


def test_mapped_entities_are_mentioned_by_the_chunks_that_name_them() -> None:
    doc = OrgDocument(id="d1", title="t", text=TEXT, entities=(
        ("Alma Okafor", ("Person",)), ("Bruno Tanaka", ("Person", "Auditor")), ("Karsholm Shipping", ("Company",)),
        ("Al", ("Person",)), ("KS-77", ("Company",))))
    graph, unplaced = document_graph_of(doc, "graph/d1", TEXT, "t", "0" * 64, _ctx(), _mapping())
    check_document_graphs([graph])  # what the store would refuse
    assert len(graph.chunks) > 2
    by_entity: dict[str, set[int]] = {}
    ordinal = {c.id: c.ordinal for c in graph.chunks}
    for m in graph.mentions:
        by_entity.setdefault(m.entity_id, set()).add(ordinal[m.chunk_id])
    first_bruno = min(c.ordinal for c in graph.chunks if "Bruno Tanaka" in c.text)
    assert by_entity["bruno tanaka"] == {c.ordinal for c in graph.chunks if "Bruno Tanaka" in c.text} and first_bruno > 0
    assert by_entity["alma okafor"] == {c.ordinal for c in graph.chunks if "Alma Okafor" in c.text}
    # "Al" is not a word of the text (only inside "Alma"), "KS-77" not at all: the first chunk, counted unplaced
    assert by_entity["al"] == {0} and by_entity["ks 77"] == {0} and unplaced == 2
    kinds = {e.id: (e.name, e.kind) for e in graph.entities}
    assert kinds["bruno tanaka"] == ("Bruno Tanaka", "Person") and kinds["karsholm shipping"][1] == "Company"
    counts = {m.entity_id: m.count for m in graph.mentions if ordinal[m.chunk_id] == 0}
    assert counts["alma okafor"] == graph.chunks[0].text.count("Alma Okafor") > 1


def test_with_extract_the_text_adds_entities_and_the_mapping_names_them() -> None:
    doc = OrgDocument(id="d1", title="t", text=TEXT, entities=(("alma okafor", ("Person",)),))
    plain, _ = document_graph_of(doc, "graph/d1", TEXT, "t", "0" * 64, _ctx(), _mapping())
    both, _ = document_graph_of(doc, "graph/d1", TEXT, "t", "0" * 64, _ctx(), _mapping(extract=True))
    check_document_graphs([both])
    assert {e.id for e in plain.entities} == {"alma okafor"}
    extracted = {e.id for e in both.entities}
    assert {"alma okafor", "bruno tanaka", "karsholm shipping"} <= extracted
    # the same key from both: one entity, with the organization's name and label
    assert [(e.name, e.kind) for e in both.entities if e.id == "alma okafor"] == [("alma okafor", "Person")]
