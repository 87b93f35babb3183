"""Answer-candidate sentence vectors: embedded once at ingest, read by id at retrieval.

Why: retrieval ranks up to MAX_CANDIDATES sentences of its best chunks by cosine with the question.
Embedding them on every request was what a site spent its time on (~40 sentences per call); the
sentences of a chunk never change while the chunk exists, so their vectors are computed with the
chunk and stored beside it, and a request only embeds the question.

Storage: a third collection of the site's vector store (SENTENCES, through the VectorStore port, so
Milvus Lite and a Milvus server alike; the graph store, embedded or Neo4j, never holds vectors).
Row id "<chunk id>:<offset>" names the sentence by its chunk and its character offset in it, exactly
as `answer_candidates.chunk_sentences` splits it; the vector is that of its `scored_text` (with the
sentence it leans on, if any). A `doc_id` field lets a document's rows go with it (replace, delete,
`ingest --sync`); uninstall drops the collection.

Migration: a site ingested before this collection existed still answers, because retrieval embeds
whatever it does not find stored (`vectors_for`), as it always did. `hansa site ingest` backfills:
when it finds no SENTENCES collection it creates it and fills it for the documents it leaves
unchanged as well (`backfill`); re-running ingest on the site's folders is the one step to take.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from hansa.adapters.records import Chunk
from hansa.core.errors import NotFoundError
from hansa.core.logs import get_logger
from hansa.plugin.answer_candidates import chunk_sentences
from hansa.plugin.site import SENTENCES, SiteContext, sentence_collection

log = get_logger(__name__)


def sentence_id(chunk_id: str, position: int) -> str:
    return f"{chunk_id}:{position}"


def rows(chunks: Sequence[Chunk]) -> tuple[list[str], list[str], list[dict[str, str]]]:
    """(ids, texts to embed, fields) of every answer candidate of `chunks`."""
    ids: list[str] = []
    texts: list[str] = []
    fields: list[dict[str, str]] = []
    for chunk in chunks:
        for sentence in chunk_sentences(chunk.text):
            ids.append(sentence_id(chunk.id, sentence.position))
            texts.append(sentence.scored_text)
            fields.append({"doc_id": chunk.doc_id, "chunk_id": chunk.id})
    return ids, texts, fields


def exists(ctx: SiteContext) -> bool:
    return ctx.vectors.collection_owner(SENTENCES) is not None


def ensure(ctx: SiteContext, owner: str = "") -> bool:
    """Create the collection if missing; True when it had to be created (the site predates it)."""
    created = not exists(ctx)
    ctx.vectors.ensure_collection(sentence_collection(ctx.embedder.dim, owner))
    return created


def store(ctx: SiteContext, ids: Sequence[str], vectors: np.ndarray, fields: Sequence[dict[str, str]],
          *, flush: bool = True, fresh: bool = False) -> None:
    """Write the rows; `fresh`: none of the ids is stored (VectorStore.insert), else upserted."""
    if ids:
        write = ctx.vectors.insert if fresh else ctx.vectors.upsert
        write(SENTENCES, list(ids), vectors, list(fields), flush=flush)


def backfill(ctx: SiteContext, chunks: Sequence[Chunk], batch: int = 512) -> int:
    """Embed and store the sentences of chunks ingested before this collection existed; returns
    how many were stored."""
    ids, texts, fields = rows(chunks)
    for start in range(0, len(ids), batch):
        part = slice(start, start + batch)
        store(ctx, ids[part], np.asarray(ctx.embedder.embed(texts[part]), dtype=np.float32), fields[part])
    if ids:
        log.info("sentence_vectors.backfilled", chunks=len(chunks), sentences=len(ids))
    return len(ids)


def delete_documents(ctx: SiteContext, doc_ids: Sequence[str]) -> None:
    """Remove the sentence rows of these documents (nothing to do on a site without the collection)."""
    if not doc_ids or not exists(ctx):
        return
    ctx.vectors.delete(SENTENCES, where={"doc_id": sorted(set(doc_ids))})


def delete_chunks(ctx: SiteContext, chunk_ids: Iterable[str]) -> None:
    """Remove the sentence rows of these chunks: a replaced version's, or those a crash left. One
    delete for them all: Milvus scans the collection once per filtered delete, and a delete per
    chunk made re-ingesting 5% of an 8,000-paragraph site take minutes (benchmarks/README.md,
    "Session 29")."""
    chunk_ids = sorted(set(chunk_ids))
    if not chunk_ids or not exists(ctx):
        return
    ctx.vectors.delete(SENTENCES, where={"chunk_id": chunk_ids})


def vectors_for(ctx: SiteContext, keys: Sequence[tuple[str, int]], texts: Sequence[str]) -> np.ndarray:
    """Vectors of the candidates named by (chunk id, offset), whose scored texts are `texts`:
    stored ones read back, the rest (a site not yet backfilled) embedded now, in one batch."""
    if not keys:
        return np.zeros((0, ctx.embedder.dim), dtype=np.float32)
    ids = [sentence_id(chunk_id, position) for chunk_id, position in keys]
    try:
        stored = ctx.vectors.get(SENTENCES, ids)
    except NotFoundError:  # ingested before sentence vectors were stored
        stored = {}
    missing = [i for i, row_id in enumerate(ids) if row_id not in stored]
    out = np.zeros((len(ids), ctx.embedder.dim), dtype=np.float32)
    for i, row_id in enumerate(ids):
        if row_id in stored:
            out[i] = stored[row_id]
    if missing:
        out[missing] = np.asarray(ctx.embedder.embed([texts[i] for i in missing]), dtype=np.float32)
        log.debug("sentence_vectors.embedded_at_query", missing=len(missing), stored=len(stored))
    return out
