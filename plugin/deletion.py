"""Removing documents: `hansa site delete DOC_ID...` and `hansa site ingest --sync`.

Order: the graph first (the commit point: retrieval resolves every vector hit through the graph,
so a deleted document can no longer be cited even if its vectors linger after a crash), then its
chunk and answer-sentence vectors; the document ids are on disk until then, so the next ingest or
delete removes vectors a crash left (plugin.vector_intent). Communities that held the document's entities are then stale: `refresh` re-clusters only
them (a local refresh, plugin/communities.py), so communities the deletion did not touch keep their
members, ids, summaries and vectors, and only the changed summaries are re-embedded and re-published. Publishing afterwards sends the
changes with tombstones for withdrawn summaries (plugin.publish), so the gateway stops routing
to what the site no longer holds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from hansa.core.crash_points import crash_point
from hansa.core.errors import InputError
from hansa.core.logs import get_logger
from hansa.plugin import sentence_vectors, vector_intent
from hansa.plugin.site import CHUNKS, SiteContext

log = get_logger(__name__)

LOOKUP_BATCH = 1000  # ids per document_hashes call


@dataclass(frozen=True)
class DeleteReport:
    deleted: tuple[str, ...]
    unknown: tuple[str, ...]  # ids the site does not hold (nothing done for them)


def delete_documents(ctx: SiteContext, doc_ids: Sequence[str]) -> DeleteReport:
    """Remove documents (graph, then chunk and sentence vectors); unknown ids are reported, not an error."""
    ids = list(dict.fromkeys(doc_ids))
    if any(not isinstance(i, str) or not i for i in ids):
        raise InputError("document ids must be non-empty strings")
    vector_intent.repair(ctx)  # what an earlier crashed step left first: the file holds one intent
    known: set[str] = set()
    for start in range(0, len(ids), LOOKUP_BATCH):
        known.update(ctx.graph.document_hashes(ids[start:start + LOOKUP_BATCH]))
    deleted = [i for i in ids if i in known]
    if deleted:
        vector_intent.record(ctx, doc_ids=deleted)
        ctx.graph.delete_documents(deleted)
        crash_point("delete.after_graph")
        ctx.vectors.delete(CHUNKS, where={"doc_id": deleted})  # one filtered scan, not one per document
        sentence_vectors.delete_documents(ctx, deleted)
        vector_intent.done(ctx)
    report = DeleteReport(deleted=tuple(deleted), unknown=tuple(i for i in ids if i not in known))
    log.info("documents.deleted", deleted=len(report.deleted), unknown=len(report.unknown))
    return report


def refresh_communities(ctx: SiteContext, progress: bool = False):  # -> CommunityReport | None
    """Rebuild the communities after documents left, seeded from the stored ones; None when the
    site had none to refresh. An emptied site keeps no communities (all are withdrawn)."""
    from hansa.plugin.communities import build_communities, clear_communities

    if not ctx.graph.communities():
        return None
    stats = ctx.graph.stats()  # handed on: each read is a count query on Neo4j
    if stats.documents == 0:
        clear_communities(ctx)
        return None
    return build_communities(ctx, progress=progress, incremental=True, stats=stats)
