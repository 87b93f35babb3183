"""`hansa site uninstall`: remove exactly what `hansa site install` (and the site's jobs) created.

Why exactly: a site lives inside an organization's own Neo4j and Milvus. Uninstall drops the
Hansa* nodes, hansa's own constraints and indexes (named one by one, never by pattern over the
organization's schema), GDS graphs hansa projected, the site's Milvus collections, site.json,
the source roots and the term statistics built from the corpus (terms.json) — and nothing else. The signing key goes only with `keys=True`: the gateway
enrolled its public half, and a reinstall that keeps it can rejoin without a new enrolment. The
publication state (sequence floors) stays, so a reinstalled site keeps publishing above them.

Withdrawal first: a site a gateway accepted a publication from stays routable there until that
publication expires (days) or an admin revokes it, so before anything is removed uninstall signs
and delivers a publication holding no summary (plugin.publish.publish_withdrawal), which the
gateway honours by routing nothing to the site. If it cannot be delivered, nothing is removed
(`withdraw=False`, `hansa site uninstall --no-withdraw`, skips it on purpose).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hansa.adapters.graph.base import UninstallReport
from hansa.core.errors import ConfigError, HansaError
from hansa.core.logs import get_logger
from hansa.plugin.install import site_file
from hansa.plugin.publish import publish_withdrawal, read_state
from hansa.plugin.site import COLLECTIONS, SiteContext
from hansa.plugin.sources import sources_file
from hansa.plugin.vocabulary import TERMS_FILENAME
from hansa.sync.keys import PRIVATE_KEY_FILE, PUBLIC_KEY_FILE

log = get_logger(__name__)


@dataclass(frozen=True)
class UninstallResult:
    site_id: str
    graph: UninstallReport
    collections: tuple[str, ...]  # dropped (names without prefix)
    files: tuple[str, ...]  # removed from the site's home
    keys_removed: bool
    withdrawn_sequence: int | None = None  # the withdrawal the gateway accepted (None: none sent)


def uninstall_site(ctx: SiteContext, *, keys: bool = False, withdraw: bool = True,
                   gateway_url: str | None = None) -> UninstallResult:
    """Withdraw the site from its gateway (when one accepted a publication from it and `withdraw`),
    then remove the site's data, schema and collections (and its key with `keys`)."""
    site_id = ctx.site_id
    owner = ctx.graph.installed_site()
    if owner is not None and owner != site_id:
        raise ConfigError(
            f"the {ctx.graph.backend} graph store holds site {owner!r}, not {site_id!r}: uninstall it with "
            f"{owner!r}'s configuration (HANSA_SITE_SITE_ID={owner})"
        )
    for name in COLLECTIONS:
        vector_owner = ctx.vectors.collection_owner(name)
        if vector_owner and vector_owner != site_id:
            raise ConfigError(f"Milvus collection {name} belongs to site {vector_owner!r}, not {site_id!r}: nothing was removed")
    withdrawn = None
    if withdraw and read_state(ctx).accepted is not None:
        try:
            withdrawn = publish_withdrawal(ctx, gateway_url).sequence
        except HansaError as exc:
            raise type(exc)(f"could not withdraw site {site_id!r} from its gateway, so nothing was removed: {exc}; "
                            "fix that and run uninstall again, or pass --no-withdraw to leave the site routable "
                            "until its publication expires or an admin revokes it") from exc
    graph = ctx.graph.uninstall()
    dropped = []
    for name in COLLECTIONS:
        if ctx.vectors.collection_owner(name) is not None:
            ctx.vectors.drop(name)
            dropped.append(name)
    removed: list[str] = []
    paths: list[Path] = [site_file(ctx), sources_file(ctx.cfg.home), ctx.cfg.home / TERMS_FILENAME]
    if keys:
        paths += [ctx.identity_dir / PRIVATE_KEY_FILE, ctx.identity_dir / PUBLIC_KEY_FILE]
    for path in paths:
        if path.is_file() or path.is_symlink():
            path.unlink()
            removed.append(str(path))
    result = UninstallResult(
        site_id=site_id, graph=graph, collections=tuple(dropped), files=tuple(removed),
        keys_removed=keys and any(PRIVATE_KEY_FILE in p for p in removed), withdrawn_sequence=withdrawn,
    )
    log.info("site.uninstalled", site_id=site_id, nodes=graph.nodes, collections=",".join(dropped) or "-")
    return result
