"""Calling sites in parallel: every call signed, bounded in time and bytes, and checked on return.

A federation is only as fast as its slowest member unless each call has its own deadline, and
only as safe as its least careful one unless every response is treated as hostile: so each site
gets a wall-clock deadline (not just socket timeouts, which a trickling server resets with every
byte), redirects are never followed (a registry URL must not become a pointer to somewhere else),
the body is streamed and cut at a byte cap, its RFC 9421 signature must verify under the site's
registry keys and be bound to *this* request (guarantee 11), and only then is it parsed with the
strict loader; the answer must come from the site that was asked and cite only that site's
documents. One site failing never fails the query: the caller gets a SiteCall per site with its
status, as Elasticsearch's cross-cluster search does.

No SSRF (guarantee 13): the gateway calls only the URL the registry holds for a site. The host is
resolved once; if any address is private, loopback, link-local, reserved or a cloud metadata
endpoint the call is refused before any connection (private and loopback ranges only when
`allow_private_addresses`, for a test federation on loopback; link-local and metadata never). The
connection then goes to exactly the checked address, while `Host` and TLS SNI/certificate checks
use the name: there is no second resolution for a DNS-rebinding host to switch in between.

The id of the question being answered (`query_scope`), for logs and for every site call it makes.

Why a context variable: the id is made where a question enters (Gateway.query) and read where a
site call is signed (`signed_headers`), several layers down the engine; passing it
through every stage would touch each stage's contract for a field only logs and signatures need.
Site calls run in a thread pool, so the caller copies its context into each call
(`run_calls`). Sites log it on every event of the request (X-Hansa-Query-Id, covered by
the request signature: hansa.sync.httpsig.RETRIEVE_TRACED_COMPONENTS).
"""
from __future__ import annotations

import contextvars
import uuid
from contextlib import contextmanager
from contextvars import ContextVar
import http.client
import ipaddress
import os
import socket
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple, Sequence
from urllib.parse import urlsplit

from hansa.core.errors import ConflictError, HansaError
from hansa.core.jsonsafe import dumps, loads_strict
from hansa.core.logs import bound, get_logger
from hansa.sync.membership import validate_site_url
from hansa.sync.httpsig import (
    QUERY_ID_HEADER,
    RETRIEVE_COMPONENTS,
    RETRIEVE_TRACED_COMPONENTS,
    SITE_HEADER,
    HttpMessage,
    SignatureRefused,
    keyring,
    sign_request,
    verify_response,
)
from hansa.sync.keys import PRIVATE_KEY_FILE, SiteIdentity, load_public_key
from hansa.sync.wire import PartialAnswer, RetrieveRequest

log = get_logger(__name__)

_CURRENT: ContextVar[str | None] = ContextVar("hansa_query_id", default=None)


def new_query_id() -> str:
    """32 hex digits: unguessable and within the site's accepted alphabet ([A-Za-z0-9._:-]{1,128})."""
    return uuid.uuid4().hex


@contextmanager
def query_scope(query_id: str) -> Iterator[str]:
    """Make `query_id` current and bind it to every log event inside the block."""
    token = _CURRENT.set(query_id)
    try:
        with bound(query_id=query_id):
            yield query_id
    finally:
        _CURRENT.reset(token)

RETRIEVE_PATH = "/v1/retrieve"
MAX_RESPONSE_BYTES = 1024 * 1024
GATEWAY_KEYS_DIR = "keys"
JSON_TYPE = "application/json"
_CHUNK = 16 * 1024

OK, TIMEOUT, ERROR, INVALID = "ok", "timeout", "error", "invalid"

# Cloud instance-metadata endpoints (AWS/GCP/Azure/OpenStack IPv4, AWS IPv6, ECS task metadata):
# refused even in a test federation that allows private addresses.
_METADATA = frozenset(ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "169.254.170.2"))


def gateway_identity(gateway_dir: str | os.PathLike[str]) -> SiteIdentity:
    """The gateway's signing key, in `<gateway_dir>/keys` (beside the registry), created on first
    use. Sites configure its public key as `[site] gateway_public_key`."""
    folder = Path(gateway_dir) / GATEWAY_KEYS_DIR
    if not os.path.lexists(folder / PRIVATE_KEY_FILE):
        try:
            SiteIdentity.generate().save(folder)
            log.info("gateway.identity_created", directory=str(folder))
        except ConflictError:
            pass  # another process created it at the same moment: use that one
    return SiteIdentity.load(folder)


class SiteTarget(NamedTuple):
    site_id: str
    url: str  # base URL from the registry
    public_keys: Sequence[str]  # base64 Ed25519 keys from the registry: the response must verify under one


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


class CallFailed(Exception):
    """Why one call of one site failed: `status` (timeout, error, invalid) goes into its SiteCall."""

    def __init__(self, status: str, message: str, bytes_in: int = 0) -> None:
        super().__init__(message)
        self.status = status
        self.bytes_in = bytes_in


# -- address checks and pinning ------------------------------------------------------------------
def _refusal(addr: ipaddress.IPv4Address | ipaddress.IPv6Address, allow_private: bool) -> str | None:
    """Why the gateway must not connect to `addr`, or None."""
    if isinstance(addr, ipaddress.IPv6Address):
        embedded = addr.ipv4_mapped or addr.sixtofour
        if embedded is not None:
            addr = embedded
    if addr in _METADATA:
        return "a cloud metadata address (never allowed)"
    if addr.is_unspecified or addr.is_multicast or addr.is_link_local or addr.is_reserved:
        return "an unspecified, multicast, link-local or reserved address (never allowed)"
    if addr.is_global:
        return None
    if allow_private and (addr.is_private or addr.is_loopback):
        return None
    return ("a private, loopback or otherwise non-global address "
            "(set gateway allow_private_addresses only for a test federation)")


def _addresses(host: str, port: int) -> list[tuple[int, Any, ipaddress.IPv4Address | ipaddress.IPv6Address]]:
    """Every (family, sockaddr, address) `host` resolves to, in the resolver's order (one lookup)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise CallFailed(ERROR, f"cannot resolve {host!r}: {exc}") from exc
    return [(family, sockaddr, ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0]))
            for family, _, _, _, sockaddr in infos]


def refused_unless_private_allowed(url: str) -> str | None:
    """Why a gateway that does not allow private addresses would refuse to call `url`, or None.

    Why here: said when a site is admitted (`gateway enroll`, `approve`), with the same rule the
    calls apply, instead of first surfacing as "No answer" at query time. A name that does not
    resolve here says nothing (the gateway's host may resolve it differently)."""
    host = urlsplit(url).hostname or ""
    try:
        found = _addresses(host, 0)
    except CallFailed:
        return None
    for _, _, addr in found:
        why = _refusal(addr, allow_private=False)
        if why:
            return f"{host} is {addr}, {why}"
    return None


def resolve_checked(host: str, port: int, allow_private: bool) -> list[tuple[int, Any]]:
    """Resolve `host` once and return the (family, sockaddr) pairs to connect to; refuse the host
    if *any* of its addresses is forbidden (a name must not mix a public and a private address)."""
    targets: list[tuple[int, Any]] = []
    for family, sockaddr, addr in _addresses(host, port):
        why = _refusal(addr, allow_private)
        if why:
            raise CallFailed(ERROR, f"{host!r} resolves to {addr}, {why}; refused")
        if (family, sockaddr) not in targets:
            targets.append((family, sockaddr))
    if not targets:
        raise CallFailed(ERROR, f"{host!r} resolves to no address")
    return targets


def _open_socket(targets: Sequence[tuple[int, Any]], timeout: float | None) -> socket.socket:
    last: OSError | None = None
    for family, sockaddr in targets:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(sockaddr)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except OSError as exc:
            sock.close()
            last = exc
    assert last is not None
    raise last


class _PinnedHTTP(http.client.HTTPConnection):
    """HTTP to an already checked address; `Host` still names the site."""

    def __init__(self, host: str, port: int, targets: Sequence[tuple[int, Any]], timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._targets = targets
        self.pinned_sock: socket.socket | None = None

    def connect(self) -> None:
        self.sock = self.pinned_sock = _open_socket(self._targets, self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to an already checked address; SNI and the certificate check use the site's name."""

    def __init__(self, host: str, port: int, targets: Sequence[tuple[int, Any]], timeout: float) -> None:
        self._tls = ssl.create_default_context()
        super().__init__(host, port, timeout=timeout, context=self._tls)
        self._targets = targets
        self.pinned_sock: socket.socket | None = None

    def connect(self) -> None:
        raw = _open_socket(self._targets, self.timeout)
        try:
            self.sock = self.pinned_sock = self._tls.wrap_socket(raw, server_hostname=self.host)
        except BaseException:
            raw.close()
            raise


# -- one call ------------------------------------------------------------------------------------
def time_left(deadline: float, what: str) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise CallFailed(TIMEOUT, f"deadline passed {what}")
    return left


def _read_capped(resp: http.client.HTTPResponse, conn: _PinnedHTTP | _PinnedHTTPS, deadline: float, cap: int) -> bytes:
    declared = resp.getheader("Content-Length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        raise CallFailed(INVALID, f"response declares {declared} bytes; the cap is {cap}")
    body = bytearray()
    while True:
        left = time_left(deadline, "while reading the response")
        if conn.pinned_sock is not None:
            conn.pinned_sock.settimeout(left)  # each read waits at most until the deadline
        try:
            chunk = resp.read1(_CHUNK)
        except TimeoutError as exc:
            raise CallFailed(TIMEOUT, "deadline passed while reading the response", len(body)) from exc
        except (OSError, http.client.HTTPException) as exc:
            raise CallFailed(ERROR, f"reading the response failed: {exc.__class__.__name__}", len(body)) from exc
        if not chunk:
            return bytes(body)
        body += chunk
        if len(body) > cap:
            raise CallFailed(INVALID, f"response larger than {cap} bytes; stopped reading", len(body))


def signed_headers(identity: SiteIdentity, site_id: str, target_uri: str, body: bytes) -> dict[str, str]:
    """The headers of a retrieve call to `site_id`, RFC 9421-signed by the gateway's `identity`."""
    headers = {"Content-Type": JSON_TYPE, "Accept": JSON_TYPE, SITE_HEADER: site_id}
    components = RETRIEVE_COMPONENTS
    query_id = _CURRENT.get()  # the question this call serves, signed so a site may log it
    if query_id is not None:
        headers[QUERY_ID_HEADER] = query_id
        components = RETRIEVE_TRACED_COMPONENTS
    headers.update(sign_request(identity, "POST", target_uri, headers, body, components=components))
    return headers


def call_one(target_site: SiteTarget, body: bytes, deadline: float, cap: int, *, identity: SiteIdentity,
             allow_private: bool) -> tuple[PartialAnswer, int]:
    """One signed HTTP call of one site (a `OneCall` once `identity` and `allow_private` are bound)."""
    site_id = target_site.site_id
    keys = keyring(load_public_key(k) for k in target_site.public_keys)
    target = validate_site_url(target_site.url) + RETRIEVE_PATH
    parts = urlsplit(target)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    targets = resolve_checked(host, port, allow_private)
    timeout = time_left(deadline, "before connecting")
    headers = signed_headers(identity, site_id, target, body)
    conn: _PinnedHTTP | _PinnedHTTPS = (
        _PinnedHTTPS(host, port, targets, timeout) if parts.scheme == "https" else _PinnedHTTP(host, port, targets, timeout)
    )
    try:
        try:
            conn.request("POST", parts.path, body=body, headers=headers)
            resp = conn.getresponse()
        except TimeoutError as exc:
            raise CallFailed(TIMEOUT, "no response within the deadline") from exc
        except (OSError, http.client.HTTPException) as exc:
            raise CallFailed(ERROR, f"request failed: {exc.__class__.__name__}: {exc}") from exc
        if 300 <= resp.status < 400:
            raise CallFailed(ERROR, f"site answered with a redirect ({resp.status}); redirects are refused")
        raw = _read_capped(resp, conn, deadline, cap)
        if resp.status != 200:
            raise CallFailed(ERROR, f"site answered HTTP {resp.status}", len(raw))
        check_signed_response(resp.status, resp.msg, raw, keys, HttpMessage.request("POST", target, headers))
    finally:
        conn.close()
    return check_answer(site_id, raw), len(raw)


def check_answer(site_id: str, raw: bytes) -> PartialAnswer:
    """A verified response body as the partial answer of `site_id`, or CallFailed(INVALID): it
    must parse strictly, come from the site that was asked and cite only that site's documents.
    Every transport ends here, so an in-process call refuses exactly what an HTTP call refuses."""
    try:
        answer = PartialAnswer.from_json(loads_strict(raw))
    except HansaError as exc:
        raise CallFailed(INVALID, f"not a valid partial answer: {exc}", len(raw)) from exc
    if answer.site_id != site_id:
        raise CallFailed(INVALID, f"answer claims to come from site {answer.site_id!r}", len(raw))
    foreign = sorted({c.site_id for c in answer.citations} - {site_id})
    if foreign:
        raise CallFailed(INVALID, f"answer cites documents of other site(s) {foreign}", len(raw))
    return answer


def check_signed_response(status: int, headers: Any, raw: bytes, keys: Any, request: HttpMessage) -> None:
    """Refuse (INVALID) a response whose RFC 9421 signature does not verify under `keys` or is not
    bound to `request`; shared by the transports for the same reason as check_answer."""
    try:
        verify_response(status, headers, raw, keys, request)
    except SignatureRefused as exc:
        raise CallFailed(INVALID, f"response signature refused ({exc.reason}): {exc}", len(raw)) from exc


def per_target(request: RetrieveRequest | Sequence[RetrieveRequest], n: int) -> list[RetrieveRequest]:
    """One request per target: the same one for all, or the given list (which must match)."""
    if isinstance(request, RetrieveRequest):
        return [request] * n
    requests = list(request)
    if len(requests) != n:
        raise ValueError(f"{len(requests)} retrieve requests for {n} sites")
    return requests


# One call of one site: (target, signed body, deadline (monotonic), byte cap) -> (answer, bytes read).
OneCall = Callable[[SiteTarget, bytes, float, int], tuple[PartialAnswer, int]]
# Told of each answer that arrives while the round still waits on others (see run_calls).
OnAnswer = Callable[["SiteCall"], None]


def run_calls(
    sites: Sequence[SiteTarget | tuple[str, str, Sequence[str]]],
    request: RetrieveRequest | Sequence[RetrieveRequest],
    timeout_s: float,
    one: OneCall,
    max_response_bytes: int = MAX_RESPONSE_BYTES,
    on_answer: OnAnswer | None = None,
) -> list[SiteCall]:
    """Run `one` for every site at once under one deadline; one SiteCall per site, in input order.

    `request` is one request for every site, or one per site in the same order (SCOUT-RAG's tiers
    ask some sites in global mode and others in local mode within one round).
    Returns by `timeout_s` (plus scheduling noise) whatever the sites do: a call still running then
    is reported as a timeout and left to end on its own deadline.

    `on_answer(call)` runs in the call's own thread for each "ok" answer that arrives while other
    calls of the round are still running: work the caller will need anyway (fusion measuring the
    answer's sentences) is done while it would otherwise only wait. The call counts as answered
    before the hook runs, so a slow hook never turns an answer into a timeout; the last answer of a
    round gets no hook (nothing is left to wait for), and a hook that fails is logged, not raised."""
    if timeout_s <= 0:
        raise ValueError("timeout_s must be positive")
    if not sites:
        return []
    targets = [SiteTarget(*s) for s in sites]
    requests = per_target(request, len(targets))
    bodies = [dumps(r.to_json()) for r in requests]
    start = time.monotonic()
    deadline = start + timeout_s

    def run(target: SiteTarget, body: bytes) -> SiteCall:
        t0 = time.monotonic()
        site_id = target.site_id
        try:
            answer, n_in = one(target, body, deadline, max_response_bytes)
        except CallFailed as exc:
            return SiteCall(site_id, exc.status, (time.monotonic() - t0) * 1000, len(body), exc.bytes_in, error=str(exc))
        except HansaError as exc:  # e.g. a registry URL or key that no longer validates
            return SiteCall(site_id, ERROR, (time.monotonic() - t0) * 1000, 0, 0, error=str(exc))
        except Exception as exc:  # a bug must not fail the other sites' answers; it is logged
            log.exception("site.call_bug", site_id=site_id)
            return SiteCall(site_id, ERROR, (time.monotonic() - t0) * 1000, 0, 0, error=f"internal error: {exc.__class__.__name__}")
        return SiteCall(site_id, OK, (time.monotonic() - t0) * 1000, len(body), n_in, answer=answer)

    results: list[SiteCall | None] = [None] * len(targets)
    arrived = threading.Condition()
    closed = False  # the round has returned: a later answer is dropped, and its hook not run

    def answer(i: int, target: SiteTarget, body: bytes) -> None:
        call = run(target, body)
        with arrived:
            if closed:
                return
            results[i] = call
            waiting = sum(r is None for r in results)
            arrived.notify_all()
        if on_answer is not None and waiting and call.status == OK:
            try:
                on_answer(call)
            except Exception:  # the hook only saves later work; the answer stands without it
                log.exception("site.call_hook_failed", site_id=call.site_id)

    pool = ThreadPoolExecutor(max_workers=len(targets), thread_name_prefix="hansa-site-call")
    try:
        # each call runs in a copy of the caller's context: the query id and log fields go with it
        for i, (t, b) in enumerate(zip(targets, bodies)):
            pool.submit(contextvars.copy_context().run, answer, i, t, b)
        with arrived:
            arrived.wait_for(lambda: all(r is not None for r in results), timeout=timeout_s)
            got = list(results)  # what arrived by the deadline; later answers are not looked at
            closed = True
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    calls: list[SiteCall] = []
    for target, body, call in zip(targets, bodies, got):
        if call is not None:
            calls.append(call)
        else:
            calls.append(SiteCall(target.site_id, TIMEOUT, (time.monotonic() - start) * 1000, len(body), 0,
                                  error=f"no answer within {timeout_s:g} s"))
    for call in calls:
        log.info("site.call", site_id=call.site_id, status=call.status, latency_ms=round(call.latency_ms, 1),
                 bytes_in=call.bytes_in, error=call.error)
    return calls
