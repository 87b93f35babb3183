"""NLP entity extraction and co-occurrence relations (no model)."""
from __future__ import annotations

from itertools import combinations

from hansa.adapters.records import Document
from hansa.plugin.chunking import chunk_text
from hansa.plugin.extraction import document_graph
from hansa.core.entities import (
    ACRONYM,
    CONCEPT,
    MAX_ENTITIES_PER_CHUNK,
    PROPER,
    chunk_entities,
    normalize,
)

PARAGRAPH = (
    "The Federal Reserve raised interest rates on Tuesday. Mortgage rates rose as Bank of America "
    "and Wells Fargo adjusted their lending. Investors with an IRA should review their asset "
    "allocation. According to the IRS, contribution limits for the Roth IRA change every year. "
    "Jerome Powell said inflation remains high. Apple's iPhone sales were strong; GitHub users noticed."
)


def _by_id(text: str, limit: int = 50) -> dict[str, tuple[str, str, int]]:
    return {key: (name, kind, count) for key, name, kind, count in chunk_entities(text, limit)}


def test_entities_from_a_known_paragraph() -> None:
    found = _by_id(PARAGRAPH)
    assert found["federal reserve"] == ("Federal Reserve", PROPER, 1)
    assert found["bank of america"] == ("Bank of America", PROPER, 1)  # "of" joins a name
    assert found["wells fargo"][1] == PROPER  # "and" does not
    assert found["jerome powell"][1] == PROPER
    assert found["roth ira"][1] == PROPER
    assert found["ira"] == ("IRA", ACRONYM, 1)
    assert found["irs"] == ("IRS", ACRONYM, 1)
    assert found["iphone"] == ("iPhone", PROPER, 1)  # the possessive ends "Apple's"
    assert found["github"][1] == PROPER
    assert found["interest rates"] == ("interest rates", CONCEPT, 1)
    assert found["asset allocation"][1] == CONCEPT
    assert found["contribution limits"][1] == CONCEPT
    assert found["mortgage rates"][1] == CONCEPT  # capital by sentence position only
    assert _by_id("Banks in the United States raised fees.")["united states"][1] == PROPER
    for junk in ("the", "the federal reserve", "according", "said", "raised", "bank of america and wells fargo",
                 "raised interest rates", "tuesday"):
        assert junk not in found, junk


def test_counts_and_salience_order() -> None:
    text = "Leiden finds communities. Leiden is fast. The Leiden algorithm improves Louvain. Modularity is key."
    ranked = chunk_entities(text)
    assert ranked[0][:3] == ("leiden", "Leiden", PROPER)
    assert ranked[0][3] == 3
    assert {key for key, *_ in ranked} >= {"leiden", "louvain", "communities", "modularity"}


def test_cap_keeps_the_most_salient() -> None:
    names = [f"Company{chr(65 + i)} Holdings" for i in range(20)]
    text = "Members: " + ", ".join(names) + ". Later CompanyA Holdings grew, and CompanyA Holdings won."
    ranked = chunk_entities(text, limit=MAX_ENTITIES_PER_CHUNK)
    assert len(ranked) == MAX_ENTITIES_PER_CHUNK
    assert ranked[0][0] == "companya holdings" and ranked[0][3] == 3


def test_markup_urls_and_numbers_are_not_entities() -> None:
    text = (
        "See [the guide](https://cloud.ibm.com/docs/foo?topic=bar-baz) or www.example.com/x, mail "
        "admin@example.com. <br> &amp; 2024 1,000 42% 3.5"
    )
    keys = set(_by_id(text))
    assert not any("http" in k or "example" in k or "topic" in k or "amp" in k or k[:1].isdigit() for k in keys), keys
    assert "guide" in keys


def test_normalize_folds_case_space_and_punctuation() -> None:
    assert normalize("Bank  of\tAmerica.") == "bank of america"
    assert normalize("BANK OF AMERICA") == "bank of america"
    assert normalize("U.S.") == "us"
    assert normalize("O'Brien") == "obrien"
    assert normalize("state-of-the-art") == "state of the art"
    assert normalize("ｆｕｌｌｗｉｄｔｈ") == "fullwidth"  # NFKC
    assert normalize("Straße") == "strasse"  # casefold


def test_hostile_strings_survive_as_data() -> None:
    hostile = (
        "Robert'); DROP TABLE Students;-- met Mallory at \"Acme\" HQ. MATCH (n) DETACH DELETE n // "
        "<script>alert('x')</script> ${jndi:ldap://evil} {{7*7}} \u202eRTL\u202c Zalgo Ẓ̴̛a̷l̶g̷o and \x00 NUL."
    )
    entities = chunk_entities(hostile, limit=50)
    assert entities, "hostile text is still text: it has entities"
    for key, name, kind, count in entities:
        assert key == normalize(name)
        assert count >= 1 and kind in (PROPER, ACRONYM, CONCEPT)
        assert all(part.casefold() in hostile.casefold() for part in name.split()), name  # verbatim words
        assert not set(key) & set("'\";(){}<>$/\\`*=")
    keys = {key for key, *_ in entities}
    assert "robert" in keys and "mallory" in keys and "match" in keys


def test_empty_and_punctuation_only_text() -> None:
    assert chunk_entities("") == []
    assert chunk_entities("... !!! ,,, ---") == []


def test_document_graph_relations_count_chunks_where_both_appear() -> None:
    text = (
        "Alice Smith founded Acme Robotics. Alice Smith hired Bob Jones.\n\n"
        "Acme Robotics builds warehouse drones. Alice Smith leads Acme Robotics.\n\n"
        "Bob Jones studies warehouse drones at Carnegie Mellon."
    )
    doc = Document(id="d1", title="t", source="s", sha256="0" * 64)
    chunks = chunk_text("d1", text, 80, 0)
    assert len(chunks) == 3
    graph = document_graph(doc, chunks)
    assert graph.document == doc and graph.chunks == chunks
    weights = graph.co_mentions()
    assert weights[("acme robotics", "alice smith")] == 2
    assert weights[("alice smith", "bob jones")] == 1
    assert ("acme robotics", "carnegie mellon") not in weights
    # every relation is ordered and counts the chunks that mention both
    mentioned = {c.id: set() for c in chunks}
    for m in graph.mentions:
        mentioned[m.chunk_id].add(m.entity_id)
    for (a, b), n in weights.items():
        assert a < b and n == sum(1 for ids in mentioned.values() if {a, b} <= ids)
    assert graph.co_mention_count() == sum(weights.values())
    assert [e.id for e in graph.entities] == sorted({m.entity_id for m in graph.mentions})
    assert len({(m.chunk_id, m.entity_id) for m in graph.mentions}) == len(graph.mentions)


def test_relations_per_chunk_are_bounded_by_the_cap() -> None:
    words = [f"Org{i:03d} Group" for i in range(60)]
    text = " ".join(f"{w} signed." for w in words)
    doc = Document(id="d", title="t", source="s", sha256="0" * 64)
    graph = document_graph(doc, chunk_text("d", text, 5000, 0))
    assert len(graph.entities) == MAX_ENTITIES_PER_CHUNK
    assert len(graph.co_mentions()) == graph.co_mention_count() == len(list(combinations(range(MAX_ENTITIES_PER_CHUNK), 2)))


def test_extraction_is_deterministic() -> None:
    assert chunk_entities(PARAGRAPH) == chunk_entities(PARAGRAPH)


def test_wrapped_lines_keep_names_whole_but_short_lines_end_them() -> None:
    wrapped = (
        "The Brightwater Lighthouse stands on the northern cliffs of the island. Engineer Margaret\n"
        "Ellison designed it.\nToday the Lindenfeld Orchestra plays.\nKey Protect\nIBM stores keys."
    )
    keys = set(_by_id(wrapped))
    assert "engineer margaret ellison" in keys  # a soft wrap inside a long line is a space
    assert "lindenfeld orchestra" in keys and not any(k.startswith("today") for k in keys)
    assert "key protect" in keys and "key protect ibm" not in keys  # a short line is a title
