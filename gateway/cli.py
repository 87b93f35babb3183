"""`hansa gateway ...`: run the gateway and administer its registry of sites.

State lives under `<home>/gateway/` (registry.json); the summary index is in Milvus at
`cfg.milvus_uri`. Registry commands only touch the registry file, so they work while the gateway
runs (it re-reads the file on every request); a revoked site's summaries leave the index when the
gateway next starts, and routing ignores them from the moment of revocation.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Callable, TypeVar

import click

from hansa.core.config import Config
from hansa.core.errors import HansaError, InputError
from hansa.gateway.registry import SiteRegistry, utc_now

F = TypeVar("F", bound=Callable[..., Any])


def gateway_home(cfg: Config) -> Path:
    return cfg.home / "gateway"


def open_registry(cfg: Config) -> SiteRegistry:
    return SiteRegistry(gateway_home(cfg) / "registry.json")


def _config(ctx: click.Context) -> Config:
    return ctx.find_root().obj["config"]


def _friendly(fn: F) -> F:
    """A HansaError is a message for the operator, not a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except HansaError as exc:
            raise click.ClickException(str(exc)) from exc

    return wrapper  # type: ignore[return-value]


def _read_key(value: str) -> str:
    """A base64 public key given inline, or `@path` to the site's `site-ed25519.pub`."""
    if not value.startswith("@"):
        return value.strip()
    path = Path(value[1:]).expanduser()
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the public key file {path}: {exc}") from exc
    if len(text) > 1024 or "\n" in text:
        raise InputError(f"{path} should hold one line: the base64 public key")
    return text


@click.group("gateway")
def gateway() -> None:
    """Run the federation gateway and manage the sites enrolled in it."""


@gateway.command()
@click.option("--host", default=None, help="Interface to bind (default: [gateway] host).")
@click.option("--port", type=int, default=None, help="Port (default: [gateway] port).")
@click.pass_context
@_friendly
def serve(ctx: click.Context, host: str | None, port: int | None) -> None:
    """Serve the gateway API until interrupted."""
    from werkzeug.serving import make_server

    from hansa.adapters.embedder import open_embedder
    from hansa.adapters.vector.milvus import MilvusVectorStore
    from hansa.gateway.app import create_gateway_app

    cfg = _config(ctx)
    host = host or cfg.gateway.host
    port = cfg.gateway.port if port is None else port
    registry = open_registry(cfg)
    embedder = open_embedder(cfg)
    store = MilvusVectorStore(cfg.milvus_uri, token=cfg.milvus.token, prefix=cfg.milvus.collection_prefix)
    try:
        app = create_gateway_app(cfg, embedder, store, registry)
        server = make_server(host, port, app, threaded=True)
        click.echo(f"hansa gateway on http://{host}:{server.server_port} (registry {registry.path})")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    finally:
        store.close()


@gateway.command()
@click.option("--site-id", required=True, help="The site's id (lowercase letters, digits, '-').")
@click.option("--url", required=True, help="The site's base URL, e.g. https://site-a.example.org")
@click.option("--public-key", "public_keys", required=True, multiple=True,
              help="Base64 Ed25519 public key, or @FILE; repeat for several keys.")
@click.pass_context
@_friendly
def enroll(ctx: click.Context, site_id: str, url: str, public_keys: tuple[str, ...]) -> None:
    """Enrol a site: the gateway accepts its publications and may route questions to it."""
    rec = open_registry(_config(ctx)).enroll(site_id, url, [_read_key(k) for k in public_keys])
    click.echo(f"enrolled {rec.site_id} at {rec.url} with {len(rec.public_keys)} key(s)")


@gateway.command()
@click.argument("site_id")
@click.pass_context
@_friendly
def revoke(ctx: click.Context, site_id: str) -> None:
    """Revoke a site: nothing from it is accepted or routed to any more."""
    open_registry(_config(ctx)).revoke(site_id)
    click.echo(f"revoked {site_id}; its summaries leave the index when the gateway next starts")


@gateway.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
@_friendly
def sites(ctx: click.Context, as_json: bool) -> None:
    """List enrolled sites, their publication state and whether they are routable."""
    now = utc_now()
    records = open_registry(_config(ctx)).list()
    if as_json:
        click.echo(json.dumps({"sites": [r.view(now) for r in records]}, indent=2))
        return
    if not records:
        click.echo("no sites enrolled (hansa gateway enroll --site-id ... --url ... --public-key ...)")
        return
    header = ("SITE", "STATUS", "ROUTABLE", "SEQ", "SUMMARIES", "EXPIRES", "URL")
    rows_t = [
        (r.site_id, r.status, "yes" if r.is_routable(now) else "no",
         "-" if r.last_sequence is None else str(r.last_sequence), str(r.summary_count), r.expires or "-", r.url)
        for r in records
    ]
    widths = [max(len(row[i]) for row in [header, *rows_t]) for i in range(len(header))]
    for row in [header, *rows_t]:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
