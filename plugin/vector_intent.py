"""Chunk (and answer-sentence) vectors a crash may leave without a graph chunk: named on disk before the risky step, and
deleted by the next ingest or delete wherever the graph does not name them.

Why: the graph transaction is the commit point of ingest and delete, and Milvus is not part of it.
A re-ingested document's new vectors are written beside the old ones before the graph switches to
the new version, and the old version's vectors are deleted after it (so a crash in between never
leaves a stored chunk without its vector: the document stays findable in one whole version). A
delete removes the graph's document first and its vectors after. Either way a kill -9 between the
two stores can leave rows that no chunk names — harmless to answers (retrieval resolves every
vector hit through the graph) but never cleaned by a rerun that finds nothing left to do. So the
ids (or, for a delete, the document ids) are written to `<home>/vector-intent.json` first; the
file goes once the step is done, and `repair` settles a file a crash left behind.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from hansa.core.errors import ConfigError
from hansa.core.files import write_json_atomic
from hansa.core.logs import get_logger
from hansa.plugin import sentence_vectors
from hansa.plugin.site import CHUNKS, SiteContext

log = get_logger(__name__)

FILENAME = "vector-intent.json"


def intent_file(ctx: SiteContext) -> Path:
    return ctx.cfg.home / FILENAME


def record(ctx: SiteContext, chunk_ids: Iterable[str] = (), doc_ids: Iterable[str] = ()) -> None:
    """Before the step: chunk vectors that must go unless the graph names them afterwards, and
    documents whose vectors must all go unless the graph still holds them."""
    write_json_atomic(intent_file(ctx), {"chunk_ids": sorted(set(chunk_ids)), "doc_ids": sorted(set(doc_ids))})


def done(ctx: SiteContext) -> None:
    intent_file(ctx).unlink(missing_ok=True)


def repair(ctx: SiteContext) -> int:
    """Settle what a crashed ingest or delete left open; returns the chunk vectors deleted by id
    (documents' vectors deleted by document id are not counted)."""
    path = intent_file(ctx)
    if not path.is_file():
        return 0
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        chunk_ids, doc_ids = [str(i) for i in data["chunk_ids"]], [str(i) for i in data["doc_ids"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path} is damaged ({exc}): delete it and re-ingest the affected folders") from exc
    named = {hit.chunk_id for hit in ctx.graph.chunks(chunk_ids)} if chunk_ids else set()
    orphans = [cid for cid in chunk_ids if cid not in named]
    if orphans:
        ctx.vectors.delete(CHUNKS, ids=orphans)
        sentence_vectors.delete_chunks(ctx, orphans)
    stored = ctx.graph.document_hashes(doc_ids) if doc_ids else {}
    gone = [doc_id for doc_id in doc_ids if doc_id not in stored]
    if gone:
        ctx.vectors.delete(CHUNKS, where={"doc_id": gone})
    sentence_vectors.delete_documents(ctx, gone)
    log.info("vectors.repaired", orphans=len(orphans), documents=len(gone))
    done(ctx)
    return len(orphans)
