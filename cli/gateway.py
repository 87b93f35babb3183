"""`hansa gateway ...`: run the gateway and govern its federation registry.

State lives under `<home>/gateway/` (gateway.trust.registry describes the files); the summary index is in
Milvus at `cfg.milvus_uri`. Every registry change is a new registry version signed by m of the n
federation keys (`--key`, by keyid or key folder) and submitted through the one verified path;
registry commands only touch files, so they work while the gateway runs, which applies the change
at its next request (a revoked site's summaries leave its index then). Signing goes through
gateway.trust.admin, the one module that holds federation keys, which nothing serving requests imports.

How a site joins: the site runs `hansa site join-request --gateway ... --out req.json` and
sends the file; admins check it out of band (who asked, from where) and run
`hansa gateway approve req.json --key K1 --key K2`. When the admins' keys are on different
machines, one drafts with `--out draft.json`, each countersigns with `hansa gateway federation sign
draft.json --key K`, and the last runs `hansa gateway federation submit draft.json`.
"""
from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import click

from hansa.cli.context import friendly, gateway_home, root_config
from hansa.cli.gateway_keys import api_key
from hansa.cli.gateway_router import router
from hansa.cli.options import deprecated_alias, gateway_option, json_option, print_json
from hansa.core.config import Config
from hansa.core.errors import InputError
from hansa.core.jsonsafe import loads_strict
from hansa.gateway.trust import admin
from hansa.gateway.trust.registry import SiteRegistry, utc_now
from hansa.gateway.trust.documents import REGISTRY_TYPE, Registry, SitePolicy
from hansa.sync.dsse import add_signature, unverified_payload
from hansa.sync.keys import SiteIdentity

MAX_DOCUMENT_BYTES = 4 * 1024 * 1024


def open_registry(cfg: Config) -> SiteRegistry:
    return SiteRegistry(gateway_home(cfg) / "registry.json")


def _config(ctx: click.Context) -> Config:
    return root_config(ctx)  # type: ignore[return-value]


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


def _read_document(path: Path) -> Any:
    """A signed document (join request, rotation, draft) as a JSON object, size-capped."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc}") from exc
    if len(data) > MAX_DOCUMENT_BYTES:
        raise InputError(f"{path} is larger than {MAX_DOCUMENT_BYTES} bytes: not a hansa document")
    return loads_strict(data)


def _write_document(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")


def _signers(ctx: click.Context, refs: tuple[str, ...]) -> list[SiteIdentity]:
    keys_dir = open_registry(_config(ctx)).keys_dir
    return [admin.load_key(ref, keys_dir) for ref in refs]


def _ttl(days: float) -> timedelta:
    if not 0 < days <= 3660:
        raise InputError("--days must be between 0 and 3660")
    return timedelta(days=days)


KEY_OPTION = click.option(
    "--key", "keys", multiple=True, required=True, metavar="KEY",
    help="A federation key that signs: its keyid (from `federation init`) or its folder. Repeat for m of n.",
)
OUT_OPTION = click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="Write the signed draft here instead of submitting it (other admins add signatures).",
)
DAYS_OPTION = click.option("--days", type=float, default=90.0, show_default=True,
                           help="Lifetime of the new registry version.")


def _apply(ctx: click.Context, change: admin.Change, keys: tuple[str, ...], out: Path | None,
           as_json: bool = False) -> Registry | None:
    """Submit `change` signed by `keys`, or write it as a draft to `out` (threshold not needed yet)."""
    registry = open_registry(_config(ctx))
    signers = _signers(ctx, keys)
    if out is not None:
        envelope = admin.draft(registry, change, signers, need_threshold=False)
        _write_document(out, envelope)
        if as_json:
            print_json({"draft": str(out), "signatures": len(envelope["signatures"])})
        else:
            click.echo(f"draft written to {out} with {len(envelope['signatures'])} signature(s); "
                       "countersign with `hansa gateway federation sign`, then `federation submit`")
        return None
    return admin.change(registry, change, signers)


def _say(as_json: bool, text: str, obj: dict[str, Any]) -> None:
    """One result: `obj` as JSON with --json, else the sentence `text`."""
    if as_json:
        print_json(obj)
    else:
        click.echo(text)


@click.group("gateway")
def gateway() -> None:
    """Run the federation gateway and govern the sites in its registry."""


def _warn_if_unreachable(cfg: Config, site: str, url: str) -> None:
    """Say at admission, not first at query time, that this gateway will not call the site's URL."""
    from hansa.gateway.client import refused_unless_private_allowed

    why = None if cfg.gateway.allow_private_addresses else refused_unless_private_allowed(url)
    if why:
        click.echo(f"warning: {site}'s URL {url}: {why}. This gateway will not call it unless it serves with "
                   "--allow-private-addresses (HANSA_GATEWAY_ALLOW_PRIVATE_ADDRESSES=true): a test federation "
                   "on one host or a private network only.", err=True)


@gateway.command()
@click.option("--host", default=None, help="Interface to bind (default: [gateway] host).")
@click.option("--port", type=int, default=None, help="Port (default: [gateway] port).")
@click.option("--workers", type=click.IntRange(1, 64), default=None,
              help="Worker processes (default: [gateway] workers; more than one needs a Milvus server).")
@click.option("--allow-private-addresses", is_flag=True, default=False,
              help="Call sites on loopback and private addresses too: a test federation on one host or a "
                   "private network ([gateway] allow_private_addresses). Link-local and cloud-metadata "
                   "addresses stay refused.")
@click.pass_context
@friendly
def serve(ctx: click.Context, host: str | None, port: int | None, workers: int | None,
          allow_private_addresses: bool) -> None:
    """Serve the gateway API (gunicorn) until interrupted; HTTPS with [gateway] tls_cert/tls_key."""
    from dataclasses import replace

    from hansa.gateway.client import gateway_identity
    from hansa.gateway.http.serving import serve_gateway, server_options

    cfg = _config(ctx)
    if allow_private_addresses:
        cfg = replace(cfg, gateway=replace(cfg.gateway, allow_private_addresses=True))
    options = server_options(cfg, host, port, workers)
    public_key = gateway_identity(gateway_home(cfg)).public_key_b64  # created here, not raced by workers

    def ready() -> None:
        click.echo(f"hansa gateway on {options.scheme}://{options.bind} with {options.workers} worker(s) "
                   f"(registry {open_registry(cfg).path}; sites set [site] gateway_public_key = {public_key})")
        if cfg.gateway.allow_private_addresses:
            click.echo("calls to sites on loopback and private addresses are allowed (a test federation)", err=True)

    serve_gateway(cfg, options, on_ready=ready)


@gateway.command()
@json_option()
@click.pass_context
@friendly
def identity(ctx: click.Context, as_json: bool) -> None:
    """Print the gateway's public signing key (created on first use).

    Every call the gateway makes to a site is signed with this key (RFC 9421); each site accepts
    calls only from it. Give it to site operators for `[site] gateway_public_key`
    (or HANSA_SITE_GATEWAY_PUBLIC_KEY)."""
    from hansa.gateway.client import gateway_identity

    key = gateway_identity(gateway_home(_config(ctx)))
    _say(as_json, key.public_key_b64, {"public_key": key.public_key_b64, "keyid": key.keyid})


@gateway.command()
@click.option("--data", "data", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True, multiple=True,
              help="JSON lines of fit-split rows {model: gate|abstain|escalate|tiers|reader, question_id, label, features"
                   "[, step, site]} (hansa eval --split fit --calibration-rows writes them; its router rows are "
                   "for `hansa gateway router train --rows` and ignored here). Repeatable: the rows of every file.")
@click.option("--onto", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Start from this calibration: what the rows fit replaces its part, the rest is kept (e.g. add "
                   "tier cut-offs from `hansa eval --split fit --routing-only --calibration-rows` rows).")
@click.option("--tier-quantiles", default=None, metavar="HIGH,MODERATE,POTENTIAL",
              help="Tier cut-offs: the shares of the fit rows' gold sites whose gap to the leader falls within "
                   "HIGH, MODERATE (asked in the first round) and POTENTIAL (left to refinement) (default "
                   "0.5,0.96,0.99).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the calibration (default: [gateway] calibration_file in the gateway home).")
@click.option("--min-in-domain-answered", type=click.FloatRange(0.01, 1.0), default=None,
              help="Share of in-domain origins (those holding all of a question's gold evidence) the gate must "
                   "answer locally on the fit rows (default 0.90).")
@click.option("--gate-targets", type=str, default=None, metavar="IN,OUT",
              help="Choose the gate's share for two targets instead: escalate at most IN of in-domain asks and at "
                   "least OUT of the others: out-of-domain origins and those holding part of the evidence "
                   "(e.g. 0.15,0.95); the share whose fit rates leave the most "
                   "room to the nearer target wins. Not with --min-in-domain-answered.")
@click.option("--min-answerable-answered", type=click.FloatRange(0.01, 1.0), default=None,
              help="Share of answerable questions that must not abstain on the fit rows (default 0.92).")
@click.option("--min-recall", type=click.FloatRange(0.01, 1.0), default=None,
              help="Escalation: share of fit questions whose gold site must be asked when the rule is replayed "
                   "on the rows (default 0.96); the schedule and threshold asking the fewest sites win.")
@click.option("--max-sites", type=click.FloatRange(1.0, None), default=None,
              help="Escalation under a budget instead: the highest replayed recall asking at most this many sites "
                   "per question on average (e.g. 4 for 25% of 16 sites); overrides --min-recall.")
@click.option("--reader-floor", is_flag=True,
              help="With reader rows: fit one reader floor (replacing the model card's floors per kind of question) "
                   "instead of abstention over the evidence and the reader's score (`read_abstain`, the default when "
                   "the rows carry the evidence).")
@json_option()
@click.pass_context
@friendly
def calibrate(ctx: click.Context, data: tuple[Path, ...], onto: Path | None, tier_quantiles: str | None, out: Path | None,
              min_in_domain_answered: float | None, gate_targets: str | None, min_answerable_answered: float | None,
              min_recall: float | None, max_sites: float | None, reader_floor: bool, as_json: bool) -> None:
    """Fit the gate, abstention and escalation (logistic models), the tier cut-offs and, from reader
    rows, abstention after reading (or the reader's floor) on labelled fit-split rows; the gateway
    loads the file at its next start, escalates round by round when it holds an escalation model,
    tiers sites (the tiers and refine policies) by its cut-offs, and withdraws an answer the
    reader-aware model finds too weak. Prints the fit's rates (on the fit rows themselves)."""
    from hansa.gateway.query import calibrate as fitting
    from hansa.gateway.query.calibration import read_calibration
    from hansa.gateway.query.tiers import DEFAULT_QUANTILES
    from hansa.gateway.service import calibration_path

    cfg = _config(ctx)
    targets = _gate_targets(gate_targets, min_in_domain_answered)
    quantiles = _tier_quantiles(tier_quantiles) if tier_quantiles is not None else DEFAULT_QUANTILES
    base = read_calibration(onto) if onto is not None else None
    rows = [row for path in data for row in fitting.read_rows(path)]
    note = "hansa gateway calibrate " + " ".join(f"--data {path.name}" for path in data) \
        + (f" --onto {onto.name}" if onto is not None else "")
    cal = fitting.calibrate(
        rows, note=note, onto=base, tier_quantiles=quantiles,
        min_in_domain_answered=min_in_domain_answered or fitting.DEFAULT_MIN_IN_DOMAIN_ANSWERED,
        min_answerable_answered=min_answerable_answered or fitting.DEFAULT_MIN_ANSWERABLE_ANSWERED,
        min_recall=min_recall or fitting.DEFAULT_MIN_RECALL, max_sites=max_sites, reader_floor=reader_floor)
    if targets is not None:
        cal = fitting.balance_gate(cal, rows, *targets, note=note)
    path = out or calibration_path(cfg.gateway, gateway_home(cfg))
    cal.save(path)
    report = {"calibration": str(path), "fit_rates": fitting.rates(cal, rows),
              **{k: v["fit"] for k, v in cal.to_json().items() if isinstance(v, dict)}}
    if as_json:
        print_json(report)
        return
    click.echo(f"calibration written to {path}")
    for key, value in report["fit_rates"].items():
        click.echo(f"  {key}: {value}")


def _tier_quantiles(value: str) -> tuple[float, float, float]:
    try:
        high, moderate, potential = (float(v) for v in value.split(","))
    except ValueError:
        raise click.BadParameter(f"expected HIGH,MODERATE,POTENTIAL such as 0.5,0.96,0.99, got {value!r}",
                                 param_hint="--tier-quantiles") from None
    if not 0.0 <= high <= moderate <= potential <= 1.0:
        raise click.BadParameter("the three shares must lie in 0..1 and not decrease", param_hint="--tier-quantiles")
    return high, moderate, potential


def _gate_targets(value: str | None, min_in_domain_answered: float | None) -> tuple[float, float] | None:
    if value is None:
        return None
    if min_in_domain_answered is not None:
        raise click.UsageError("--gate-targets chooses the gate's share itself: drop --min-in-domain-answered")
    try:
        low, high = (float(v) for v in value.split(","))
    except ValueError:
        raise click.BadParameter(f"expected IN,OUT such as 0.15,0.95, got {value!r}", param_hint="--gate-targets")
    if not (0.0 < low < 1.0 and 0.0 < high < 1.0):
        raise click.BadParameter("both shares must lie strictly between 0 and 1", param_hint="--gate-targets")
    return low, high


# -- the federation's root of trust ---------------------------------------------------------------
@gateway.group("federation")
def federation() -> None:
    """The federation's keys (m of n must sign every registry change) and its signed registry."""


@federation.command("init")
@click.option("--threshold", type=int, required=True, help="How many keys must sign a change (m).")
@click.option("--keys", "key_count", type=int, required=True, help="How many federation keys to create (n).")
@gateway_option("This gateway's public URL: join requests must be addressed to it.")
@DAYS_OPTION
@json_option()
@deprecated_alias("--gateway-url", "gateway_url", "--gateway")
@click.pass_context
@friendly
def federation_init(ctx: click.Context, threshold: int, key_count: int, gateway_url: str | None, days: float,
                    as_json: bool) -> None:
    """Create n federation keys and the federation's first root and (empty) registry.

    The keys are written under <home>/gateway/federation-keys/<keyid>/ (files 0600). That suits a
    trial. In production each key belongs to a different admin: move each folder to its admin's
    machine or token and delete it here; the gateway itself needs none of them to run."""
    registry = open_registry(_config(ctx))
    identities = admin.init_federation(registry, threshold, key_count, gateway_url, registry_ttl=_ttl(days))
    if as_json:
        print_json({"threshold": threshold, "keys": [{"keyid": i.keyid, "folder": str(registry.keys_dir / i.keyid)}
                                                      for i in identities]})
        return
    click.echo(f"federation created: {threshold} of {key_count} keys must sign every registry change")
    for identity in identities:
        click.echo(f"  key {identity.keyid}  ({registry.keys_dir / identity.keyid})")
    click.echo("In production give each key to a different admin and remove it from this machine.")


@federation.command("renew")
@KEY_OPTION
@DAYS_OPTION
@OUT_OPTION
@json_option()
@click.pass_context
@friendly
def federation_renew(ctx: click.Context, keys: tuple[str, ...], days: float, out: Path | None, as_json: bool) -> None:
    """Sign the registry again under a new version and expiry (a registry that expires is refused)."""
    reg = _apply(ctx, admin.renewal(_ttl(days)), keys, out, as_json)
    if reg is not None:
        _say(as_json, f"registry version {reg.version} in force until {reg.expires}",
             {"registry_version": reg.version, "expires": reg.expires})


@federation.command("sign")
@click.argument("draft", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@KEY_OPTION
@json_option()
@click.pass_context
@friendly
def federation_sign(ctx: click.Context, draft: Path, keys: tuple[str, ...], as_json: bool) -> None:
    """Countersign a registry DRAFT in place (each admin with their own key)."""
    envelope = _read_document(draft)
    proposed = Registry.from_bytes(unverified_payload(envelope, REGISTRY_TYPE))  # shown before signing
    root = open_registry(_config(ctx)).root
    if root is None:
        raise InputError("this gateway has no federation yet: run `hansa gateway federation init`")
    for identity in admin.authorized(root, _signers(ctx, keys), need_threshold=False):
        envelope = add_signature(envelope, identity)
    _write_document(draft, envelope)
    _say(as_json, f"signed registry version {proposed.version} ({len(proposed.sites)} sites); "
                  f"{len(envelope['signatures'])} signature(s), {root.threshold} needed",
         {"registry_version": proposed.version, "sites": len(proposed.sites),
          "signatures": len(envelope["signatures"]), "threshold": root.threshold})


@federation.command("submit")
@click.argument("draft", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@json_option()
@click.pass_context
@friendly
def federation_submit(ctx: click.Context, draft: Path, as_json: bool) -> None:
    """Put a fully signed registry DRAFT in force (verified: threshold, version, expiry)."""
    reg = open_registry(_config(ctx)).submit_registry(_read_document(draft))
    _say(as_json, f"registry version {reg.version} in force until {reg.expires}",
         {"registry_version": reg.version, "expires": reg.expires})


@federation.command("rotate-root")
@KEY_OPTION
@click.option("--new-keys", "new_key_count", type=int, required=True, help="How many new federation keys to create.")
@click.option("--threshold", type=int, required=True, help="How many new keys must sign a change.")
@json_option()
@click.pass_context
@friendly
def federation_rotate_root(ctx: click.Context, keys: tuple[str, ...], new_key_count: int, threshold: int,
                           as_json: bool) -> None:
    """Replace the federation keys: the new root is signed by m of the old keys and by the new ones."""
    registry = open_registry(_config(ctx))
    root, current = registry.root, registry.registry
    if root is None or current is None:
        raise InputError("this gateway has no federation yet: run `hansa gateway federation init`")
    old = _signers(ctx, keys)
    admin.authorized(root, old)  # refuse before creating any key
    new = admin.create_keys(registry.keys_dir, new_key_count)
    root_env, registry_env = admin.rotate_root(root, current, old, new, threshold, registry.clock())
    rotated = registry.submit_root(root_env, registry_env)
    if as_json:
        print_json({"root_version": rotated.version, "threshold": threshold, "keys": [i.keyid for i in new]})
        return
    click.echo(f"federation root version {rotated.version}: {threshold} of {new_key_count} new keys")
    for identity in new:
        click.echo(f"  key {identity.keyid}")


# -- site membership ------------------------------------------------------------------------------
@gateway.command()
@click.argument("request_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@KEY_OPTION
@click.option("--max-summaries", type=int, default=None, help="Policy: most summaries one publication may carry.")
@OUT_OPTION
@json_option()
@click.pass_context
@friendly
def approve(ctx: click.Context, request_file: Path, keys: tuple[str, ...], max_summaries: int | None,
            out: Path | None, as_json: bool) -> None:
    """Admit the site of a join request (from `hansa site join-request`) in a new registry version."""
    from hansa.sync.membership import open_join_request

    policy = SitePolicy(max_summaries) if max_summaries is not None else None
    document = _read_document(request_file)
    reg = _apply(ctx, admin.admission(document, policy), keys, out, as_json)
    if reg is not None:
        _say(as_json, f"registry version {reg.version}: site admitted ({request_file})",
             {"registry_version": reg.version, "admitted": str(request_file)})
    request = open_join_request(document, utc_now())  # it verified above: read its site and URL
    _warn_if_unreachable(_config(ctx), request.site_id, request.url)


def _disputes_cell(row: dict[str, Any] | None) -> str:
    """How many distinct sites it stood against in contradictions, and whether that made it broad."""
    if row is None:
        return "-"
    return f"{len(row.get('disputed_with', ()))}" + (" (broad)" if row.get("broadly_disputed") else "")


def _share_cell(row: dict[str, Any] | None) -> str:
    return "-" if row is None else f"{100 * row['routing_share']:.0f}%"


@gateway.command()
@click.argument("site_id")
@click.argument("rotation_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@KEY_OPTION
@OUT_OPTION
@json_option()
@click.pass_context
@friendly
def rotate(ctx: click.Context, site_id: str, rotation_file: Path, keys: tuple[str, ...], out: Path | None,
           as_json: bool) -> None:
    """Replace SITE_ID's keys by a rotation signed by one current key and every new key.

    When none of the old keys survives, the site's publication floor starts again (recovery after
    a key compromise: nothing signed by the old keys verifies any more)."""
    reg = _apply(ctx, admin.rotation(site_id, _read_document(rotation_file)), keys, out, as_json)
    if reg is not None:
        entry = reg.require(site_id)
        _say(as_json, f"registry version {reg.version}: {site_id} key set version {entry.keys_version}",
             {"registry_version": reg.version, "site_id": site_id, "keys_version": entry.keys_version})


@gateway.command()
@click.argument("site_id")
@KEY_OPTION
@OUT_OPTION
@json_option()
@click.pass_context
@friendly
def revoke(ctx: click.Context, site_id: str, keys: tuple[str, ...], out: Path | None, as_json: bool) -> None:
    """Revoke a site: nothing from it is accepted or routed to any more."""
    reg = _apply(ctx, admin.revocation(site_id), keys, out, as_json)
    if reg is not None:
        _say(as_json, f"registry version {reg.version}: revoked {site_id}; a running gateway drops its "
                      "summaries at its next request", {"registry_version": reg.version, "revoked": site_id})


@gateway.command()
@click.option("--site-id", required=True, help="The site's id (lowercase letters, digits, '-').")
@click.option("--url", "site_url", required=True, help="The site's base URL, e.g. https://site-a.example.org")
@click.option("--public-key", "public_keys", required=True, multiple=True,
              help="Base64 Ed25519 public key, or @FILE; repeat for several keys.")
@click.option("--key", "keys", multiple=True, metavar="KEY",
              help="Federation keys that sign (default: every federation key kept on this machine).")
@json_option()
@click.pass_context
@friendly
def enroll(ctx: click.Context, site_id: str, site_url: str, public_keys: tuple[str, ...], keys: tuple[str, ...],
           as_json: bool) -> None:
    """Trials and demos: admit a site from its public key in one step, signed with the federation
    keys on this machine (a gateway without a federation gets a 1-of-1 one). Real sites send a join
    request instead."""
    registry = open_registry(_config(ctx))
    rec = admin.enroll(registry, site_id, site_url, [_read_key(k) for k in public_keys], keys=_signers(ctx, keys) if keys else None)
    _say(as_json, f"enrolled {rec.site_id} at {rec.url} with {len(rec.public_keys)} key(s) "
                  f"(registry version {registry.registry.version})",
         {"site_id": rec.site_id, "url": rec.url, "public_keys": len(rec.public_keys),
          "registry_version": registry.registry.version})
    _warn_if_unreachable(_config(ctx), rec.site_id, rec.url)


@gateway.command()
@json_option("Print JSON instead of a table.")
@click.pass_context
@friendly
def sites(ctx: click.Context, as_json: bool) -> None:
    """Show the verified registry: its version and expiry, and each site's keys and publication,
    with what this gateway learned of it: its reliability (a success only when independent sites or
    the reader confirmed it, a failure when it lost a contradiction, overclaimed, echoed the
    question or answered far below what its summaries promised), its claim gap (the routing
    discount its answers earned, gateway.query.conduct), the share of the last 200 routed questions that
    asked it (every worker's), the distinct sites it stood against in contradictions ("broad" when
    its side counts for nothing against a site that is not: [gateway] dispute_breadth) and any
    quarantine."""
    cfg = _config(ctx)
    registry = open_registry(cfg)
    now = registry.clock()
    root, current, records = registry.root, registry.registry, registry.list()
    learned, conduct, held = _learned(cfg)
    if as_json:
        click.echo(json.dumps({
            "root": None if root is None else {**root.to_json(), "expired": root.is_expired(now)},
            "registry": None if current is None else {
                "version": current.version, "expires": current.expires, "expired": current.is_expired(now),
                "gateway_url": current.gateway_url},
            "sites": [{**r.view(now), **({"reliability": learned[r.site_id]} if r.site_id in learned else {}),
                       **({"conduct": conduct[r.site_id]} if r.site_id in conduct else {})} for r in records],
        }, indent=2))
        return
    if root is None or current is None:
        click.echo("no federation yet (hansa gateway federation init --threshold M --keys N)")
        return
    click.echo(f"federation root v{root.version}: {root.threshold} of {len(root.keys)} keys, expires {root.expires}"
               f"{'  EXPIRED' if root.is_expired(now) else ''}")
    click.echo(f"registry v{current.version}: expires {current.expires}"
               f"{'  EXPIRED: nothing is routed or accepted until admins renew it' if current.is_expired(now) else ''}")
    if not records:
        click.echo("no sites enrolled (a site sends `hansa site join-request`; `hansa gateway approve` admits it)")
        return
    header = ("SITE", "STATUS", "KEYS", "ROUTABLE", "SEQ", "SUMMARIES", "EXPIRES", "RELIABILITY", "CLAIM GAP", "ROUTED",
              "DISPUTED", "URL")
    rows_t = [
        (r.site_id, r.status, f"v{r.keys_version}",
         "quarantined" if r.site_id in held else "yes" if r.is_routable(now) else "no",
         "-" if r.last_sequence is None else str(r.last_sequence), str(r.summary_count), r.expires or "-",
         _reliability_cell(learned.get(r.site_id)), _gap_cell(conduct.get(r.site_id)),
         _share_cell(conduct.get(r.site_id)), _disputes_cell(conduct.get(r.site_id)), r.url)
        for r in records
    ]
    widths = [max(len(row[i]) for row in [header, *rows_t]) for i in range(len(header))]
    for row in [header, *rows_t]:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


def _learned(cfg: Config) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], dict[str, str]]:
    """(reliability, conduct, quarantine) per site from the gateway's files, read as they stand."""
    from hansa.gateway.query.conduct import FILE_NAME as CONDUCT_FILE, SiteConduct
    from hansa.gateway.query.reliability import FILE_NAME as RELIABILITY_FILE, SiteReliability

    home = gateway_home(cfg)
    learned: dict[str, dict[str, Any]] = {}
    conducts: dict[str, dict[str, Any]] = {}
    held: dict[str, str] = {}
    if (home / RELIABILITY_FILE).exists():  # a read: no file is created where none is
        rel = SiteReliability.for_gateway(cfg, home)
        try:
            learned = {str(r["site_id"]): r for r in rel.view()}
        finally:
            rel.close()
    if (home / CONDUCT_FILE).exists():
        conduct = SiteConduct.for_gateway(cfg.gateway, home)
        try:
            conducts, held = {s: v.to_json() for s, v in conduct.view().items()}, conduct.quarantined()
        finally:
            conduct.close()
    return learned, conducts, held


def _reliability_cell(row: dict[str, Any] | None) -> str:
    if row is None:
        return "-"
    return f"{row['reliability']:.2f} (+{row['successes']:g}/-{row['failures']:g})"


def _gap_cell(row: dict[str, Any] | None) -> str:
    if row is None or row.get("claim_gap") is None:
        return "-"
    discount = row.get("routing_discount") or 0.0
    return f"{row['claim_gap']:+.2f}" + (f" (-{discount:.2f})" if discount else "")


@gateway.command()
@click.argument("site_id")
@click.option("--reason", default="", help="Why (shown in `hansa gateway sites` and in query traces). Required "
              "to quarantine.")
@click.option("--release", is_flag=True, help="Lift the site's quarantine instead.")
@json_option("Print JSON instead of a sentence.")
@click.pass_context
@friendly
def quarantine(ctx: click.Context, site_id: str, reason: str, release: bool, as_json: bool) -> None:
    """Stop routing to and asking SITE_ID at this gateway, without revoking it.

    For a member that misbehaves (answers far below what its summaries promise, echoes questions,
    contradicts everyone; `hansa gateway sites` shows its record) while the federation's admins
    decide: a revocation needs their threshold of keys and a new enrollment to undo, a quarantine
    is this gateway's own and `--release` lifts it. A serving gateway reads it on its next
    question; a query naming the site, or with it as origin, is refused (403).

    
      hansa gateway quarantine clinic-b --reason "echoes questions since 2026-11-27"
      hansa gateway quarantine clinic-b --release
    """
    from hansa.gateway.query.conduct import SiteConduct

    cfg = _config(ctx)
    open_registry(cfg).get(site_id)  # an enrolled site (404-style error otherwise)
    conduct = SiteConduct.open(gateway_home(cfg))
    try:
        if release:
            lifted = conduct.release(site_id)
            _say(as_json, f"{site_id}: quarantine lifted" if lifted else f"{site_id} was not quarantined",
                 {"site_id": site_id, "quarantined": False, "changed": lifted})
            return
        if not reason.strip():
            raise InputError("--reason is required to quarantine a site: operators and query traces read it")
        conduct.quarantine(site_id, reason)
        _say(as_json, f"{site_id}: quarantined ({reason.strip()}); the gateway neither routes to nor asks it "
                      f"until `hansa gateway quarantine {site_id} --release`",
             {"site_id": site_id, "quarantined": True, "reason": reason.strip()})
    finally:
        conduct.close()


gateway.add_command(api_key)
gateway.add_command(router)
