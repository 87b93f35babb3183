"""What the admin page shows, as one JSON document (GET /admin/api/state; the HTML is built from it).

Why a module of its own: the page and its JSON twin must say the same thing, so both are rendered
from this one document. It adds nothing the gateway does not already know; it only puts together
`Gateway.sites_view()` (registry, publication, routability, reliability, this worker's last call),
`Gateway.health()` and the ring of recent queries, plus what an operator reads more easily than
raw fields: each enrolled key's key id, how old a publication is and how long until it expires, and
the statuses of each site's recent calls (taken from the recent queries, so with shared state they
are every worker's, while `last_call` and `health` are the answering worker's own).
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from hansa.core.errors import HansaError
from hansa.sync.keys import keyid_for, load_public_key
from hansa.sync.wire import format_utc, parse_utc

RECENT_STATUSES = 10  # per site, newest first


def key_id(public_key_b64: str) -> str:
    """The key id (sync.keys.keyid_for) of an enrolled key, or a note if the entry is not a key."""
    try:
        return keyid_for(load_public_key(public_key_b64))
    except HansaError:
        return "(not an Ed25519 key)"


def _seconds(since: datetime, until: str | None) -> int | None:
    """Whole seconds from `since` to the timestamp `until` (negative: in the past); None if unset."""
    if not until:
        return None
    try:
        return int((parse_utc(until, "timestamp") - since).total_seconds())
    except HansaError:
        return None


def recent_statuses(queries: Iterable[dict[str, Any]], per_site: int = RECENT_STATUSES) -> dict[str, list[dict[str, Any]]]:
    """Each site's call statuses in the recent queries (newest first): {site_id: [{status, at,
    latency_ms, query_id}]}, at most `per_site` each."""
    out: dict[str, list[dict[str, Any]]] = {}
    for record in queries:
        for call in record.get("calls", ()):
            seen = out.setdefault(str(call.get("site_id")), [])
            if len(seen) < per_site:
                seen.append({"status": call.get("status"), "at": record.get("at"),
                             "latency_ms": call.get("latency_ms"), "query_id": record.get("query_id")})
    return out


def admin_state(gateway: Any, now: datetime | None = None) -> dict[str, Any]:
    """The admin document of `gateway` (a hansa.gateway.service.Gateway) at `now` (default: the
    time of its registry's clock, which its routability is decided by)."""
    now = now or gateway.registry.clock()
    queries = gateway.recent_queries.newest()
    statuses = recent_statuses(queries)
    sites = []
    for site in gateway.sites_view()["sites"]:
        sites.append({
            **site,
            "key_ids": [key_id(k) for k in site.get("public_keys", ())],
            "published_age_s": -s if (s := _seconds(now, site.get("published_at"))) is not None else None,
            "expires_in_s": _seconds(now, site.get("expires")),
            "recent_calls": statuses.get(site["site_id"], []),
        })
    return {"generated_at": format_utc(now), "health": gateway.health(), "sites": sites,
            "recent_queries": queries, "recent_queries_kept": gateway.recent_queries.keep,
            "shared": gateway.shared is not None}
