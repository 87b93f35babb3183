"""How the gateway reaches sites: the `SiteTransport` port and its two implementations.

Why a port: the engine (route, gate, call, assess, refine, fuse) should not care whether a site is
a process across the network or a WSGI app in this one. Tests of routing, gating and fusion then
run against real site apps in milliseconds, and `hansa eval` could skip loopback sockets — while
every trust check stays on the path:

- `HttpSiteTransport`: the signed HTTP client of gateway.client (SSRF pinning, no redirects,
  wall-clock deadlines, byte caps, RFC 9421 request signing and response verification).
- `InProcessSiteTransport`: the same signed request handed to the site's WSGI app directly; the
  site verifies the request signature as it would over HTTP (the environ carries the registry URL
  as host and scheme), and the gateway verifies the signed response with the very functions the
  HTTP transport uses (check_signed_response, check_answer), reads it under the same byte cap and
  reports a call still running at the deadline as a timeout. Only the socket is gone: no address
  pinning applies, since no address is resolved.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

from werkzeug.test import EnvironBuilder, run_wsgi_app

from hansa.gateway.client import (
    ERROR,
    INVALID,
    MAX_RESPONSE_BYTES,
    RETRIEVE_PATH,
    CallFailed,
    OnAnswer,
    SiteCall,
    SiteTarget,
    call_one,
    check_answer,
    check_signed_response,
    run_calls,
    signed_headers,
    time_left,
)
from hansa.sync.httpsig import HttpMessage, keyring
from hansa.sync.keys import SiteIdentity, load_public_key
from hansa.sync.membership import validate_site_url
from hansa.sync.wire import PartialAnswer, RetrieveRequest

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

__all__ = ["SiteTransport", "HttpSiteTransport", "InProcessSiteTransport", "SiteTarget", "SiteCall"]


class SiteTransport(Protocol):
    """Ask every target a retrieve request at once: the same one, or one per target (in order).

    Contract: one SiteCall per target, in input order, returned by `timeout_s` whatever the sites
    do; a call is "ok" only when the response is signed by one of the target's registry keys,
    bound to this request, within `max_response_bytes`, a valid partial answer from that site
    citing only its own documents; otherwise "timeout", "error" or "invalid" with the reason.
    Never raises for a site's failure. `on_answer`, if given, is told of each "ok" answer that
    arrives while the round still waits on other sites (gateway.client.run_calls)."""

    def call(
        self,
        targets: Sequence[SiteTarget],
        request: RetrieveRequest | Sequence[RetrieveRequest],
        timeout_s: float,
        *,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        on_answer: OnAnswer | None = None,
    ) -> list[SiteCall]: ...


@dataclass(frozen=True)
class HttpSiteTransport:
    """Sites over signed HTTP (gateway.client.call_one, run in parallel by run_calls)."""

    identity: SiteIdentity  # the gateway's signing key
    allow_private_addresses: bool = False  # a test federation on loopback only

    def call(
        self,
        targets: Sequence[SiteTarget],
        request: RetrieveRequest | Sequence[RetrieveRequest],
        timeout_s: float,
        *,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        on_answer: OnAnswer | None = None,
    ) -> list[SiteCall]:
        one = partial(call_one, identity=self.identity, allow_private=self.allow_private_addresses)
        return run_calls(targets, request, timeout_s, one, max_response_bytes, on_answer)


class InProcessSiteTransport:
    """Sites as WSGI apps in this process, keyed by site id; signed and verified as over HTTP.

    The app registered for a site id is what answers calls to that id: registering another site's
    app under it is how a test plays a site that answers for someone else (refused as invalid)."""

    def __init__(self, identity: SiteIdentity, apps: Mapping[str, WSGIApp] | None = None) -> None:
        self.identity = identity
        self.apps: dict[str, WSGIApp] = dict(apps or {})

    def add(self, site_id: str, app: WSGIApp) -> None:
        self.apps[site_id] = app

    def call(
        self,
        targets: Sequence[SiteTarget],
        request: RetrieveRequest | Sequence[RetrieveRequest],
        timeout_s: float,
        *,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        on_answer: OnAnswer | None = None,
    ) -> list[SiteCall]:
        return run_calls(targets, request, timeout_s, self._call_one, max_response_bytes, on_answer)

    def _call_one(self, target: SiteTarget, body: bytes, deadline: float, cap: int) -> tuple[PartialAnswer, int]:
        app = self.apps.get(target.site_id)
        if app is None:
            raise CallFailed(ERROR, f"no in-process app serves site {target.site_id!r}")
        keys = keyring(load_public_key(k) for k in target.public_keys)
        base = validate_site_url(target.url)
        target_uri = base + RETRIEVE_PATH
        headers = signed_headers(self.identity, target.site_id, target_uri, body)
        time_left(deadline, "before calling")
        environ = EnvironBuilder(path=RETRIEVE_PATH, base_url=base, method="POST", data=body,
                                 headers=headers).get_environ()
        app_iter, status_line, resp_headers = run_wsgi_app(app, environ, buffered=False)
        try:
            status = int(str(status_line).split(" ", 1)[0])
            if 300 <= status < 400:
                raise CallFailed(ERROR, f"site answered with a redirect ({status}); redirects are refused")
            raw = _read_capped(app_iter, resp_headers, deadline, cap)
        finally:
            close = getattr(app_iter, "close", None)
            if close is not None:
                close()
        if status != 200:
            raise CallFailed(ERROR, f"site answered HTTP {status}", len(raw))
        check_signed_response(status, resp_headers, raw, keys, HttpMessage.request("POST", target_uri, headers))
        return check_answer(target.site_id, raw), len(raw)


def _read_capped(chunks: Iterable[bytes], headers: Any, deadline: float, cap: int) -> bytes:
    """The response body, refused past `cap` bytes (declared or read) as the HTTP client does."""
    declared = headers.get("Content-Length")
    if declared is not None and str(declared).isdigit() and int(declared) > cap:
        raise CallFailed(INVALID, f"response declares {declared} bytes; the cap is {cap}")
    body = bytearray()
    for chunk in chunks:
        body += chunk
        if len(body) > cap:
            raise CallFailed(INVALID, f"response larger than {cap} bytes; stopped reading", len(body))
        time_left(deadline, "while reading the response")
    return bytes(body)
