"""Ingest: documents in, chunk vectors in Milvus and a knowledge graph in the graph store.

Two phases, because bad input must leave nothing behind: phase 1 reads and validates every input
(raising one InputError that lists all bad files; with `skip_bad` the bad ones are left out and
reported instead), phase 2 writes, then (with `sync`) removes what left the ingested folders. Each
document's graph write is its commit point: vectors go to Milvus first (beside those of a version
being replaced), then the graph records the document with its content fingerprint, then the
replaced version's vectors go. A crash before the graph write leaves the graph without (or with
the whole old version of) the document, so the next run sees it as new (or changed) and redoes it;
chunk ids are content hashes, so redone vectors replace themselves instead of piling up. Rows a
crash leaves without a chunk (the new version's before the commit, the old one's after it) are
listed on disk first and deleted by the next run (plugin.vector_intent); retrieval resolves vector
hits through the graph, so they are never cited meanwhile. Tested by killing the process
(tests/plugin/test_crash_drills.py).
"""
from __future__ import annotations

import hashlib
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from hansa.adapters.records import Chunk, Document, DocumentGraph
from hansa.core.resources import peak_rss_mib
from hansa.core.crash_points import crash_point
from hansa.core.errors import InputError
from hansa.core.logs import get_logger
from hansa.core.progress import Progress
from hansa.plugin import sentence_vectors, vector_intent
from hansa.plugin.chunking import check_chunking, chunk_text
from hansa.plugin.extraction import EXTRACTOR_VERSION, document_graph
from hansa.plugin.readers import SourceDocument, read_origins
from hansa.plugin.site import CHUNKS, SENTENCES, SiteContext, chunk_collection
from hansa.plugin.sources import Origin, bind, read_roots, resolve_origins

log = get_logger(__name__)

HASH_LOOKUP_BATCH = 1000  # ids per document_hashes call: bounded query parameters on any backend
# Rows of one collection (chunks, or answer sentences) written unsealed before it is flushed (Sealer)
SEAL_ROWS = 4096
# Chunks per embedding call at least (with their answer sentences, ~8 texts each): a long document
# is its own call, so progress moves per document; short ones share one, so the model still sees
# full batches.
EMBED_GROUP_CHUNKS = 16


@dataclass(frozen=True)
class IngestReport:
    documents_seen: int
    documents_new: int
    documents_changed: int
    documents_unchanged: int
    chunks: int  # chunks written (new and changed documents only)
    entities: int  # distinct entities in the written documents
    relations: int  # entity pairs mentioned together, once per chunk (DocumentGraph.co_mention_count)
    seconds: float  # reading, extraction, embedding and writes; the model's loading is model_load_seconds
    chunks_per_s: float
    model_load_seconds: float = 0.0
    documents_deleted: tuple[str, ...] = ()  # with sync: stored documents whose file or record is gone
    skipped: tuple[str, ...] = ()  # unsupported files found in the folders (not read)
    bad: tuple[str, ...] = ()  # with skip_bad: unreadable files and lines left out (one line each)
    # the process's peak resident memory so far (the model, the documents read, the batch in
    # flight): what an admin sizes the machine by (core.resources)
    peak_rss_mib: float = 0.0
    # wall seconds per stage (STAGES), so that the embedding's share and every other stage's rate
    # can be read off one run (benchmarks/README.md, "Peak memory of the ingest")
    stage_seconds: dict[str, float] = field(default_factory=dict)


# read: files in, fingerprints, stored hashes; build: chunking and entity extraction; embed: the
# model; vector_write: Milvus (new rows and a replaced version's); graph_write: the graph store.
STAGES = ("read", "build", "embed", "vector_write", "graph_write")


@contextmanager
def _timed(stages: dict[str, float], name: str) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        stages[name] = stages.get(name, 0.0) + time.perf_counter() - t0


def fingerprint(doc: SourceDocument, ctx: SiteContext) -> str:
    """What decides "unchanged": the text and title, and every setting that shapes what we store.

    Hashing the settings too means a new chunk size, extractor or embedding model re-indexes a
    document on the next ingest instead of leaving it stored the old way forever."""
    site = ctx.cfg.site
    digest = hashlib.sha256()
    for part in (
        doc.text,
        doc.title,
        doc.source,
        repr(doc.pages),
        f"chunk_size={site.chunk_size}",
        f"chunk_overlap={site.chunk_overlap}",
        f"extractor={EXTRACTOR_VERSION}",
        f"embedder={ctx.embedder.model_id}",
    ):
        encoded = part.encode("utf-8")
        digest.update(len(encoded).to_bytes(8, "big"))
        digest.update(encoded)
    return digest.hexdigest()


def _stored_hashes(ctx: SiteContext, doc_ids: Sequence[str]) -> dict[str, str]:
    stored: dict[str, str] = {}
    for start in range(0, len(doc_ids), HASH_LOOKUP_BATCH):
        stored.update(ctx.graph.document_hashes(doc_ids[start:start + HASH_LOOKUP_BATCH]))
    return stored


def _batches(items: Sequence[SourceDocument], size: int) -> Iterator[Sequence[SourceDocument]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _build(doc: SourceDocument, sha256: str, ctx: SiteContext) -> DocumentGraph:
    site = ctx.cfg.site
    document = Document(id=doc.id, title=doc.title, source=doc.source, sha256=sha256)
    chunks = chunk_text(doc.id, doc.text, site.chunk_size, site.chunk_overlap)
    if doc.pages:
        chunks = tuple(replace(chunk, page=doc.page_at(chunk.start)) for chunk in chunks)
    return document_graph(document, chunks)


def _embedding_groups(graphs: Sequence[DocumentGraph]) -> Iterator[list[DocumentGraph]]:
    """Consecutive documents, cut once a group holds EMBED_GROUP_CHUNKS chunks or more."""
    group: list[DocumentGraph] = []
    chunks = 0
    for graph in graphs:
        group.append(graph)
        chunks += len(graph.chunks)
        if chunks >= EMBED_GROUP_CHUNKS:
            yield group
            group, chunks = [], 0
    if group:
        yield group


def _write_batch(ctx: SiteContext, graphs: Sequence[DocumentGraph], replaced: set[str],
                 embedded: Callable[[Sequence[DocumentGraph]], None] = lambda group: None,
                 stages: dict[str, float] | None = None) -> int:
    """New vectors (chunks and their answer sentences) beside the old, the graph (the commit
    point), then the replaced versions' vectors: whenever a crash strikes, each document is stored
    whole in one version, and the rows no chunk names are listed in the intent file for the next
    run to delete (plugin.vector_intent). Chunk ids, and so sentence ids, are content addressed
    (plugin.chunking): a new version never overwrites an old version's rows. `embedded` hears of
    each group of documents whose vectors are stored (the progress an admin sees); `stages` adds
    up the seconds of each stage. Returns how many sentence rows were stored, left unsealed: the
    caller flushes (`Sealer`)."""
    stages = {} if stages is None else stages
    chunks = [chunk for graph in graphs for chunk in graph.chunks]
    new = {chunk.id for chunk in chunks}
    old = ctx.graph.document_chunk_ids([g.document.id for g in graphs if g.document.id in replaced]) - new
    vector_intent.record(ctx, chunk_ids=new | old)
    sentences = 0
    for group in _embedding_groups(graphs):
        sentences += _store_vectors(ctx, [chunk for graph in group for chunk in graph.chunks], replaced, stages)
        embedded(group)
    crash_point("ingest.after_vectors")
    with _timed(stages, "graph_write"):
        ctx.graph.write_documents(graphs)
    crash_point("ingest.after_graph")
    if old:
        with _timed(stages, "vector_write"):
            ctx.vectors.delete(CHUNKS, ids=sorted(old))
            sentence_vectors.delete_chunks(ctx, old)
    vector_intent.done(ctx)
    return sentences


class Sealer:
    """Flushes the chunk or the sentence collection once SEAL_ROWS of its rows were written
    unsealed, and both at the end of a bulk write (`seal`). Why not per batch: a flush buys no
    durability (Milvus Lite's write-ahead log reaches the OS at every write, so a killed process
    replays it when the directory is next opened; a Milvus server persists a write before
    acknowledging it), while each flush seals a segment that Lite then merges, and indexes again
    (the chunks' HNSW graph), in this process. Why not only at the end: Lite's flush turns every
    unsealed row into Python objects at once (~12 KB a 384-d row), so one flush of a whole site's
    rows raised the ingest's peak memory by ~350 MiB (benchmarks/README.md, "Session 29").
    Unsealed rows are read and searched like sealed ones (tests/adapters/vector/test_milvus.py)."""

    def __init__(self, ctx: SiteContext, stages: dict[str, float] | None = None) -> None:
        self._ctx, self._stages = ctx, {} if stages is None else stages
        # rows waiting per collection; a collection in here had rows stored, so it exists
        self._unsealed: dict[str, int] = {}

    def wrote(self, chunks: int, sentences: int) -> None:
        for collection, rows in ((CHUNKS, chunks), (SENTENCES, sentences)):
            if rows:
                self._unsealed[collection] = self._unsealed.get(collection, 0) + rows
                if self._unsealed[collection] >= SEAL_ROWS:
                    self._flush(collection)

    def seal(self) -> None:
        for collection in (CHUNKS, SENTENCES):
            if self._unsealed.get(collection):
                self._flush(collection)

    def _flush(self, collection: str) -> None:
        with _timed(self._stages, "vector_write"):
            self._ctx.vectors.flush(collection)
        self._unsealed[collection] = 0


def _store_vectors(ctx: SiteContext, chunks: Sequence[Chunk], replaced: set[str], stages: dict[str, float]) -> int:
    """The chunks' vectors and their answer sentences', from one embedding call; returns how many
    sentence rows were stored (left unflushed). Rows of documents with no stored version are
    inserted, not upserted: their ids cannot be stored (chunk ids hash the document id; rows an
    interrupted run left were deleted by `vector_intent.repair` before any write), and an upsert
    looks each id up first (VectorStore.insert). A replaced document's rows are
    upserted: an unchanged chunk keeps its id, and its row is replaced, not written twice."""
    if not chunks:
        return 0
    with _timed(stages, "build"):
        ids, texts, fields = sentence_vectors.rows(chunks)
    with _timed(stages, "embed"):
        vectors = np.asarray(ctx.embedder.embed([chunk.text for chunk in chunks] + texts), dtype=np.float32)
    with _timed(stages, "vector_write"):
        chunk_vectors, sentence_rows = vectors[:len(chunks)], vectors[len(chunks):]
        for fresh in (True, False):
            part = [i for i, chunk in enumerate(chunks) if (chunk.doc_id not in replaced) == fresh]
            if part:
                write = ctx.vectors.insert if fresh else ctx.vectors.upsert
                write(CHUNKS, [chunks[i].id for i in part], chunk_vectors[part], [{"doc_id": chunks[i].doc_id} for i in part], flush=False)
            part = [i for i, row in enumerate(fields) if (row["doc_id"] not in replaced) == fresh]
            sentence_vectors.store(ctx, [ids[i] for i in part], sentence_rows[part], [fields[i] for i in part], flush=False, fresh=fresh)
    return len(ids)


def _gone(ctx: SiteContext, origins: Sequence[Origin], docs: Sequence[SourceDocument], keep: frozenset[str]) -> list[str]:
    """Stored documents under the ingested paths that the read no longer found (`--sync`).

    Documents whose file could not be read (`keep`: their sources) are never counted as gone."""
    present = {doc.id for doc in docs}
    gone: dict[str, None] = {}
    for origin in origins:
        scope = origin.scope
        exact = not scope.endswith((":", "/"))
        for doc_id, source in sorted(ctx.graph.documents_by_source(scope).items()):
            if (exact and source != scope) or doc_id in present or source in keep:
                continue
            gone.setdefault(doc_id)
    return list(gone)


def ingest_paths(
    ctx: SiteContext,
    paths: Sequence[Path],
    progress: bool = False,
    batch_docs: int = 64,
    *,
    source: str | None = None,
    sync: bool = False,
    skip_bad: bool = False,
) -> IngestReport:
    """Ingest files and folders; re-running on the same input is a no-op.

    `source` names the source the paths belong to (plugin.sources; default: each folder's name).
    `sync` also removes stored documents under the paths that are gone from them (graph and
    vectors; refresh communities afterwards: plugin.deletion). `skip_bad` goes on past unreadable
    files and reports them instead of aborting."""
    from hansa.plugin.deletion import delete_documents

    started = time.perf_counter()
    if batch_docs < 1:
        raise InputError(f"batch_docs must be >= 1, got {batch_docs}")
    check_chunking(ctx.cfg.site.chunk_size, ctx.cfg.site.chunk_overlap)

    # Phase 1: read and validate everything; nothing is written if any input is bad (unless
    # skip_bad, which leaves the bad inputs out and reports them).
    origins = resolve_origins([Path(p) for p in paths], source, read_roots(ctx.cfg.home))
    read = read_origins(origins, skip_bad=skip_bad)
    docs = read.documents
    for file in read.skipped:
        log.debug("ingest.skipped_unsupported", file=file)
    for problem in read.bad:
        log.debug("ingest.skipped_bad", problem=problem)
    bind(ctx.cfg.home, origins)
    gone = _gone(ctx, origins, docs, read.bad_sources) if sync else []
    sha = {doc.id: fingerprint(doc, ctx) for doc in docs}
    stored = _stored_hashes(ctx, [doc.id for doc in docs])
    pending = [doc for doc in docs if stored.get(doc.id) != sha[doc.id]]
    replaced = {doc.id for doc in pending if doc.id in stored}

    stages = {name: 0.0 for name in STAGES}
    stages["read"] = time.perf_counter() - started

    # Phase 2: new and changed documents, in batches (one embedding call and one graph
    # transaction per batch).
    chunks = relations = 0
    entities: set[str] = set()
    startup = 0.0
    vector_intent.repair(ctx)  # rows a crashed earlier run left without a chunk
    unchanged = [doc for doc in docs if stored.get(doc.id) == sha[doc.id]]
    backfill = bool(unchanged) and not sentence_vectors.exists(ctx)  # stored before sentence vectors were
    if pending or backfill:
        ctx.vectors.ensure_collection(chunk_collection(ctx.embedder.dim))
        sentence_vectors.ensure(ctx)
        load_started = time.perf_counter()
        ctx.embedder.warm()  # the model loads here, once: not part of the ingest rate
        startup = time.perf_counter() - load_started
    sealer = Sealer(ctx, stages)
    with Progress("ingest", len(pending), "doc", progress) as shown:
        for batch in _batches(pending, batch_docs):
            with _timed(stages, "build"):
                graphs = [_build(doc, sha[doc.id], ctx) for doc in batch]
            sentences = _write_batch(ctx, graphs, replaced,
                                     lambda group: shown.advance(len(group), chunks=sum(len(g.chunks) for g in group)), stages)
            sealer.wrote(sum(len(graph.chunks) for graph in graphs), sentences)
            for graph in graphs:
                chunks += len(graph.chunks)
                relations += graph.co_mention_count()
                entities.update(e.id for e in graph.entities)
    sealer.seal()
    if backfill:
        sentence_vectors.backfill(ctx, [chunk for doc in unchanged for chunk in _build(doc, sha[doc.id], ctx).chunks])
    if gone:
        delete_documents(ctx, gone)

    seconds = time.perf_counter() - started - startup
    report = IngestReport(
        documents_seen=len(docs),
        documents_new=len(pending) - len(replaced),
        documents_changed=len(replaced),
        documents_unchanged=len(docs) - len(pending),
        chunks=chunks,
        entities=len(entities),
        relations=relations,
        seconds=round(seconds, 3),
        chunks_per_s=round(chunks / seconds, 1) if seconds > 0 else 0.0,
        model_load_seconds=round(startup, 3),
        documents_deleted=tuple(gone),
        skipped=tuple(read.skipped),
        bad=tuple(read.bad),
        peak_rss_mib=peak_rss_mib(),
        stage_seconds={name: round(value, 3) for name, value in stages.items()},
    )
    log.info("ingest.done", **{k: v if not isinstance(v, tuple) else len(v) for k, v in vars(report).items()})
    return report
