"""`hansa site map`: the organization's own Neo4j graph as the site's corpus ("bring your own graph").

An admin names, in `[site.graph_map]`, the label of their document nodes and the properties holding
id, title and text; the labels of their entity nodes and the property holding a name; the
relationship from documents to the entities they mention; and the relationship types between
entities that are relations. The map reads that graph and feeds hansa's own pipeline: each
document's text is chunked, embedded and stored exactly as ingest stores a file (crash-safe
`ingest._write_batch`), its mapped entities become hansa entities mentioned by its chunks, and the
mapped relationships become weighted relations (HANSA_LINKED) that Leiden, summaries and stats take
beside the co-mentions. `communities`, `publish`, `serve` and `uninstall` then work unchanged.

Why copy into hansa's namespace rather than project Leiden over the organization's labels: every
later step (retrieval resolving vector hits to chunks, summaries citing chunks, publication,
uninstall) works on Hansa* nodes, and a chunk's text must be stored where hansa can cite it; a
projection over foreign labels would still need all of that, and would make the organization's
nodes part of hansa's queries. Copying keeps the proof of "nothing of the organization's is
written or deleted" in two small places: the reader (adapters/graph/neo4j_source.py: templates
with validated identifiers only, READ transactions, server-checked read-only plans) and the
store's writes (Hansa* labels and HANSA_* types only, as for files). Uninstall removes the copy.

Choices, and why:
- Entities are keyed by the normalized name (core.entities.normalize), like extracted ones, so
  the same thing named by a mapped entity and spotted in text (`extract = true`) is one node, and
  relations join entities by the names documents use.
- A mention links a document to an entity; hansa's mentions link chunks. An entity is mentioned by
  the chunks whose folded text contains its folded name (the test the rest of hansa uses); one the
  text never names (an alias, a code) is mentioned by the document's first chunk, since the
  organization says the document is about it.
- An entity no mapped document mentions has no text to summarize or cite: it is not stored, and
  relations naming it are left out (the report counts both sides).
- Re-running is incremental like ingest: a document is rewritten only when its text, title, mapped
  entities or a shaping setting changed (its fingerprint), mapped documents gone from the
  organization's graph are removed from the site's, and the mapped relations are replaced whole.
- Neo4j only: the organization's graph is in Neo4j, and hansa's copy of it lives beside it; the
  embedded store keeps no mapped relations (GraphStore.replace_links refuses).
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Sequence

from hansa.adapters.graph.neo4j_source import OrgDocument, OrgGraphSource
from hansa.adapters.records import Document, DocumentGraph, Entity, Mention
from hansa.core.config import GraphMapConfig, check_graph_map
from hansa.core.errors import ConfigError, InputError
from hansa.core.logs import get_logger
from hansa.core.progress import Progress
from hansa.core.text import fold
from hansa.plugin import sentence_vectors, vector_intent
from hansa.plugin.chunking import check_chunking, chunk_text
from hansa.plugin.extraction import EXTRACTOR_VERSION, document_graph, normalize
from hansa.plugin.ingest import Sealer, _stored_hashes, _write_batch
from hansa.plugin.site import SiteContext, chunk_collection
from hansa.plugin.sources import read_roots

log = get_logger(__name__)

MAP_VERSION = "graph-map-1"  # part of the fingerprint: a new mapping logic re-indexes documents
MAX_LISTED = 20  # skipped documents named in the report (all are counted)


@dataclass(frozen=True)
class MapReport:
    documents_seen: int  # documents with an id read from the organization's graph
    documents_new: int
    documents_changed: int
    documents_unchanged: int
    documents_deleted: tuple[str, ...]  # mapped earlier, gone from the organization's graph now
    documents_skipped: int  # no usable text (listed in `skipped`, at most MAX_LISTED)
    documents_without_id: int  # nodes with the document label but no id property: not read
    chunks: int  # chunks written (new and changed documents)
    entities: int  # distinct mapped entities the written documents mention
    mentions_unplaced: int  # mapped mentions whose name the text never contains (on the first chunk)
    relations_read: int  # the organization's relationships of the mapped types between mapped entities
    relations_written: int  # entity pairs stored as mapped relations (both ends mentioned by a document)
    seconds: float
    model_load_seconds: float = 0.0
    skipped: tuple[str, ...] = ()


def mapping(ctx: SiteContext) -> GraphMapConfig:
    """The site's enabled mapping, or ConfigError saying what to configure."""
    m = ctx.cfg.site.graph_map
    check_graph_map(m)
    if not m.enabled:
        raise ConfigError("no [site.graph_map] in the configuration: set at least document_label, document_id and "
                          "document_text (README, 'Bring your own graph')")
    if ctx.graph.backend != "neo4j":
        raise ConfigError(f"[site.graph_map] maps an organization's Neo4j graph, but [graph] backend is "
                          f"{ctx.graph.backend!r}: set [graph] backend = 'neo4j' (HANSA_GRAPH_BACKEND=neo4j) and "
                          "[neo4j] uri to the database holding that graph")
    bound = read_roots(ctx.cfg.home).get(m.source)
    if bound is not None:
        raise ConfigError(f"[site.graph_map] source {m.source!r} already names the files ingested from {bound}: give the "
                          "mapped documents a source of their own, or `ingest --sync` there would remove them")
    return m


def fingerprint(doc: OrgDocument, text: str, title: str, ctx: SiteContext, m: GraphMapConfig) -> str:
    """What decides "unchanged": the text, title and mapped entities, and every setting that shapes
    what is stored (as ingest.fingerprint)."""
    site = ctx.cfg.site
    digest = hashlib.sha256()
    parts = [text, title, m.source, repr(doc.entities), repr(sorted(m.entity_labels)), MAP_VERSION,
             f"chunk_size={site.chunk_size}", f"chunk_overlap={site.chunk_overlap}",
             f"extractor={EXTRACTOR_VERSION if m.extract else 'none'}", f"embedder={ctx.embedder.model_id}"]
    for part in parts:
        encoded = part.encode("utf-8")
        digest.update(len(encoded).to_bytes(8, "big"))
        digest.update(encoded)
    return digest.hexdigest()


def _kind(labels: Sequence[str], m: GraphMapConfig) -> str:
    return next((label for label in m.entity_labels if label in labels), "concept")


def document_graph_of(doc: OrgDocument, doc_id: str, text: str, title: str, sha256: str, ctx: SiteContext,
                      m: GraphMapConfig) -> tuple[DocumentGraph, int]:
    """The document's slice of hansa's graph and the number of its mapped mentions that no chunk
    names (placed on the first chunk: module doc)."""
    site = ctx.cfg.site
    document = Document(id=doc_id, title=title, source=f"{m.source}:{doc.id}", sha256=sha256)
    chunks = chunk_text(doc_id, text, site.chunk_size, site.chunk_overlap)
    base = document_graph(document, chunks) if m.extract else DocumentGraph(document, chunks, (), ())
    entities = {e.id: e for e in base.entities}
    mentions = {(x.chunk_id, x.entity_id): x.count for x in base.mentions}
    folded = [f" {fold(c.text)} " for c in chunks]
    unplaced = 0
    for name, labels in doc.entities:
        key = normalize(name)
        if not key:
            continue
        entities[key] = Entity(id=key, name=name.strip(), kind=_kind(labels, m))
        needle = f" {fold(name)} "
        placed = False
        for chunk, text_of in zip(chunks, folded):
            count = text_of.count(needle)
            if count:
                mentions[(chunk.id, key)] = max(count, mentions.get((chunk.id, key), 0))
                placed = True
        if not placed:
            unplaced += 1
            first = (chunks[0].id, key)
            mentions.setdefault(first, 1)
    ordered = tuple(Mention(chunk_id=c, entity_id=e, count=n) for (c, e), n in sorted(mentions.items()))
    return DocumentGraph(document, chunks, tuple(entities[k] for k in sorted(entities)), ordered), unplaced


def _usable(doc: OrgDocument, m: GraphMapConfig) -> tuple[str, str] | str:
    """(text, title), or why the document cannot be mapped."""
    if not isinstance(doc.text, str) or not doc.text.strip():
        found = "no" if doc.text is None else f"a {type(doc.text).__name__}, not text,"
        return f"{doc.id}: {found} value in property {m.document_text!r}"
    title = doc.title if isinstance(doc.title, str) and doc.title.strip() else doc.id
    return doc.text, title


def map_graph(ctx: SiteContext, progress: bool = False) -> MapReport:
    """Read the mapped graph (read-only) and store it as the site's documents, entities and relations."""
    started = time.perf_counter()
    m = mapping(ctx)
    check_chunking(ctx.cfg.site.chunk_size, ctx.cfg.site.chunk_overlap)
    with OrgGraphSource(ctx.cfg.neo4j, m) as source:
        source.check()
        count = source.count_documents()
        if count.ids < count.with_id:
            raise InputError(
                f"{count.with_id - count.ids} {m.document_label} nodes share a {m.document_id!r} value with another: "
                "site.graph_map.document_id must name a property unique per document. Nothing was written"
            )
        vector_intent.repair(ctx)
        ctx.vectors.ensure_collection(chunk_collection(ctx.embedder.dim))
        sentence_vectors.ensure(ctx)
        load_started = time.perf_counter()
        ctx.embedder.warm()
        startup = time.perf_counter() - load_started
        seen: set[str] = set()
        skipped: list[str] = []
        new = changed = chunks = unplaced = 0
        sealer = Sealer(ctx)
        entities: set[str] = set()
        with Progress("map", count.with_id, "doc", progress) as shown:
            for page in source.documents(m.batch_docs):
                graphs, replaced = [], set()
                usable = []
                for doc in page:
                    found = _usable(doc, m)
                    if isinstance(found, str):
                        skipped.append(found)
                        continue
                    usable.append((doc, f"{m.source}/{doc.id}", *found))
                seen.update(doc_id for _, doc_id, _, _ in usable)
                sha = {doc_id: fingerprint(doc, text, title, ctx, m) for doc, doc_id, text, title in usable}
                stored = _stored_hashes(ctx, list(sha))
                for doc, doc_id, text, title in usable:
                    if stored.get(doc_id) == sha[doc_id]:
                        continue
                    graph, lost = document_graph_of(doc, doc_id, text, title, sha[doc_id], ctx, m)
                    graphs.append(graph)
                    unplaced += lost
                    entities.update(e.id for e in graph.entities if e.kind in m.entity_labels)
                    chunks += len(graph.chunks)
                    if doc_id in stored:
                        replaced.add(doc_id)
                new += len(graphs) - len(replaced)
                changed += len(replaced)
                if graphs:
                    sealer.wrote(sum(len(g.chunks) for g in graphs), _write_batch(ctx, graphs, replaced))
                shown.advance(len(page), chunks=sum(len(g.chunks) for g in graphs))
        sealer.seal()
        gone = sorted(set(ctx.graph.documents_by_source(f"{m.source}:")) - seen)
        if gone:
            from hansa.plugin.deletion import delete_documents

            delete_documents(ctx, gone)
        read = source.relations()
    links: dict[tuple[str, str], int] = {}
    for a, b, n in read:
        ka, kb = normalize(a), normalize(b)
        if ka and kb and ka != kb:
            pair = (ka, kb) if ka < kb else (kb, ka)
            links[pair] = links.get(pair, 0) + n
    written = ctx.graph.replace_links([(a, b, n) for (a, b), n in sorted(links.items())])
    total = len(seen) + len(skipped)
    report = MapReport(
        documents_seen=total,
        documents_new=new,
        documents_changed=changed,
        documents_unchanged=len(seen) - new - changed,
        documents_deleted=tuple(gone),
        documents_skipped=len(skipped),
        documents_without_id=count.nodes - count.with_id,
        chunks=chunks,
        entities=len(entities),
        mentions_unplaced=unplaced,
        relations_read=sum(n for _, _, n in read),
        relations_written=written,
        seconds=round(time.perf_counter() - started - startup, 3),
        model_load_seconds=round(startup, 3),
        skipped=tuple(skipped[:MAX_LISTED]),
    )
    log.info("map.done", **{k: v if not isinstance(v, tuple) else len(v) for k, v in vars(report).items()})
    return report
