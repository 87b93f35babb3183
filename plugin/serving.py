"""`hansa site serve`: the site API under the production server, one opened site per worker.

Why its own module: the server (hansa.core.wsgi_server) forks workers and each opens its own
stores, so what the CLI hands it is an *opener* (`open_site_app`), and what it checks before
forking (`check_serving`) must not open anything a worker needs to itself, above all Milvus Lite,
whose data directory admits one process.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from hansa.core.config import Config
from hansa.core.errors import ConfigError
from hansa.core.wsgi_server import ServerOptions, serve

MILVUS_LITE_ONE_PROCESS = (
    "{workers} workers need a Milvus server: Milvus Lite ({uri}) allows one process per data "
    "directory. Run one (`milvus-lite server --data-dir DIR --host 127.0.0.1 --port 19530`, or "
    "Milvus standalone), point the site at it with HANSA_MILVUS_URI=http://127.0.0.1:19530 (load "
    "this site's data into it by running install, ingest and communities against it), or serve "
    "with --workers 1."
)


def server_options(cfg: Config, host: str | None = None, port: int | None = None,
                   workers: int | None = None) -> ServerOptions:
    """The site's [site] serving settings, with command-line overrides."""
    return ServerOptions.of(cfg.site, "hansa-site", host, port, workers)


def check_serving(cfg: Config, options: ServerOptions) -> None:
    """Refuse, before any worker starts, what would make every worker fail or misbehave."""
    from hansa.adapters.vector.milvus import is_server_uri
    from hansa.plugin.install import SITE_FILENAME

    options.validate()
    if not cfg.site.site_id:
        raise ConfigError("no site id: set [site] site_id in hansa.toml or HANSA_SITE_SITE_ID")
    if not (cfg.home / SITE_FILENAME).is_file():
        raise ConfigError(f"site not installed: {cfg.home / SITE_FILENAME} is missing; run `hansa site install` first")
    if not cfg.site.gateway_public_key.strip():
        raise ConfigError("no gateway key: set [site] gateway_public_key (or HANSA_SITE_GATEWAY_PUBLIC_KEY) to the "
                          "federation gateway's public key; this site answers only requests signed with it")
    if options.workers > 1 and not is_server_uri(cfg.milvus_uri):
        raise ConfigError(MILVUS_LITE_ONE_PROCESS.format(workers=options.workers, uri=cfg.milvus_uri))


@contextmanager
def open_site_app(cfg: Config, republish: bool = False) -> Iterator[Any]:
    """In a worker: open the site, check it is the installed one, and yield its API app with the
    replay-nonce cache every worker shares (hansa.sync.nonce_store).

    With `republish`, the worker also runs the background re-publisher (hansa.plugin.republish):
    it lives in the workers, not the master, because only a worker holds the site open (Milvus
    Lite admits one process), and the workers take turns through the shared state so each check
    runs in exactly one of them."""
    from hansa.core.shared_state import SharedState
    from hansa.plugin.api import create_site_app
    from hansa.plugin.install import check_site_file
    from hansa.plugin.site import SiteContext
    from hansa.sync.nonce_store import SharedNonceCache

    state = SharedState(cfg.state_path)
    try:
        with SiteContext.open(cfg) as ctx:
            check_site_file(ctx)
            republisher = _republisher(ctx, state) if republish else None
            try:
                yield create_site_app(ctx, nonces=SharedNonceCache(state, namespace="site-nonces"))
            finally:
                if republisher is not None:
                    republisher.stop()
    finally:
        state.close()


def _republisher(ctx: Any, state: Any) -> Any:
    """This worker's re-publisher; a check runs only in the worker that claims its time slot."""
    import time

    from hansa.core.shared_state import Replayed
    from hansa.plugin.republish import Republisher, RepublishPolicy

    policy = RepublishPolicy.from_config(ctx)

    def my_turn() -> bool:
        now = time.time()
        slot = int(now // policy.check_s)
        try:
            state.claim_once("site-republish", str(slot), now + 2 * policy.check_s, now, capacity=1024)
        except Replayed:
            return False  # another worker checks in this slot
        return True

    return Republisher(ctx, ctx.cfg.site.gateway_url, policy, turn=my_turn).start()


def serve_site(cfg: Config, options: ServerOptions, *, on_ready: Any = None, republish: bool = False) -> None:
    """Check, then serve until stopped (SIGINT/SIGTERM)."""
    check_serving(cfg, options)
    serve(lambda: open_site_app(cfg, republish=republish and bool(cfg.site.gateway_url)), options, on_ready=on_ready)
