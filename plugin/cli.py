"""`hansa site ...`: the commands a database admin runs to operate a site.

Each command opens the site from the configuration the root command loaded (`hansa --config ...
--home ...`), runs one job and closes it; heavy modules are imported inside the commands so that
`hansa site --help` stays instant. A HansaError becomes a one-line message and exit code 1.
"""
from __future__ import annotations

import dataclasses
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import click

from hansa.core.config import CONFIG_FILENAME, Config, load_config
from hansa.core.errors import HansaError

ORDER_HELP = """Run a site: your documents stay here; only signed summary embeddings leave.

\b
Run the commands in this order:
  1. hansa site install          check Neo4j/GDS (or the embedded store) and Milvus, create the
                                 collections and this site's signing key (safe to re-run)
  2. hansa site ingest PATH...   read, chunk, embed and graph documents (re-runs skip unchanged ones)
  3. hansa site communities      find communities (Leiden), summarize and embed them
  4. hansa site publish          sign the summaries and send them to the gateway (or --out FILE)
  5. hansa site serve            answer the gateway's retrieve requests over HTTP
Repeat 2-4 when documents change. `hansa site status` shows what the site holds.
"""


def _config() -> Config:
    """The Config the root `hansa` command loaded, or one from the environment when run alone."""
    click_ctx = click.get_current_context()
    obj = click_ctx.find_root().obj
    if isinstance(obj, dict) and isinstance(obj.get("config"), Config):
        return obj["config"]
    try:
        cfg = load_config()
    except HansaError as exc:
        raise click.ClickException(str(exc)) from exc
    click_ctx.find_root().obj = {"config": cfg}
    return cfg


@contextmanager
def _site() -> Iterator[Any]:
    """An opened SiteContext; every HansaError inside becomes a ClickException."""
    from hansa.plugin.site import SiteContext

    try:
        with SiteContext.open(_config()) as ctx:
            yield ctx
    except HansaError as exc:
        raise click.ClickException(str(exc)) from exc


def _echo_fields(title: str, obj: Any) -> None:
    """Print a result dataclass as `key: value` lines (nested dataclasses flattened)."""
    click.echo(title)
    values = dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else dict(obj)
    for key, value in values.items():
        if isinstance(value, dict):
            for sub, inner in value.items():
                click.echo(f"  {key}.{sub}: {inner}")
        elif isinstance(value, (list, tuple)):
            click.echo(f"  {key}: {', '.join(map(str, value)) if value else '-'}")
        else:
            click.echo(f"  {key}: {value}")


def _config_source() -> str:
    root = click.get_current_context().find_root()
    path = root.params.get("config_path") or os.environ.get("HANSA_CONFIG")
    if path:
        return str(path)
    candidate = _config().home / CONFIG_FILENAME
    return str(candidate) if candidate.is_file() else f"{candidate} (absent: built-in defaults + HANSA_* environment)"


@click.group(name="site", help=ORDER_HELP)
def site() -> None:
    pass


@site.command()
def install() -> None:
    """Check the backends and create schema, collections, signing key and site.json (idempotent)."""
    from hansa.plugin.install import install_site

    with _site() as ctx:
        result = install_site(ctx)
    g = result.graph
    click.echo(f"site {result.site_id} installed")
    click.echo(f"  graph: {g.backend} {g.server_version} ({g.gds_version}), schema v{g.schema_version}"
               f"{'' if g.created else ' (already installed)'}")
    click.echo(f"  collections: {', '.join(result.collections)}")
    click.echo(f"  identity: keyid {result.keyid}{' (created)' if result.identity_created else ' (already installed)'}")
    click.echo(f"  public key (enroll this at the gateway): {result.public_key_b64}")
    click.echo(f"  site file: {result.site_file}{'' if result.site_file_created else ' (already installed)'}")
    if result.already_installed:
        click.echo(f"already installed: {', '.join(result.already_installed)}")


@site.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show a progress bar on stderr.")
def ingest(paths: tuple[Path, ...], progress: bool) -> None:
    """Read, chunk, embed and graph the documents under PATH... (files or folders).

    Unchanged documents are skipped, changed ones replaced."""
    from hansa.plugin.ingest import ingest_paths

    with _site() as ctx:
        report = ingest_paths(ctx, list(paths), progress=progress)
    _echo_fields("ingest done", report)


@site.command()
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show a progress bar on stderr.")
def communities(progress: bool) -> None:
    """Find communities (Leiden) in the entity graph, summarize and embed them."""
    from hansa.plugin.communities import build_communities

    with _site() as ctx:
        report = build_communities(ctx, progress=progress)
    _echo_fields("communities done", report)


@site.command()
@click.option("--gateway", "gateway_url", default=None, metavar="URL",
              help="Gateway base URL (default: [site] gateway_url).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the signed envelope to FILE instead of sending it.")
@click.option("--retry", "retry_only", is_flag=True,
              help="Only resend what the outbox holds (<home>/outbox/: publications not yet answered).")
@click.option("--attempts", type=click.IntRange(1, 100), default=5, show_default=True,
              help="Delivery attempts per publication in this run (exponential backoff with jitter).")
def publish(gateway_url: str | None, out: Path | None, retry_only: bool, attempts: int) -> None:
    """Sign this site's community summaries and deliver them to the gateway (or to --out FILE).

    Only summaries that changed since the gateway's last accepted publication are sent. A
    publication that could not be delivered stays in the outbox and is resent first next time."""
    from hansa.plugin.outbox import RetryPolicy
    from hansa.plugin.publish import publish_summaries, resend_pending

    policy = RetryPolicy(attempts=attempts)
    with _site() as ctx:
        if retry_only:
            results = resend_pending(ctx, gateway_url=gateway_url, retry=policy)
            if not results:
                click.echo("outbox: nothing pending")
            for result in results:
                _echo_fields("resent", result)
            return
        result = publish_summaries(ctx, gateway_url=gateway_url, out=out, retry=policy)
    _echo_fields("published", result)


@site.command()
@click.option("--host", default=None, help="Interface to listen on (default: [site] host).")
@click.option("--port", default=None, type=click.IntRange(1, 65535), help="Port (default: [site] port).")
@click.option("--republish/--no-republish", default=True, show_default=True,
              help="Re-publish to [site] gateway_url in the background before the publication expires "
                   "and when the summaries change.")
def serve(host: str | None, port: int | None, republish: bool) -> None:
    """Answer the gateway's retrieve requests over HTTP (POST /v1/retrieve, GET /v1/health).

    While it serves, it keeps the site's publication fresh (see --republish): it publishes when
    less than [site] republish_remaining_share of the publication TTL remains, or when the
    summaries changed, checking every [site] republish_check_s seconds.

    This runs werkzeug's threaded development server, fine for a trial or a demo. In production put
    the app behind a WSGI server (e.g. gunicorn with one worker when Milvus Lite is used, since Lite
    allows one process per data directory) using `hansa.plugin.api:create_site_app`, and TLS in
    front of it."""
    from werkzeug.serving import run_simple

    from hansa.plugin.api import create_site_app
    from hansa.plugin.install import check_site_file

    cfg = _config()
    host = host or cfg.site.host
    port = port or cfg.site.port
    with _site() as ctx:
        check_site_file(ctx)
        app = create_site_app(ctx)
        republisher = _start_republisher(ctx) if republish else None
        click.echo(f"site {ctx.site_id} serving on http://{host}:{port} (development server; Ctrl-C stops)", err=True)
        try:
            run_simple(host, port, app, threaded=True, use_reloader=False, use_debugger=False)
        finally:
            if republisher is not None:
                republisher.stop()


def _start_republisher(ctx: Any) -> Any:
    """The background re-publisher of `serve`, or None (with a word why) when no gateway is set."""
    from hansa.plugin.republish import Republisher, RepublishPolicy

    url = ctx.cfg.site.gateway_url
    if not url:
        click.echo("not re-publishing: no [site] gateway_url (HANSA_SITE_GATEWAY_URL) is set", err=True)
        return None
    policy = RepublishPolicy.from_config(ctx)
    click.echo(f"re-publishing to {url} when under {policy.remaining_share:.0%} of the publication TTL "
               f"remains or the summaries change (checked every {policy.check_s:g} s)", err=True)
    return Republisher(ctx, url, policy).start()


@site.command()
def status() -> None:
    """What this site holds: counts, identity, last publication and configuration."""
    from hansa.plugin.install import load_identity, read_site_file
    from hansa.plugin.publish import read_state, state_file
    from hansa.plugin.site import CHUNKS, SUMMARIES

    with _site() as ctx:
        click.echo(f"site: {ctx.cfg.site.site_id or '(no site id configured)'}")
        click.echo(f"config: {_config_source()}")
        click.echo(f"home: {ctx.cfg.home}")
        recorded = read_site_file(ctx)
        if recorded is None:
            click.echo("installed: no (run `hansa site install`)")
        else:
            emb = recorded["embedding"]
            click.echo(f"installed: yes, at {recorded.get('installed_at', '?')}; embedding {emb['model_id']} (dim {emb['dim']})")
            identity = load_identity(ctx)
            click.echo(f"identity: keyid {identity.keyid}")
            click.echo(f"public key: {identity.public_key_b64}")
        stats = ctx.graph.stats() if recorded is not None else None
        if stats is not None:
            click.echo(f"graph ({ctx.graph.backend}): {stats.documents} documents, {stats.chunks} chunks, "
                       f"{stats.entities} entities, {stats.relations} relations, {stats.communities} communities")
            click.echo(f"vectors: {ctx.vectors.count(CHUNKS)} chunks, {ctx.vectors.count(SUMMARIES)} summaries")
        state = read_state(ctx)
        if state.sequence:
            click.echo(f"last publication: sequence {state.sequence}, {len(state.current)} summaries ({state_file(ctx)})")
        else:
            click.echo("last publication: none (run `hansa site publish`)")


def _write_new(out: Path, envelope: Any) -> None:
    """A signed request goes to a new file: never overwrite one that may already have been sent."""
    try:
        with open(out, "x", encoding="utf-8") as fh:
            fh.write(json.dumps(envelope, indent=2) + "\n")
    except FileExistsError as exc:
        raise click.ClickException(f"{out} already exists; choose another file") from exc


@site.command("join-request")
@click.option("--gateway-url", default=None, metavar="URL",
              help="The federation gateway this request is addressed to (default: [site] gateway_url).")
@click.option("--url", "site_url", default=None, metavar="URL",
              help="This site's base URL as the gateway will call it (default: http://[site] host:port).")
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the signed request; send it to the federation admins.")
def join_request(gateway_url: str | None, site_url: str | None, out: Path) -> None:
    """Ask a federation to admit this site: a request signed with the site's key (run install first).

    The admins approve it with `hansa gateway approve FILE --key ...`; only then does the gateway
    accept this site's publications."""
    from hansa.sync.keys import SiteIdentity
    from hansa.sync.membership import build_join_request

    cfg = _config()
    gateway_url = gateway_url or cfg.site.gateway_url
    if not gateway_url:
        raise click.ClickException("give --gateway-url (or set [site] gateway_url): the request names its federation")
    site_url = site_url or f"http://{cfg.site.host}:{cfg.site.port}"
    try:
        identity = SiteIdentity.load(cfg.keys_dir)
        envelope = build_join_request([identity], cfg.site.site_id, site_url, gateway_url)
    except HansaError as exc:
        raise click.ClickException(str(exc)) from exc
    _write_new(out, envelope)
    click.echo(f"join request for site {cfg.site.site_id} at {site_url} (key {identity.keyid}) written to {out}")


@site.command("rotate-request")
@click.option("--new-key-dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder for the new signing key (created; must not hold a key yet).")
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the signed rotation; send it to the federation admins.")
def rotate_request(new_key_dir: Path, out: Path) -> None:
    """Create a new signing key and a rotation request signed by the current key and the new one.

    After the admins run `hansa gateway rotate SITE_ID FILE --key ...`, move the current key away
    and the new key's two files into <home>/keys, then publish again."""
    from hansa.sync.keys import SiteIdentity
    from hansa.sync.membership import build_key_rotation

    cfg = _config()
    try:
        current = SiteIdentity.load(cfg.keys_dir)
        new = SiteIdentity.generate()
        new.save(new_key_dir)
        envelope = build_key_rotation(current, [current.public_key_b64], [new], cfg.site.site_id)
    except HansaError as exc:
        raise click.ClickException(str(exc)) from exc
    _write_new(out, envelope)
    click.echo(f"rotation request for site {cfg.site.site_id}: key {current.keyid} -> {new.keyid}, written to {out}")
