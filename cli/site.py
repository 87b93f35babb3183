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

from hansa.cli.context import friendly
from hansa.cli.options import deprecated_alias, gateway_option, json_option, print_json as _print_json
from hansa.core import logs
from hansa.core.config import CONFIG_FILENAME, Config
from hansa.core.errors import ConfigError, HansaError

ORDER_HELP = """Run a site: your documents stay here; only signed summary embeddings leave.

\b
Run the commands in this order:
  1. hansa site install          check Neo4j/GDS (or the embedded store) and Milvus, create the
                                 collections and this site's signing key (safe to re-run)
  2. hansa site ingest PATH...   read, chunk, embed and graph documents (re-runs skip unchanged ones;
                                 --source NAME names them, --sync removes what left the folder)
     or hansa site map           the same from your own Neo4j graph ([site.graph_map]), read-only
  3. hansa site communities      find communities (Leiden), summarize and embed them
  4. hansa site publish          sign the summaries and send them to the gateway (or --out FILE)
  5. hansa site serve            answer the gateway's retrieve requests over HTTP
Repeat 2-4 when documents change. `hansa site status` shows what the site holds,
`hansa site query "..."` asks it directly, `hansa site delete DOC_ID...` removes documents and
`hansa site uninstall` removes everything install created; `hansa site doctor` says what is
wrong and how to fix it.
"""


def _config() -> Config:
    """The Config the root `hansa` command loaded, or one from the environment when run alone."""
    from hansa.cli.context import root_config

    return root_config()  # type: ignore[return-value]


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
    def shown(value: Any) -> str:
        if isinstance(value, (list, tuple)):
            return ", ".join(map(str, value)) if value else "-"
        return str(value)

    for key, value in values.items():
        if isinstance(value, dict):
            for sub, inner in value.items():
                click.echo(f"  {key}.{sub}: {shown(inner)}")
        else:
            click.echo(f"  {key}: {shown(value)}")


def _report(title: str, obj: Any, as_json: bool) -> None:
    """A result dataclass as JSON (--json) or as `key: value` lines under `title`."""
    if as_json:
        _print_json(dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else obj)
    else:
        _echo_fields(title, obj)


def _config_source() -> str:
    root = click.get_current_context().find_root()
    path = root.params.get("config_path") or os.environ.get("HANSA_CONFIG")
    if path:
        return str(path)
    candidate = _config().home / CONFIG_FILENAME
    return str(candidate) if candidate.is_file() else f"{candidate} (absent: built-in defaults + HANSA_* environment)"


@click.group(name="site", help=ORDER_HELP)
@click.option("--site-id", default=None, metavar="SITE_ID",
              help="This site's id for this command (default: [site] site_id, HANSA_SITE_SITE_ID).")
def site(site_id: str | None) -> None:
    if site_id:
        from hansa.cli.context import root_config

        cfg = root_config(required=False)
        if cfg is not None:
            cfg.site.site_id = site_id


@site.command()
@json_option()
def install(as_json: bool) -> None:
    """Check the backends and create schema, collections, signing key and site.json (idempotent)."""
    from hansa.plugin.install import install_site

    with _site() as ctx:
        result = install_site(ctx)
    if as_json:
        _print_json({**dataclasses.asdict(result), "already_installed": list(result.already_installed)})
        return
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


def _bars(progress: bool) -> bool:
    """Whether a tqdm bar may draw: not with --log-json, where every stderr line is JSON (ingest
    reports its progress as log events instead: hansa.core.progress)."""
    return progress and not logs.json_mode()


def _after_deletion(ctx: Any, deleted: int, publish: bool, gateway_url: str | None, progress: bool) -> Any:
    """Refresh the communities a deletion touched and, with --publish, withdraw them at the gateway
    (the PublishResult, or None when nothing was published)."""
    from hansa.plugin.deletion import refresh_communities

    if not deleted:
        return None
    refreshed = refresh_communities(ctx, progress=_bars(progress))
    logs.notice(f"communities refreshed (seeded Leiden): {refreshed.communities if refreshed else 0}", "communities.refreshed")
    if refreshed is not None and refreshed.fallback:
        logs.notice(f"communities: {refreshed.fallback}", "communities.drift_fallback")
    if publish:
        from hansa.plugin.publish import publish_summaries

        return publish_summaries(ctx, gateway_url=gateway_url)
    logs.notice("run `hansa site publish` so the gateway withdraws what left", "publish.needed")
    return None


def _report_with_published(title: str, report: Any, published: Any, as_json: bool) -> None:
    """An ingest's or a delete's report, with the publication that followed it (if any)."""
    if as_json:
        _print_json({**dataclasses.asdict(report), "published": dataclasses.asdict(published) if published else None})
        return
    _echo_fields(title, report)
    if published is not None:
        _echo_fields("published", published)


_PUBLISH_OPTION = click.option(
    "--publish", is_flag=True, help="After removing documents, publish at once (withdrawals included).")
_GATEWAY_OPTION = gateway_option("Gateway base URL for --publish (default: [site] gateway_url).")


@site.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--source", default=None, metavar="NAME",
              help="The source these paths belong to: ids are NAME/<path inside its root> (default: each folder's name).")
@click.option("--sync", is_flag=True,
              help="Also remove stored documents under PATH... whose file (or JSONL record) is gone; refresh communities.")
@click.option("--skip-bad", is_flag=True,
              help="Go on past unreadable files and report them (default: one bad file aborts and writes nothing).")
@_PUBLISH_OPTION
@_GATEWAY_OPTION
@json_option()
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show a progress bar on stderr.")
def ingest(paths: tuple[Path, ...], source: str | None, sync: bool, skip_bad: bool, publish: bool,
           gateway_url: str | None, as_json: bool, progress: bool) -> None:
    """Read, chunk, embed and graph the documents under PATH... (files or folders).

    Unchanged documents are skipped, changed ones replaced. A document's id is
    SOURCE/<path inside the source's root folder> (a JSONL record keeps its own "id"); a source is
    bound to its root folder the first time it is used (<home>/sources.json), so the same file has
    the same id whether its folder or a parent is ingested. Unsupported files are skipped and listed."""
    from hansa.plugin.ingest import ingest_paths

    with _site() as ctx:
        report = ingest_paths(ctx, list(paths), progress=progress, source=source, sync=sync, skip_bad=skip_bad)
        for file in report.skipped:
            logs.notice(f"skipped (unsupported type): {file}", "ingest.skipped_unsupported", "warning", file=file)
        for problem in report.bad:
            logs.notice(f"skipped (unreadable): {problem}", "ingest.skipped_bad", "warning")
        published = _after_deletion(ctx, len(report.documents_deleted), publish, gateway_url, progress)
    _report_with_published("ingest done", report, published, as_json)


@site.command("map")
@_PUBLISH_OPTION
@_GATEWAY_OPTION
@json_option()
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show a progress bar on stderr.")
def map_command(publish: bool, gateway_url: str | None, as_json: bool, progress: bool) -> None:
    """Map the organization's own Neo4j graph ([site.graph_map]) into the site, read-only.

    Its documents' text is chunked and embedded as ingest does files, its entities and relations
    become the site's; nothing of the organization's is written. Re-runs skip unchanged documents
    and remove the ones gone from its graph. Then run `hansa site communities`."""
    from hansa.plugin.graph_map import map_graph

    with _site() as ctx:
        report = map_graph(ctx, progress=_bars(progress))
        for problem in report.skipped:
            logs.notice(f"skipped (no text): {problem}", "map.skipped", "warning")
        published = _after_deletion(ctx, len(report.documents_deleted), publish, gateway_url, progress)
    _report_with_published("map done", report, published, as_json)


@site.command()
@click.argument("doc_ids", nargs=-1, required=True)
@_PUBLISH_OPTION
@_GATEWAY_OPTION
@json_option()
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show a progress bar on stderr.")
def delete(doc_ids: tuple[str, ...], publish: bool, gateway_url: str | None, as_json: bool, progress: bool) -> None:
    """Remove documents by id (graph and vectors), then refresh the affected communities.

    Ids are as `hansa site query` cites them (SOURCE/path, or a JSONL record's id)."""
    from hansa.plugin.deletion import delete_documents

    with _site() as ctx:
        report = delete_documents(ctx, list(doc_ids))
        if report.unknown:
            logs.notice(f"not found (nothing done): {', '.join(report.unknown)}", "delete.unknown", "warning")
        published = _after_deletion(ctx, len(report.deleted), publish, gateway_url, progress)
    _report_with_published("delete done", report, published, as_json)


@site.command("migrate-ids")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--source", default=None, metavar="NAME", help="The source to file them under (default: each folder's name).")
@json_option()
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show a progress bar on stderr.")
def migrate_ids_command(paths: tuple[Path, ...], source: str | None, as_json: bool, progress: bool) -> None:
    """One-shot move of a site ingested before named sources to SOURCE/path ids.

    Give the same folders that were ingested back then: they are re-ingested under their source,
    the documents stored under the old ids are removed and the communities refreshed. Then run
    `hansa site publish`."""
    from hansa.plugin.migrate import migrate_ids

    with _site() as ctx:
        report = migrate_ids(ctx, list(paths), source=source, progress=_bars(progress))
    if as_json:
        _print_json(dataclasses.asdict(report))
        return
    click.echo(f"ids migrated: {len(report.renamed)} documents renamed")
    for old, new in sorted(report.renamed.items()):
        click.echo(f"  {old} -> {new}")
    _echo_fields("ingest", report.ingest)
    click.echo("run `hansa site publish` so the gateway follows" if report.communities_refreshed else "communities unchanged")


@site.command()
@click.argument("question")
@click.option("--top-k", type=click.IntRange(1, 100), default=5, show_default=True, help="Documents to cite.")
@click.option("--mode", type=click.Choice(["local", "global"]), default="local", show_default=True,
              help="local: chunk vectors + graph expansion; global: community summaries.")
@json_option("Print the partial answer as the gateway would receive it.")
def query(question: str, top_k: int, mode: str, as_json: bool) -> None:
    """Ask this site directly (no gateway, no signature): what would it answer and cite?

    For an admin checking a site after ingest or delete."""
    from hansa.plugin.install import check_site_file
    from hansa.plugin.retrieval import retrieve
    from hansa.sync.wire import RetrieveRequest

    with _site() as ctx:
        check_site_file(ctx)
        request = RetrieveRequest.from_json({"question": question, "top_k": top_k, "mode": mode})
        answer = retrieve(ctx, request)
    if as_json:
        _print_json(answer.to_json())
        return
    click.echo(answer.answer or "(no answer: nothing this site holds is about the question)")
    click.echo(f"confidence: {answer.confidence}")
    for i, c in enumerate(answer.citations, start=1):
        where = f", page {c.page}" if c.page else ""
        click.echo(f"[{i}] {c.doc_id}: {c.title}{where} (score {c.score}){' — ' + c.source if c.source else ''}")


@site.command()
@click.option("--delete-keys", is_flag=True, help="Also delete the site's signing key (the gateway enrolled its public half).")
@click.option("--withdraw/--no-withdraw", default=True, show_default=True,
              help="First sign and send the gateway a publication with no summary, so it stops routing to this site.")
@click.option("--gateway", "gateway_url", metavar="URL", help="The gateway to withdraw from (default: [site] gateway_url).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option()
@deprecated_alias("--keys", "delete_keys", "--delete-keys", flag=True)
def uninstall(delete_keys: bool, withdraw: bool, gateway_url: str | None, yes: bool, as_json: bool) -> None:
    """Remove what `install` created: Hansa* nodes, hansa's constraints/indexes, GDS projections,
    the site's Milvus collections, site.json and sources.json. Nothing of the organization's.

    A site that has published is first withdrawn from its gateway (a signed publication with no
    summary; nothing is removed if that fails). The signing key stays unless --delete-keys; the
    publication state stays (sequence floors)."""
    from hansa.plugin.uninstall import uninstall_site

    cfg = _config()
    if not yes:
        click.confirm(f"remove site {cfg.site.site_id!r} and all its data from its stores?", abort=True, err=True)
    with _site() as ctx:
        result = uninstall_site(ctx, keys=delete_keys, withdraw=withdraw, gateway_url=gateway_url)
    _report(f"site {result.site_id} uninstalled", result, as_json)


@site.command()
@click.option("--incremental", is_flag=True,
              help="Start Leiden from the stored communities (unchanged ones keep their ids; faster to publish).")
@json_option()
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show a progress bar on stderr.")
def communities(incremental: bool, as_json: bool, progress: bool) -> None:
    """Find communities (Leiden) in the entity graph, summarize and embed them."""
    from hansa.plugin.communities import build_communities

    with _site() as ctx:
        report = build_communities(ctx, progress=_bars(progress), incremental=incremental)
    _report("communities done", report, as_json)


@site.command()
@click.option("--force", is_flag=True, help="Re-embed even when site.json already names the configured embedder.")
@json_option()
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show a progress bar on stderr.")
def reembed(force: bool, as_json: bool, progress: bool) -> None:
    """Rewrite every vector (chunks, answer sentences, summaries) with the configured embedder.

    \b
    A planned embedder change, for every member of a federation:
        hansa embedder fetch bge-small-en-v1.5-q
        HANSA_EMBEDDER_MODEL=bge-small-en-v1.5-q hansa site reembed
        HANSA_EMBEDDER_MODEL=bge-small-en-v1.5-q hansa site publish
    Documents and communities stay as they are. Until it finishes the site refuses to serve in
    either space; after a crash, run it again.
    """
    from hansa.plugin.reembed import reembed as run

    with _site() as ctx:
        result = run(ctx, force=force, progress=_bars(progress))
    if as_json:
        _print_json(result.to_json())
    elif result.chunks == result.summaries == 0 and result.before == result.after:
        click.echo(f"nothing to do: the site's vectors are already {result.after.describe()} (--force to redo)")
    else:
        click.echo(f"re-embedded {result.chunks} chunks, {result.sentences} sentences and {result.summaries} summaries "
                   f"in {result.seconds:.1f} s: {result.before.describe()} -> {result.after.describe()}")


@site.command()
@gateway_option()
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the signed envelope to FILE instead of sending it.")
@click.option("--retry", "retry_only", is_flag=True,
              help="Only resend what the outbox holds (<home>/outbox/: publications not yet answered).")
@click.option("--attempts", type=click.IntRange(1, 100), default=5, show_default=True,
              help="Delivery attempts per publication in this run (exponential backoff with jitter).")
@json_option()
def publish(gateway_url: str | None, out: Path | None, retry_only: bool, attempts: int, as_json: bool) -> None:
    """Sign this site's community summaries and deliver them to the gateway (or to --out FILE).

    Only summaries that changed since the gateway's last accepted publication are sent. A
    publication that could not be delivered stays in the outbox and is resent first next time."""
    from hansa.plugin.outbox import RetryPolicy
    from hansa.plugin.publish import publish_summaries, resend_pending

    policy = RetryPolicy(attempts=attempts)
    with _site() as ctx:
        if retry_only:
            results = resend_pending(ctx, gateway_url=gateway_url, retry=policy)
            if as_json:
                _print_json({"resent": [dataclasses.asdict(r) for r in results]})
                return
            if not results:
                click.echo("outbox: nothing pending")
            for result in results:
                _echo_fields("resent", result)
            return
        result = publish_summaries(ctx, gateway_url=gateway_url, out=out, retry=policy)
    _report("published", result, as_json)


@site.command()
@click.option("--host", default=None, help="Interface to listen on (default: [site] host).")
@click.option("--port", default=None, type=click.IntRange(1, 65535), help="Port (default: [site] port).")
@click.option("--workers", default=None, type=click.IntRange(1, 64),
              help="Worker processes (default: [site] workers, 1). More than one needs a Milvus server.")
@click.option("--republish/--no-republish", default=True, show_default=True,
              help="Re-publish to [site] gateway_url in the background before the publication expires "
                   "and when the summaries change.")
@friendly
def serve(host: str | None, port: int | None, workers: int | None, republish: bool) -> None:
    """Answer the gateway's retrieve requests over HTTP (POST /v1/retrieve, GET /v1/health, GET /metrics).

    While it serves, it keeps the site's publication fresh (see --republish): it publishes when
    less than [site] republish_remaining_share of the publication TTL remains, or when the
    summaries changed, checking every [site] republish_check_s seconds (one worker per check).

    Runs gunicorn with --workers processes, each opening the site itself; replay nonces are shared
    between them in <home>/state.sqlite. With [site] tls_cert and tls_key it serves HTTPS. Milvus
    Lite allows one process per data directory: several workers need a Milvus server
    (HANSA_MILVUS_URI). Stop with Ctrl-C or SIGTERM."""
    from hansa.plugin.serving import server_options, serve_site

    cfg = _config()
    options = server_options(cfg, host, port, workers)

    if republish and not cfg.site.gateway_url:
        logs.notice("not re-publishing: no [site] gateway_url (HANSA_SITE_GATEWAY_URL) is set", "republish.off", "warning")
        republish = False

    def ready() -> None:
        logs.notice(f"site {cfg.site.site_id} serving on {options.scheme}://{options.bind} "
                    f"with {options.workers} worker(s) (Ctrl-C stops)"
                    + (f"; re-publishing to {cfg.site.gateway_url}" if republish else ""), "serve.ready")

    serve_site(cfg, options, on_ready=ready, republish=republish)


@site.command()
@json_option()
def status(as_json: bool) -> None:
    """What this site holds: counts, identity, last publication and configuration."""
    from hansa.plugin.install import load_identity, read_site_file
    from hansa.plugin.publish import read_state, state_file
    from hansa.plugin.site import CHUNKS, SUMMARIES
    from hansa.plugin.vocabulary import read_terms

    view: dict[str, Any] = {}
    with _site() as ctx:
        view.update(site_id=ctx.cfg.site.site_id or None, config=_config_source(), home=str(ctx.cfg.home))
        recorded = read_site_file(ctx)
        view["installed"] = recorded
        if recorded is not None:
            identity = load_identity(ctx)
            view["identity"] = {"keyid": identity.keyid, "public_key": identity.public_key_b64}
            view["graph"] = {"backend": ctx.graph.backend, **dataclasses.asdict(ctx.graph.stats())}
            view["vectors"] = {"chunks": ctx.vectors.count(CHUNKS), "summaries": ctx.vectors.count(SUMMARIES)}
            try:
                terms = read_terms(ctx)
            except ConfigError as exc:  # stale or damaged: status still reports, and says how to fix it
                view["terms"] = {"error": str(exc)}
            else:
                view["terms"] = (None if terms is None else
                                 {"terms": len(terms), "documents": terms.documents,
                                  "min_documents": terms.min_documents, "bytes": terms.stored_bytes()})
        state = read_state(ctx)
        view["last_publication"] = ({"sequence": state.sequence, "summaries": len(state.current),
                                     "state_file": str(state_file(ctx))} if state.sequence else None)
    if as_json:
        _print_json(view)
        return
    click.echo(f"site: {view['site_id'] or '(no site id configured)'}")
    click.echo(f"config: {view['config']}")
    click.echo(f"home: {view['home']}")
    if recorded is None:
        click.echo("installed: no (run `hansa site install`)")
    else:
        emb = recorded["embedding"]
        click.echo(f"installed: yes, at {recorded.get('installed_at', '?')}; embedding {emb['model_id']} (dim {emb['dim']})")
        click.echo(f"identity: keyid {view['identity']['keyid']}")
        click.echo(f"public key: {view['identity']['public_key']}")
        g, v = view["graph"], view["vectors"]
        click.echo(f"graph ({g['backend']}): {g['documents']} documents, {g['chunks']} chunks, "
                   f"{g['entities']} entities, {g['relations']} relations, {g['communities']} communities")
        click.echo(f"vectors: {v['chunks']} chunks, {v['summaries']} summaries")
        t = view["terms"]
        click.echo("term statistics: " + (
            "none (publish_terms off, or run `hansa site communities`)" if t is None else t["error"] if "error" in t
            else f"{t['terms']} words used by >= {t['min_documents']} documents ({t['bytes']} bytes), published"))
    last = view["last_publication"]
    if last:
        click.echo(f"last publication: sequence {last['sequence']}, {last['summaries']} summaries ({last['state_file']})")
    else:
        click.echo("last publication: none (run `hansa site publish`)")


@site.command()
@gateway_option("Gateway base URL whose routing of this site to check (default: [site] gateway_url).")
@json_option()
def doctor(gateway_url: str | None, as_json: bool) -> None:
    """Check what a site needs and say how to fix what is wrong: configuration, graph store (Neo4j
    reachable, 5.x, GDS and Leiden, hansa's constraints and indexes; or the embedded store), vector
    store and collections, the embedder (offline) and its dimension, the signing key and its
    permissions, the publication's freshness and whether the gateway routes to this site.

    Exit code 1 when any check fails. Run it while `hansa site serve` is stopped when the site
    uses Milvus Lite (one process per data directory)."""
    from hansa.cli.context import config_error, root_config
    from hansa.core.checks import FAIL
    from hansa.plugin.doctor import diagnose, failed

    cfg = root_config(required=False)
    checks = diagnose(cfg, config_error(), _config_source() if cfg is not None else _given_config_path(), gateway_url)
    if as_json:
        _print_json({"ok": not failed(checks), "checks": [c.to_json() for c in checks]})
    else:
        for c in checks:
            click.echo(f"{c.status.upper():<4}  {c.name}: {c.detail}")
            if c.status == FAIL and c.hint:
                click.echo(f"      fix: {c.hint}")
    if failed(checks):
        raise SystemExit(1)


def _given_config_path() -> str:
    root = click.get_current_context().find_root()
    return str(root.params.get("config_path") or os.environ.get("HANSA_CONFIG") or "the configuration")


def _write_new(out: Path, envelope: Any) -> None:
    """A signed request goes to a new file: never overwrite one that may already have been sent."""
    try:
        with open(out, "x", encoding="utf-8") as fh:
            fh.write(json.dumps(envelope, indent=2) + "\n")
    except FileExistsError as exc:
        raise click.ClickException(f"{out} already exists; choose another file") from exc


@site.command("join-request")
@gateway_option("The federation gateway this request is addressed to (default: [site] gateway_url).")
@click.option("--url", "site_url", default=None, metavar="URL",
              help="This site's base URL as the gateway will call it (default: http://[site] host:port).")
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the signed request; send it to the federation admins.")
@json_option()
@deprecated_alias("--gateway-url", "gateway_url", "--gateway")
@friendly
def join_request(gateway_url: str | None, site_url: str | None, out: Path, as_json: bool) -> None:
    """Ask a federation to admit this site: a request signed with the site's key (run install first).

    The admins approve it with `hansa gateway approve FILE --key ...`; only then does the gateway
    accept this site's publications."""
    from hansa.sync.keys import SiteIdentity
    from hansa.sync.membership import build_join_request

    cfg = _config()
    gateway_url = gateway_url or cfg.site.gateway_url
    if not gateway_url:
        raise click.ClickException("give --gateway (or set [site] gateway_url): the request names its federation")
    site_url = site_url or f"http://{cfg.site.host}:{cfg.site.port}"
    identity = SiteIdentity.load(cfg.keys_dir)
    envelope = build_join_request([identity], cfg.site.site_id, site_url, gateway_url)
    _write_new(out, envelope)
    if as_json:
        _print_json({"site_id": cfg.site.site_id, "url": site_url, "gateway_url": gateway_url,
                     "keyid": identity.keyid, "out": str(out)})
        return
    click.echo(f"join request for site {cfg.site.site_id} at {site_url} (key {identity.keyid}) written to {out}")


@site.command("rotate-request")
@click.option("--new-key-dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder for the new signing key (created; must not hold a key yet).")
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the signed rotation; send it to the federation admins.")
@json_option()
@friendly
def rotate_request(new_key_dir: Path, out: Path, as_json: bool) -> None:
    """Create a new signing key and a rotation request signed by the current key and the new one.

    After the admins run `hansa gateway rotate SITE_ID FILE --key ...`, move the current key away
    and the new key's two files into <home>/keys, then publish again."""
    from hansa.sync.keys import SiteIdentity
    from hansa.sync.membership import build_key_rotation

    cfg = _config()
    current = SiteIdentity.load(cfg.keys_dir)
    new = SiteIdentity.generate()
    new.save(new_key_dir)
    envelope = build_key_rotation(current, [current.public_key_b64], [new], cfg.site.site_id)
    _write_new(out, envelope)
    if as_json:
        _print_json({"site_id": cfg.site.site_id, "keyid": current.keyid, "new_keyid": new.keyid,
                     "new_key_dir": str(new_key_dir), "out": str(out)})
        return
    click.echo(f"rotation request for site {cfg.site.site_id}: key {current.keyid} -> {new.keyid}, written to {out}")
