"""`hansa gateway serve`: the gateway API under the production server, one opened gateway per worker.

Why its own module (like plugin/serving.py for the site): the server (hansa.core.wsgi_server) forks
workers and each opens its own gateway (embedder, Milvus connection, in-memory summary index), so
what the CLI hands it is an opener (`open_gateway_app`), and `check_serving` refuses before forking
what would make workers fail: above all more than one worker on Milvus Lite, whose data directory
admits one process. Workers share `<home>/state.sqlite` (hansa.core.shared_state): rate-limit
buckets, and the routing version that makes each worker reload what another accepted.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from hansa.core.config import Config
from hansa.core.errors import ConfigError
from hansa.core.wsgi_server import ServerOptions, behind_proxies, serve

MILVUS_LITE_ONE_PROCESS = (
    "{workers} gateway workers need a Milvus server: Milvus Lite ({uri}) allows one process per data "
    "directory, and every worker reads the durable summary store. Run one (`milvus-lite server "
    "--data-dir DIR --host 127.0.0.1 --port 19530`, or Milvus standalone) and point the gateway at it "
    "with HANSA_MILVUS_URI=http://127.0.0.1:19530, or serve with --workers 1."
)


def server_options(cfg: Config, host: str | None = None, port: int | None = None,
                   workers: int | None = None) -> ServerOptions:
    """The [gateway] serving settings, with command-line overrides."""
    return ServerOptions.of(cfg.gateway, "hansa-gateway", host, port, workers)


def check_serving(cfg: Config, options: ServerOptions) -> None:
    """Refuse, before any worker starts, what would make every worker fail."""
    from hansa.adapters.vector.milvus import is_server_uri

    options.validate()
    behind_proxies(lambda *a: None, cfg.gateway.proxy_hops, "[gateway] proxy_hops")  # validates the setting
    if cfg.gateway.admin_key:  # a weak admin key, or a client key, is refused here rather than in each worker
        from hansa.gateway.http.admin_auth import AdminKey

        AdminKey(cfg.gateway.admin_key)
    if options.workers > 1 and not is_server_uri(cfg.milvus_uri):
        raise ConfigError(MILVUS_LITE_ONE_PROCESS.format(workers=options.workers, uri=cfg.milvus_uri))


@contextmanager
def open_gateway_app(cfg: Config) -> Iterator[Any]:
    """In a worker: open the gateway over the shared state and yield its API app (behind the
    configured number of trusted proxies)."""
    from hansa.adapters.llm import open_llm
    from hansa.core.shared_state import SharedState
    from hansa.gateway.http.app import create_gateway_app
    from hansa.gateway.service import Gateway

    state = SharedState(cfg.state_path)
    try:
        # with [llm] configured, answers are written from the fused evidence (gateway/query/synthesize.py)
        with Gateway.open(cfg, shared=state, llm=open_llm(cfg)) as gw:
            yield behind_proxies(create_gateway_app(gw), cfg.gateway.proxy_hops, "[gateway] proxy_hops")
    finally:
        state.close()


def serve_gateway(cfg: Config, options: ServerOptions, *, on_ready: Any = None) -> None:
    """Check, then serve until stopped (SIGINT/SIGTERM)."""
    check_serving(cfg, options)
    serve(lambda: open_gateway_app(cfg), options, on_ready=on_ready)
