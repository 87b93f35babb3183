"""`hansa site migrate-ids PATH... [--source NAME]`: move a site ingested before named sources
(plugin.sources) to the new document ids, once.

Before, a file's id was its path relative to the folder given to `ingest` (`notes.txt`), and a
document's source was the file path as typed. Given the same folders as back then, this command
re-ingests them under their source (`docs/notes.txt`; JSONL records keep their ids and only get the
new source), deletes the documents stored under the old ids, and refreshes the communities
(seeded, so unaffected ones keep their ids). Publish afterwards: the gateway then drops the old
summaries. Chunk ids derive from document ids, so moved documents are re-chunked and re-embedded:
the cost of one ingest of those folders. Running it again changes nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from hansa.core.logs import get_logger
from hansa.plugin.deletion import delete_documents, refresh_communities
from hansa.plugin.ingest import IngestReport, ingest_paths
from hansa.plugin.readers import read_origins
from hansa.plugin.site import SiteContext
from hansa.plugin.sources import read_roots, resolve_origins

log = get_logger(__name__)


@dataclass(frozen=True)
class MigrationReport:
    renamed: dict[str, str]  # old id -> new id (documents moved to their source's id)
    ingest: IngestReport
    communities_refreshed: bool


def legacy_ids(ctx: SiteContext, paths: Sequence[Path], source: str | None = None) -> dict[str, str]:
    """{old id: new id} for the files under `paths` (JSONL records keep their id: not listed)."""
    origins = resolve_origins([Path(p) for p in paths], source, read_roots(ctx.cfg.home))
    mapping: dict[str, str] = {}
    for origin in origins:
        for doc in read_origins([origin]).documents:
            inside = doc.source.split(":", 1)[1]
            if inside.lower().endswith(".jsonl"):
                continue
            file = origin.root / inside
            old = file.relative_to(origin.path).as_posix() if origin.path.is_dir() else file.name
            if old != doc.id:
                mapping[old] = doc.id
    return mapping


def migrate_ids(ctx: SiteContext, paths: Sequence[Path], source: str | None = None, progress: bool = False) -> MigrationReport:
    """Re-ingest `paths` under their source, then remove the documents stored under old ids."""
    mapping = legacy_ids(ctx, paths, source)
    stored = ctx.graph.document_hashes(list(mapping)) if mapping else {}
    ingest = ingest_paths(ctx, paths, progress=progress, source=source)
    renamed = {old: new for old, new in mapping.items() if old in stored}
    deleted = delete_documents(ctx, list(renamed)).deleted if renamed else ()
    changed = bool(deleted) or ingest.documents_new > 0 or ingest.documents_changed > 0
    refreshed = changed and refresh_communities(ctx, progress=progress) is not None
    log.info("ids.migrated", renamed=len(renamed), ingested=ingest.documents_new + ingest.documents_changed)
    return MigrationReport(renamed=renamed, ingest=ingest, communities_refreshed=refreshed)
