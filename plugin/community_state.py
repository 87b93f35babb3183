"""What the stored communities were built from, so that an incremental refresh of an unchanged
graph keeps them as they are.

Why: seeded Leiden does not reproduce its own seeds. The stored communities went through the merge
of small ones (communities.merge_small), so they are not a Leiden optimum, and a seeded run moves
entities even when nothing changed: on a 300-paragraph SQuAD site an unchanged refresh renamed 10 of
127 communities, embedded them again and so republished them to the gateway (4.7 s where nothing had
to be done). A refresh now first compares what a build reads (the documents and their hashes, the
graph's counts, the settings that shape communities and summaries, the embedder and the LLM) with
what the stored set was built from, and keeps the set when they match.

The record also keeps each document's hash and a digest of the settings, embedder and LLM alone: a
refresh after an edit diffs the documents to find what changed, and re-clusters only the communities
the changed documents touch (plugin/communities.py, "local refresh") while the settings are the same.

It also keeps the figures of the last unseeded Leiden run (its modularity and largest community)
and the share of the documents changed since: a local refresh checks its partition against them
instead of running Leiden over the whole graph again (plugin/communities.py, `detect`).

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


@dataclasses.dataclass(frozen=True)
class Basis:
    """What a build reads, as `record` keeps it beside the set it built."""

    fingerprint: str  # everything: an equal one keeps the set as it is
    shape: str  # the settings, embedder and LLM alone: an equal one lets a refresh stay local
    documents: dict[str, str]  # document id -> sha256: which documents an edit touched


def basis(ctx: SiteContext, stats: GraphStats) -> Basis | None:
    """What a build would read; None where no record can vouch for it (a mapped graph).
    `stats`: the graph's counts as the build read them (one count query on Neo4j, read once)."""
    if ctx.cfg.site.graph_map.enabled:
        return None
    doc_ids = sorted(ctx.graph.documents_by_source(""))
    hashes = ctx.graph.document_hashes(doc_ids) if doc_ids else {}
    llm = ctx.cfg.llm
    shape: dict[str, Any] = {
        "settings": {k: getattr(ctx.cfg.site, k) for k in _SETTINGS},
        "embedder": [ctx.embedder.model_id, ctx.embedder.model_sha256],
        "llm": [llm.base_url, llm.model] if ctx.llm is not None else None,
    }
    documents = {d: hashes.get(d, "") for d in doc_ids}
    whole = shape | {"documents": [[d, h] for d, h in documents.items()],
                     "stats": dataclasses.asdict(stats) | {"communities": None}}
    return Basis(_digest(whole), _digest(shape), documents)


@dataclasses.dataclass(frozen=True)
class Reference:
    """The last unseeded Leiden run's figures, what a local refresh's drift check compares against."""

    modularity: float  # at `leiden_gamma`, of Leiden's partition before small communities merged
    largest: int  # entities in that partition's largest community
    changed: float  # share of the site's documents changed since that run (summed over refreshes)


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode("utf-8")).hexdigest()


def fingerprint(ctx: SiteContext, stats: GraphStats) -> str | None:
    """A digest of what a build would read; None where no digest can vouch for it (a mapped graph)."""
    found = basis(ctx, stats)
    return None if found is None else found.fingerprint


def _stored(ctx: SiteContext) -> dict[str, Any] | None:
    try:
        stored = json.loads(_path(ctx).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return stored if isinstance(stored, dict) else None


def unchanged_report(ctx: SiteContext, current: str | None) -> dict[str, Any] | None:
    """The stored build's report when the communities were built from exactly `current`, else None."""
    if current is None:
        return None
    stored = _stored(ctx)
    if stored is None or stored.get("fingerprint") != current or not isinstance(stored.get("report"), dict):
        return None
    return stored["report"]


def changed_documents(ctx: SiteContext, current: Basis | None) -> set[str] | None:
    """The documents added, removed or changed since the stored set was built, when only documents
    changed (same settings, embedder and LLM); None when a refresh cannot be local: no record
    vouches for the stored set (none yet, a crashed build, a mapped graph) or what shapes it changed."""
    stored = _stored(ctx)
    if current is None or stored is None or stored.get("shape") != current.shape:
        return None
    before = stored.get("documents")
    if not isinstance(before, dict):
        return None
    now = current.documents
    return {d for d in before.keys() | now.keys() if before.get(d) != now.get(d)}


def reference(ctx: SiteContext) -> Reference | None:
    """The stored build's unseeded-run figures; None without a record (or one written before them)."""
    stored = _stored(ctx)
    found = stored.get("reference") if stored is not None else None
    if not isinstance(found, dict):
        return None
    try:
        return Reference(float(found["modularity"]), int(found["largest"]), float(found["changed"]))
    except (KeyError, TypeError, ValueError):
        return None


def forget(ctx: SiteContext) -> None:
    _path(ctx).unlink(missing_ok=True)


def record(ctx: SiteContext, current: Basis | None, report: dict[str, Any], found: Reference | None = None) -> None:
    if current is not None:
        write_json_atomic(_path(ctx), {"fingerprint": current.fingerprint, "shape": current.shape,
                                       "documents": current.documents, "report": report,
                                       "reference": None if found is None else dataclasses.asdict(found)})
