"""`hansa gateway api-key ...`: the credentials of query clients.

The key file (`<home>/gateway/api-keys.json`) is read by a running gateway on every query, so
creating or revoking a key takes effect without a restart. A new key goes to stdout alone (so
`KEY=$(hansa gateway api-key create alice)` works) and is never shown again: only its salted hash
is stored.
"""
from __future__ import annotations

import click

from hansa.cli.options import json_option, print_json
from hansa.gateway.trust.apikeys import ApiKeyStore, open_api_keys
from hansa.cli.context import friendly, gateway_home, root_config


def _store(ctx: click.Context) -> ApiKeyStore:
    return open_api_keys(gateway_home(root_config(ctx)))


@click.group("api-key")
def api_key() -> None:
    """Create, list and revoke the API keys query clients authenticate with."""


@api_key.command()
@click.argument("name")
@click.option("--origin", multiple=True,
              help="A site this key may name as a query's origin (repeat; default: any site).")
@json_option()
@click.pass_context
@friendly
def create(ctx: click.Context, name: str, origin: tuple[str, ...], as_json: bool) -> None:
    """Create a key for NAME (also its rate-limit identity) and print it once."""
    key = _store(ctx).create(name, origins=list(origin) if origin else None)
    click.echo(f"created API key {name!r}; store it now, it is not shown again. Send it as "
               "'Authorization: Bearer <key>'.", err=True)
    if as_json:
        print_json({"name": name, "api_key": key, "origins": list(origin) or None})
    else:
        click.echo(key)


@api_key.command()
@click.argument("name")
@json_option()
@click.pass_context
@friendly
def revoke(ctx: click.Context, name: str, as_json: bool) -> None:
    """Revoke NAME's key: the gateway refuses it (403) from its next request on."""
    rec = _store(ctx).revoke(name)
    if as_json:
        print_json(rec.view())
    else:
        click.echo(f"revoked API key {rec.name!r} (at {rec.revoked_at})")


@api_key.command("list")
@json_option("Print JSON instead of a table.")
@click.pass_context
@friendly
def list_keys(ctx: click.Context, as_json: bool) -> None:
    """List key names and states (never the keys themselves)."""
    views = [r.view() for r in _store(ctx).list()]
    if as_json:
        print_json({"api_keys": views})
        return
    if not views:
        click.echo("no API keys (hansa gateway api-key create NAME)")
        return
    for v in views:
        state = f"revoked {v['revoked_at']}" if v["revoked"] else "active"
        click.echo(f"{v['name']:<24} {v['key_id']}  created {v['created_at']}  {state}")
