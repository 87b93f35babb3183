"""[site.graph_map]: a mapping is checked when the configuration loads, and only plain identifiers
can ever reach the Cypher text (hansa.cypher.render)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from hansa.core.config import load_config
from hansa.core.errors import ConfigError
from hansa.cypher import load, render

GOOD = """
[site.graph_map]
document_label = "Article"
document_id = "uid"
document_text = "body"
entity_labels = ["Person", "Company"]
entity_name = "name"
mention_type = "MENTIONS"
relation_types = ["WORKS_FOR"]
"""


def _load(tmp_path: Path, text: str):
    path = tmp_path / "hansa.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path, env={"HANSA_HOME": str(tmp_path)})


def test_a_mapping_loads_from_a_nested_table(tmp_path: Path) -> None:
    m = _load(tmp_path, GOOD).site.graph_map
    assert m.enabled and m.document_label == "Article" and m.entity_labels == ["Person", "Company"]
    assert m.relation_types == ["WORKS_FOR"] and m.source == "graph" and m.extract is False
    assert not load_config(env={"HANSA_HOME": str(tmp_path / "none")}).site.graph_map.enabled  # off by default


def test_the_environment_overrides_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "hansa.toml"
    path.write_text(GOOD, encoding="utf-8")
    env = {"HANSA_HOME": str(tmp_path), "HANSA_SITE_GRAPH_MAP_DOCUMENT_TEXT": "content",
           "HANSA_SITE_GRAPH_MAP_RELATION_TYPES": "WORKS_FOR, PARTNER_OF", "HANSA_SITE_GRAPH_MAP_EXTRACT": "true"}
    m = load_config(path, env=env).site.graph_map
    assert m.document_text == "content" and m.relation_types == ["WORKS_FOR", "PARTNER_OF"] and m.extract is True
    with pytest.raises(ConfigError, match=r"relation_types\[0\] = 'X\) DELETE' is not a plain identifier"):
        load_config(path, env={**env, "HANSA_SITE_GRAPH_MAP_RELATION_TYPES": "X) DELETE"})
    with pytest.raises(ConfigError, match=r"unknown key 'colour'"):
        load_config(path, env={**env, "HANSA_SITE_GRAPH_MAP_COLOUR": "blue"})


@pytest.mark.parametrize("line, message", [
    ('document_label = "Doc`) DETACH DELETE n //"', r"document_label = .* is not a plain identifier"),
    ('document_text = "body text"', r"document_text = 'body text' is not a plain identifier"),
    ('entity_labels = ["Person", "Company:Secret"]', r"entity_labels\[1\] = 'Company:Secret' is not a plain identifier"),
    ('relation_types = ["WORKS_FOR]->() DELETE x //"]', r"relation_types\[0\] .* is not a plain identifier"),
    ('entity_labels = 5', r"entity_labels must be a list"),
    ('document_id = ""', r"document_id is empty"),
    ('mention_type = ""', r"mention_type is empty"),
    ('batch_docs = 0', r"batch_docs must be an integer in \[1, 10000\]"),
    ('source = "a/b"', r"source = 'a/b'"),
    ('colour = "blue"', r"unknown key 'colour'.*document_label"),
])
def test_a_bad_mapping_is_refused_at_load_naming_the_setting(tmp_path: Path, line: str, message: str) -> None:
    key = line.split(" = ")[0]
    text = re.sub(rf"^{key} = .*$", line, GOOD, flags=re.M) if re.search(rf"^{key} = ", GOOD, re.M) else GOOD + line + "\n"
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, text)


def test_render_quotes_identifiers_and_refuses_anything_else() -> None:
    text = render("map/relations", entities=["Person", "Company"], relations=["WORKS_FOR"])
    assert "(a:`Person`|`Company`)-[r:`WORKS_FOR`]->(b:`Person`|`Company`)" in text
    for bad in ("Doc`) DETACH DELETE n //", "a b", "1abc", "", "x" * 129):
        with pytest.raises(ValueError, match="not a plain identifier"):
            render("map/documents", document=bad)
    with pytest.raises(ValueError, match="takes"):
        render("map/documents")  # a placeholder left empty
    with pytest.raises(ValueError, match="no identifier"):
        render("map/relations", entities=[], relations=["R"])


def test_the_map_statements_only_read() -> None:
    """Static half of the read-only claim (the server checks the plans: neo4j_source)."""
    names = ["labels", "types", "has_property", "count_documents", "documents", "documents_entities", "relations"]
    for name in names:
        text = "\n".join(line for line in load(f"map/{name}").splitlines() if not line.lstrip().startswith("//"))
        assert not re.search(r"\b(CREATE|MERGE|SET|DELETE|REMOVE|DETACH|FOREACH|LOAD\s+CSV|IN\s+TRANSACTIONS)\b", text, re.I), name
        assert "$" in text or name in ("labels", "types"), name  # values arrive as parameters
