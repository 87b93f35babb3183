"""The organization's own Neo4j graph, read through a `[site.graph_map]` mapping: never written.

Why a class of its own, beside Neo4jGraphStore: the store owns hansa's namespace and writes to it;
this reader owns nothing and has no write path at all, so "nothing of the organization's is
written or deleted" rests on three things a reviewer can check here, not on the care of callers:

- every statement is a `cypher/map/` template, filled only with identifiers that match
  `cypher.IDENTIFIER`, backtick-quoted (`cypher.render`); values and property keys are parameters;
- every statement runs in a READ transaction (`execute_read`), which Neo4j itself refuses to write
  in (Neo.ClientError.Statement.AccessMode);
- the server's own plan must say the statement is read-only (`summary.query_type == "r"`), or the
  transaction is rolled back and BackendError raised.

It opens its own driver on the site's `[neo4j]` database (the organization's graph and the site's
Hansa* nodes share it: one site per database).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import neo4j
from neo4j import GraphDatabase, ManagedTransaction, NotificationDisabledClassification
from neo4j.exceptions import AuthError, DriverError, Neo4jError, ServiceUnavailable, SessionExpired

from hansa.core.config import GraphMapConfig, Neo4jConfig, check_graph_map
from hansa.core.errors import BackendError, ConfigError
from hansa.cypher import render

CONNECT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class OrgDocument:
    id: str  # the organization's id, as a string
    title: Any  # the title property's value (None when absent)
    text: Any  # the text property's value (anything: checked by the mapping)
    entities: tuple[tuple[str, tuple[str, ...]], ...]  # (name, labels) of each mentioned entity


@dataclass(frozen=True)
class DocumentCount:
    nodes: int  # nodes with the document label
    with_id: int  # ... that hold the id property
    ids: int  # distinct ids among them


class OrgGraphSource:
    """Read-only access to the organization's graph as a GraphMapConfig maps it."""

    def __init__(self, neo4j_cfg: Neo4jConfig, mapping: GraphMapConfig) -> None:
        check_graph_map(mapping)
        if not mapping.enabled:
            raise ConfigError("no [site.graph_map] document_label: nothing of the organization's graph is mapped")
        self.mapping = mapping
        self.uri = neo4j_cfg.uri
        self.database = neo4j_cfg.database
        try:
            self._driver = GraphDatabase.driver(
                neo4j_cfg.uri, auth=(neo4j_cfg.user, neo4j_cfg.password), user_agent="hansa-map",
                notifications_disabled_classifications=[NotificationDisabledClassification.UNRECOGNIZED],
                connection_timeout=CONNECT_TIMEOUT_S, connection_acquisition_timeout=2 * CONNECT_TIMEOUT_S,
            )
        except (ValueError, DriverError) as exc:
            raise BackendError(f"invalid Neo4j URI {neo4j_cfg.uri!r} ({exc})") from exc

    def close(self) -> None:
        self._driver.close()

    def __enter__(self) -> "OrgGraphSource":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the one way a statement reaches the organization's database ----------------------------
    def _read(self, query: str, action: str, **params: Any) -> list[neo4j.Record]:
        def work(tx: ManagedTransaction) -> list[neo4j.Record]:
            result = tx.run(query, **params)
            records = list(result)
            kind = result.consume().query_type
            if kind != "r":
                raise BackendError(f"refused: a mapping statement planned as {kind!r}, not read-only; nothing was committed")
            return records

        try:
            with self._driver.session(database=self.database, default_access_mode=neo4j.READ_ACCESS) as session:
                return session.execute_read(work)
        except AuthError as exc:
            raise BackendError(f"Neo4j at {self.uri} refused the credentials while {action}: fix [neo4j] user/password") from exc
        except (ServiceUnavailable, SessionExpired, OSError) as exc:
            raise BackendError(f"Neo4j at {self.uri} is unreachable while {action} ({exc})") from exc
        except Neo4jError as exc:
            raise BackendError(f"Neo4j refused {action} ({exc.message})") from exc

    # -- the mapping against the live database --------------------------------------------------
    def check(self) -> str:
        """Raise ConfigError naming the first label, relationship type or property the mapping
        names but the database lacks (and what it has instead); a summary line when all is there."""
        m = self.mapping
        labels = [r["label"] for r in self._read(render("map/labels"), "listing labels")]
        types = [r["type"] for r in self._read(render("map/types"), "listing relationship types")]
        for key, wanted in [("document_label", [m.document_label]), ("entity_labels", m.entity_labels)]:
            for label in wanted:
                if label not in labels:
                    raise ConfigError(f"site.graph_map.{key}: no node has label {label!r} in database "
                                      f"{self.database!r}; its labels: {_listed(labels)}")
        for key, wanted in [("mention_type", [m.mention_type] if m.mention_type else []), ("relation_types", m.relation_types)]:
            for rel in wanted:
                if rel not in types:
                    raise ConfigError(f"site.graph_map.{key}: no relationship has type {rel!r} in database "
                                      f"{self.database!r}; its types: {_listed(types)}")
        props = [("document_id", m.document_label, m.document_id), ("document_text", m.document_label, m.document_text)]
        if m.document_title:
            props.append(("document_title", m.document_label, m.document_title))
        props += [("entity_name", label, m.entity_name) for label in m.entity_labels]
        for key, label, prop in props:
            row = self._read(render("map/has_property", label=label), "checking a property", key=prop)[0]
            if not row["present"]:
                raise ConfigError(f"site.graph_map.{key}: no {label!r} node has property {prop!r}; "
                                  f"properties of {label!r} nodes: {_listed(row['keys'])}")
        count = self.count_documents()
        return (f"{count.nodes} {m.document_label} documents ({count.with_id} with {m.document_id!r}), "
                f"entities {_listed(m.entity_labels)}, relations {_listed(m.relation_types)}")

    def count_documents(self) -> DocumentCount:
        m = self.mapping
        row = self._read(render("map/count_documents", document=m.document_label), "counting documents", id=m.document_id)[0]
        return DocumentCount(int(row["nodes"]), int(row["with_id"]), int(row["ids"]))

    def documents(self, batch: int) -> Iterator[list[OrgDocument]]:
        """Every document with an id, in id order, `batch` per read transaction, so no transaction
        stays open while the caller embeds a page. The ids and element ids are listed first (one
        scan of the label); each page is then a seek by element id, where paging by "ids after the
        last one" scanned the whole label again for every page."""
        m = self.mapping
        if m.entity_labels:
            query = render("map/documents_entities", document=m.document_label, mention=m.mention_type,
                           entities=m.entity_labels)
        else:
            query = render("map/documents", document=m.document_label)
        keys = self._read(render("map/document_keys", document=m.document_label), "listing documents", id=m.document_id)
        for start in range(0, len(keys), int(batch)):
            elements = [k["element"] for k in keys[start:start + int(batch)]]
            rows = self._read(query, "reading documents", id=m.document_id, title=m.document_title or m.document_id,
                              text=m.document_text, name=m.entity_name, elements=elements)
            if rows:
                yield [OrgDocument(id=r["id"], title=r["title"], text=r["text"],
                                   entities=tuple(sorted((e["name"], tuple(e["labels"])) for e in r["entities"])))
                       for r in rows]

    def relations(self) -> list[tuple[str, str, int]]:
        """(name, name, number of relationships) per ordered pair of mapped entities."""
        m = self.mapping
        if not m.relation_types:
            return []
        query = render("map/relations", entities=m.entity_labels, relations=m.relation_types)
        return [(r["a"], r["b"], int(r["relationships"])) for r in self._read(query, "reading relations", name=m.entity_name)]


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:40])
    return (shown + f", ... ({len(names)} in all)" if len(names) > 40 else shown) or "(none)"
