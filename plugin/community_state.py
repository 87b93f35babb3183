"""What the stored communities were built from, so that an incremental refresh of an unchanged
graph keeps them as they are.

Why: seeded Leiden does not reproduce its own seeds. The stored communities went through the merge
of small ones (communities.merge_small), so they are not a Leiden optimum, and a seeded run moves
entities even when nothing changed: on a 300-paragraph SQuAD site an unchanged refresh renamed 10 of
127 communities, embedded them again and so republished them to the gateway (4.7 s where nothing had
to be done). A refresh now first compares what a build reads (the documents and their hashes, the
graph's counts, the settings that shape communities and summaries, the embedder and the LLM) with
what the stored set was built from, and keeps the set when they match.

The record lives in the site's home (`communities-state.json`), is removed before a build writes
anything and written after it succeeded, so a crashed build never leaves a record that vouches for
a half-written set. An organization's mapped graph (`[site.graph_map]`) can change relations
outside hansa's documents, so a mapped site never takes this shortcut.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from hansa.adapters.graph.base import GraphStats
from hansa.core.files import write_json_atomic
from hansa.plugin.site import SiteContext

FILENAME = "communities-state.json"
# The [site] settings a community build reads: a change to any of them rebuilds.
_SETTINGS = ("min_community_size", "leiden_gamma", "chunks_per_summary", "summary_vector", "community_levels",
             "leiden_seed", "terms_min_documents")


def _path(ctx: SiteContext) -> Path:
    return ctx.cfg.home / FILENAME


def fingerprint(ctx: SiteContext, stats: GraphStats) -> str | None:
    """A digest of what a build would read; None where no digest can vouch for it (a mapped graph).
    `stats`: the graph's counts as the build read them (one count query on Neo4j, read once)."""
    if ctx.cfg.site.graph_map.enabled:
        return None
    doc_ids = sorted(ctx.graph.documents_by_source(""))
    hashes = ctx.graph.document_hashes(doc_ids) if doc_ids else {}
    llm = ctx.cfg.llm
    basis: dict[str, Any] = {
        "documents": [[d, hashes.get(d, "")] for d in doc_ids],
        "stats": dataclasses.asdict(stats) | {"communities": None},
        "settings": {k: getattr(ctx.cfg.site, k) for k in _SETTINGS},
        "embedder": [ctx.embedder.model_id, ctx.embedder.model_sha256],
        "llm": [llm.base_url, llm.model] if ctx.llm is not None else None,
    }
    return hashlib.sha256(json.dumps(basis, sort_keys=True).encode("utf-8")).hexdigest()


def unchanged_report(ctx: SiteContext, current: str | None) -> dict[str, Any] | None:
    """The stored build's report when the communities were built from exactly `current`, else None."""
    if current is None:
        return None
    try:
        stored = json.loads(_path(ctx).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict) or stored.get("fingerprint") != current or not isinstance(stored.get("report"), dict):
        return None
    return stored["report"]


def forget(ctx: SiteContext) -> None:
    _path(ctx).unlink(missing_ok=True)


def record(ctx: SiteContext, current: str | None, report: dict[str, Any]) -> None:
    if current is not None:
        write_json_atomic(_path(ctx), {"fingerprint": current, "report": report})
