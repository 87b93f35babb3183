"""`hansa site install`: make a site's stores and identity ready, once, and say what was already there.

Why a site file (<home>/site.json): every vector a site stores and publishes lives in one embedding
space. Recording the model id and dimension at install time lets every later job notice that the
configured embedder changed, instead of silently mixing two spaces (which ruins search and makes the
gateway refuse the publication). The signing key is created once and never overwritten: the
gateway enrolled its public half, and replacing it would lock the site out of its own namespace.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hansa.adapters.graph.base import InstallReport
from hansa.core.files import write_json_atomic
from hansa.core.errors import ConfigError, NotFoundError
from hansa.core.logs import get_logger
from hansa.plugin.site import COLLECTIONS, SiteContext, chunk_collection, sentence_collection, summary_collection
from hansa.sync.keys import PRIVATE_KEY_FILE, SiteIdentity
from hansa.sync.wire import EmbeddingSpace

log = get_logger(__name__)

SITE_FILENAME = "site.json"


@dataclass(frozen=True)
class InstallResult:
    site_id: str
    graph: InstallReport
    collections: tuple[str, ...]  # ensured Milvus collections (names without prefix)
    collections_created: tuple[str, ...]  # those that did not exist before this run
    identity_created: bool  # False: an existing key was kept
    keyid: str
    public_key_b64: str  # what the gateway's operator enrolls for this site id
    site_file: Path
    site_file_created: bool

    @property
    def already_installed(self) -> tuple[str, ...]:
        """The parts a re-run found in place (an idempotent second run lists all of them)."""
        parts = []
        if not self.graph.created:
            parts.append("graph schema")
        parts.extend(f"collection {name}" for name in self.collections if name not in self.collections_created)
        if not self.identity_created:
            parts.append("site identity")
        if not self.site_file_created:
            parts.append("site file")
        return tuple(parts)


def site_file(ctx: SiteContext) -> Path:
    return ctx.cfg.home / SITE_FILENAME


def read_site_file(ctx: SiteContext) -> dict[str, Any] | None:
    """The recorded install facts, or None when the site was never installed."""
    return read_site_file_in(ctx.cfg.home)


def read_site_file_in(home: Path) -> dict[str, Any] | None:
    """`read_site_file` for the site whose home is `home` (for checks that open no store)."""
    path = home / SITE_FILENAME
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        embedding = data["embedding"]
        if not (isinstance(data["site_id"], str) and isinstance(embedding["model_id"], str) and isinstance(embedding["dim"], int)):
            raise TypeError("wrong types")
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path} is damaged ({exc}); restore it from a backup or remove it and run `hansa site install`") from exc
    return data


def recorded_space(recorded: dict[str, Any]) -> EmbeddingSpace:
    emb = recorded["embedding"]
    return EmbeddingSpace(model_id=emb["model_id"], dim=emb["dim"], model_sha256=emb.get("model_sha256", ""))


def space_record(embedder: Any) -> dict[str, Any]:
    """What site.json records of the embedder the site's vectors were made with."""
    space = EmbeddingSpace.of(embedder)
    return {"model_id": space.model_id, "dim": space.dim, "model_sha256": space.model_sha256}


def space_mismatch(recorded: dict[str, Any], embedder: Any) -> str | None:
    """Why the configured embedder cannot work on this site's vectors, or None. A site installed
    before file hashes were recorded is matched on model id and dimension only."""
    have, want = recorded_space(recorded), EmbeddingSpace.of(embedder)
    if "model_sha256" not in recorded["embedding"]:
        want = EmbeddingSpace(model_id=want.model_id, dim=want.dim)
    if have == want:
        return None
    return f"this site's vectors were made with {have.describe()}, but the configured embedder is {want.describe()}"


def check_site_file(ctx: SiteContext, recorded: dict[str, Any] | None = None) -> dict[str, Any]:
    """Refuse to work in another embedding space (or under another site id) than the one installed.

    Jobs that read or publish vectors call this first; `recorded` avoids reading the file twice."""
    recorded = recorded if recorded is not None else read_site_file(ctx)
    if recorded is None:
        raise ConfigError(f"site not installed: {site_file(ctx)} is missing; run `hansa site install` first")
    mismatch = space_mismatch(recorded, ctx.embedder)
    if mismatch:
        raise ConfigError(f"{mismatch}: set [embedder] model back, or re-embed the site in the configured embedder "
                          "with `hansa site reembed`")
    if recorded["site_id"] != ctx.site_id:
        raise ConfigError(
            f"this site's home {ctx.cfg.home} was installed as site {recorded['site_id']!r}, not {ctx.site_id!r}: "
            "set [site] site_id back, or use another home for another site"
        )
    return recorded


def load_identity(ctx: SiteContext) -> SiteIdentity:
    """The site's signing identity; a missing key means the site was not installed."""
    if not _identity_exists(ctx.identity_dir):
        raise ConfigError(f"no site identity in {ctx.identity_dir}: run `hansa site install` first")
    return SiteIdentity.load(ctx.identity_dir)


def _identity_exists(directory: Path) -> bool:
    return os.path.lexists(directory / PRIVATE_KEY_FILE)


def _collection_exists(ctx: SiteContext, name: str) -> bool:
    try:
        ctx.vectors.count(name)
    except NotFoundError:
        return False
    return True


def check_one_site(ctx: SiteContext) -> None:
    """Refuse to install a second site into a graph database or Milvus prefix that holds one.

    Why refuse rather than share: every Hansa node would be read, summarized and published as this
    site's, under its key: another site's documents would leave under the wrong identity."""
    site_id = ctx.site_id
    owner = ctx.graph.installed_site()
    if owner is not None and owner != site_id:
        raise ConfigError(
            f"the {ctx.graph.backend} graph store already holds site {owner!r}; one store holds one site: give "
            f"site {site_id!r} its own database ([neo4j] database / [graph] path), or run `hansa site uninstall` "
            f"as {owner!r} first"
        )
    for name in COLLECTIONS:
        owner = ctx.vectors.collection_owner(name)
        if owner and owner != site_id:
            raise ConfigError(
                f"Milvus collection {ctx.cfg.milvus.collection_prefix}{name} belongs to site {owner!r}; one collection "
                f"prefix holds one site: give site {site_id!r} its own [milvus] collection_prefix"
            )


def install_site(ctx: SiteContext) -> InstallResult:
    """Check the backends, apply the schema, create collections and the key; safe to run again."""
    site_id = ctx.site_id
    recorded = read_site_file(ctx)
    if recorded is not None:
        check_site_file(ctx, recorded)  # before touching anything: a mismatch leaves nothing changed
    check_one_site(ctx)
    dim = ctx.embedder.dim

    graph_report = ctx.graph.install(site_id)
    created: list[str] = []
    for spec in (chunk_collection(dim, site_id), summary_collection(dim, site_id), sentence_collection(dim, site_id)):
        if not _collection_exists(ctx, spec.name):
            created.append(spec.name)
        ctx.vectors.ensure_collection(spec)  # refuses an existing collection of another dim

    identity_created = False
    if _identity_exists(ctx.identity_dir):
        identity = SiteIdentity.load(ctx.identity_dir)
    else:
        identity = SiteIdentity.generate()
        identity.save(ctx.identity_dir)
        identity_created = True

    path = site_file(ctx)
    if recorded is None:
        write_json_atomic(
            path,
            {
                "site_id": site_id,
                "embedding": space_record(ctx.embedder),
                "graph_backend": ctx.graph.backend,
                "keyid": identity.keyid,
                "installed_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
        )
    result = InstallResult(
        site_id=site_id,
        graph=graph_report,
        collections=COLLECTIONS,
        collections_created=tuple(created),
        identity_created=identity_created,
        keyid=identity.keyid,
        public_key_b64=identity.public_key_b64,
        site_file=path,
        site_file_created=recorded is None,
    )
    log.info(
        "site.installed",
        site_id=site_id,
        backend=graph_report.backend,
        dim=dim,
        identity_created=identity_created,
        already=",".join(result.already_installed) or "-",
    )
    return result
