"""Calling sites in parallel: every call bounded in time and bytes, every failure reported per site.

A federation is only as fast as its slowest member unless each call has its own deadline, and
only as safe as its least careful one unless every response is treated as hostile: so each site
gets a wall-clock deadline (not just socket timeouts, which a trickling server resets with every
byte), redirects are refused (a registry URL must not become a pointer to somewhere else), the
body is streamed and cut at a byte cap, parsed with the strict loader, and must come from the site
that was asked and cite only that site's documents. One site failing never fails the query: the
caller gets a SiteCall per site with its status, as Elasticsearch's cross-cluster search does.

SSRF: before connecting, the host is resolved and refused if any address is private, loopback,
link-local (cloud metadata lives at 169.254.169.254), or otherwise not globally routable — unless
`allow_private_addresses` (test federations on loopback). Known gap: `requests` resolves the name
again when it connects, so a DNS-rebinding host could switch addresses in between; pinning the
resolved address needs a custom transport adapter (a later issue, with signed calls).
"""
from __future__ import annotations

import ipaddress
import socket
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Sequence
from urllib.parse import urlsplit

import requests

from hansa.core.errors import HansaError
from hansa.core.jsonsafe import dumps, loads_strict
from hansa.core.logs import get_logger
from hansa.gateway.registry import validate_site_url
from hansa.sync.wire import PartialAnswer, RetrieveRequest

log = get_logger(__name__)

RETRIEVE_PATH = "/v1/retrieve"
MAX_RESPONSE_BYTES = 1024 * 1024
_CHUNK = 16 * 1024

OK, TIMEOUT, ERROR, INVALID = "ok", "timeout", "error", "invalid"


@dataclass(frozen=True)
class SiteCall:
    site_id: str
    status: str  # "ok" | "timeout" | "error" | "invalid"
    latency_ms: float
    bytes_out: int  # request body bytes sent
    bytes_in: int  # response body bytes read (up to the cap)
    answer: PartialAnswer | None = None
    error: str | None = None

    def trace_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "site_id": self.site_id,
            "status": self.status,
            "latency_ms": round(self.latency_ms, 1),
            "bytes_out": self.bytes_out,
            "bytes_in": self.bytes_in,
        }
        if self.error:
            out["error"] = self.error
        return out


class _CallFailed(Exception):
    def __init__(self, status: str, message: str, bytes_in: int = 0) -> None:
        super().__init__(message)
        self.status = status
        self.bytes_in = bytes_in


def check_address(url: str, allow_private: bool) -> None:
    """Refuse a URL whose host resolves to an address the gateway must never call."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise _CallFailed(ERROR, f"cannot resolve {host!r}: {exc}") from exc
    if allow_private:
        return
    for info in infos:
        addr = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        mapped = getattr(addr, "ipv4_mapped", None)
        if mapped is not None:
            addr = mapped
        if not addr.is_global or addr.is_multicast:
            raise _CallFailed(
                ERROR,
                f"{host!r} resolves to {addr}, a private, loopback, link-local or reserved address; "
                "refused (set gateway allow_private_addresses only for a test federation)",
            )


def _read_capped(resp: requests.Response, deadline: float, cap: int) -> bytes:
    declared = resp.headers.get("Content-Length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        raise _CallFailed(INVALID, f"response declares {declared} bytes; the cap is {cap}")
    body = bytearray()
    for chunk in resp.iter_content(_CHUNK):
        body += chunk
        if len(body) > cap:
            raise _CallFailed(INVALID, f"response larger than {cap} bytes; stopped reading", len(body))
        if time.monotonic() > deadline:
            raise _CallFailed(TIMEOUT, "deadline passed while reading the response", len(body))
    return bytes(body)


def _call_one(site_id: str, url: str, body: bytes, deadline: float, allow_private: bool, cap: int) -> tuple[PartialAnswer, int]:
    target = validate_site_url(url) + RETRIEVE_PATH
    check_address(target, allow_private)
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _CallFailed(TIMEOUT, "deadline passed before connecting")
    with requests.Session() as session:
        session.trust_env = False  # no proxies or .netrc from the environment: call exactly this URL
        try:
            resp = session.post(
                target,
                data=body,
                headers={"Content-Type": "application/json", "Accept": "application/json"},
                timeout=(remaining, remaining),
                allow_redirects=False,
                stream=True,
            )
        except requests.Timeout as exc:
            raise _CallFailed(TIMEOUT, f"no response within the deadline ({exc.__class__.__name__})") from exc
        except requests.RequestException as exc:
            raise _CallFailed(ERROR, f"request failed: {exc.__class__.__name__}: {exc}") from exc
        with resp:
            if resp.is_redirect or 300 <= resp.status_code < 400:
                raise _CallFailed(ERROR, f"site answered with a redirect ({resp.status_code}); redirects are refused")
            try:
                raw = _read_capped(resp, deadline, cap)
            except requests.RequestException as exc:
                status = TIMEOUT if time.monotonic() >= deadline or isinstance(exc, requests.Timeout) else ERROR
                raise _CallFailed(status, f"reading the response failed: {exc.__class__.__name__}") from exc
            if resp.status_code != 200:
                raise _CallFailed(ERROR, f"site answered HTTP {resp.status_code}", len(raw))
    try:
        answer = PartialAnswer.from_json(loads_strict(raw))
    except HansaError as exc:
        raise _CallFailed(INVALID, f"not a valid partial answer: {exc}", len(raw)) from exc
    if answer.site_id != site_id:
        raise _CallFailed(INVALID, f"answer claims to come from site {answer.site_id!r}", len(raw))
    foreign = sorted({c.site_id for c in answer.citations} - {site_id})
    if foreign:
        raise _CallFailed(INVALID, f"answer cites documents of other site(s) {foreign}", len(raw))
    return answer, len(raw)


def call_sites(
    sites: Sequence[tuple[str, str]],
    request: RetrieveRequest,
    timeout_s: float,
    *,
    allow_private_addresses: bool = False,
    max_response_bytes: int = MAX_RESPONSE_BYTES,
) -> list[SiteCall]:
    """POST `request` to every (site_id, base_url) at once; one SiteCall per site, in input order.

    Returns by `timeout_s` (plus scheduling noise) whatever the sites do: a call still running then
    is reported as a timeout and left to end on its own socket deadline."""
    if timeout_s <= 0:
        raise ValueError("timeout_s must be positive")
    if not sites:
        return []
    body = dumps(request.to_json())
    start = time.monotonic()
    deadline = start + timeout_s

    def run(site_id: str, url: str) -> SiteCall:
        t0 = time.monotonic()
        try:
            answer, n_in = _call_one(site_id, url, body, deadline, allow_private_addresses, max_response_bytes)
        except _CallFailed as exc:
            return SiteCall(site_id, exc.status, (time.monotonic() - t0) * 1000, len(body), exc.bytes_in, error=str(exc))
        except HansaError as exc:  # e.g. a registry URL that no longer validates
            return SiteCall(site_id, ERROR, (time.monotonic() - t0) * 1000, 0, 0, error=str(exc))
        except Exception as exc:  # a bug must not fail the other sites' answers; it is logged
            log.exception("site.call_bug", site_id=site_id)
            return SiteCall(site_id, ERROR, (time.monotonic() - t0) * 1000, 0, 0, error=f"internal error: {exc.__class__.__name__}")
        return SiteCall(site_id, OK, (time.monotonic() - t0) * 1000, len(body), n_in, answer=answer)

    pool = ThreadPoolExecutor(max_workers=len(sites), thread_name_prefix="hansa-site-call")
    try:
        futures = [pool.submit(run, site_id, url) for site_id, url in sites]
        wait(futures, timeout=timeout_s)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    calls: list[SiteCall] = []
    for (site_id, _), fut in zip(sites, futures):
        if fut.done() and not fut.cancelled():
            calls.append(fut.result())
        else:
            calls.append(SiteCall(site_id, TIMEOUT, (time.monotonic() - start) * 1000, len(body), 0, error=f"no answer within {timeout_s:g} s"))
    for call in calls:
        log.info("site.call", site_id=call.site_id, status=call.status, latency_ms=round(call.latency_ms, 1), bytes_in=call.bytes_in)
    return calls
