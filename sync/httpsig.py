"""Signed gateway <-> site calls: RFC 9421 HTTP Message Signatures with Ed25519, bodies pinned by
RFC 9530 `Content-Digest` (sha-256).

Why: a retrieve request is the only way into a site's data, and a partial answer is what the
gateway shows its user with the site's name on it. TLS alone says "some holder of a certificate
for this name", not "the federation's gateway asked this, just now, once" or "this site answered
*this* question". So every request is signed by the gateway's key over its method, target URI,
body digest and content type, with `created`, a short `expires` and a `nonce` (a verifier keeps
nonces until the signature expires, so each request is accepted once), and every response is
signed by the site's key over its status, body digest and content type *and the request's
signature* (`"signature";req;key=...`, RFC 9421 §2.4), so an answer cannot be replayed to another
question.

The algorithm is fixed: Ed25519 only. A signature that names another `alg` is refused, never
"negotiated", and a signature that does not cover every component the policy requires is refused
as a downgrade. `keyid` only selects among the keys the caller trusts (it is `sync.keys.keyid_for`
of the key, so it cannot point anywhere else); an unknown keyid is refused.

The signature base follows RFC 9421 §2.5 byte for byte (tests reproduce Appendix B.2.6), with one
documented normalization: `@target-uri` and `@authority` are compared in normalized form (scheme
and host lowercase, default port dropped, empty path "/"), because the gateway signs the URL from
its registry while the site sees the URL rebuilt from the `Host` line of the request.

Why hand-written rather than `http-message-signatures`: measured in
docs/decisions/0001-http-message-signatures.md. The library speaks the same wire format (tests/sync/
test_httpsig_interop.py signs with each and verifies with the other, requests and `;req`-bound
responses), but it leaves the required `expires`, the lifetime bound, the nonce and the replay
cache, the normalization and the stable refusal reasons above to its caller, so most of this module
would stay, and it was half as fast on a retrieve call (scripts/bench_httpsig.py). The interop
tests are the guard that this code and an independent implementation keep agreeing.
"""
from __future__ import annotations

import hashlib
import hmac
import heapq
import secrets
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from hansa.core.errors import HansaError, InputError, VerificationError
from hansa.sync.keys import SiteIdentity, keyid_for, verify_signature
from hansa.sync.sfv import (
    InnerList,
    Item,
    Params,
    SFError,
    Token,
    parse_dictionary,
    parse_item,
    serialize_dictionary,
    serialize_inner_list,
    serialize_item,
    serialize_member,
)

ALG = "ed25519"
LABEL = "hansa"
DEFAULT_TTL_S = 30  # how long a signature is valid: long enough for one call, short for a replay
MAX_TTL_S = 60  # a verifier refuses signatures meant to live longer than this
CLOCK_SKEW_S = 5  # tolerated clock difference between gateway and site
NONCE_CACHE_CAPACITY = 100_000

REQUEST_COMPONENTS: tuple[str, ...] = ("@method", "@target-uri", "content-digest", "content-type")
RESPONSE_COMPONENTS: tuple[str, ...] = ("@status", "content-digest", "content-type")
# The hansa retrieve call adds the site it is meant for, so a request captured on its way to one
# site cannot be replayed to another (whose nonce cache has not seen it) by lying in `Host`.
SITE_HEADER = "Hansa-Site"
RETRIEVE_COMPONENTS: tuple[str, ...] = (*REQUEST_COMPONENTS, SITE_HEADER.lower())
# The gateway's query id, for tracing one question through every site's logs. Optional; when a
# request carries it, the site requires it covered (sign with RETRIEVE_TRACED_COMPONENTS), so a
# forged or swapped id can never end up in a site's log as the gateway's.
QUERY_ID_HEADER = "X-Hansa-Query-Id"
RETRIEVE_TRACED_COMPONENTS: tuple[str, ...] = (*RETRIEVE_COMPONENTS, QUERY_ID_HEADER.lower())
_SIGNATURE_PARAMS = {"created", "expires", "nonce", "keyid", "alg", "tag"}
_COMPONENT_PARAMS = {"req", "key"}
_DERIVED = {"@method", "@target-uri", "@authority", "@scheme", "@request-target", "@path", "@query", "@status"}

# Why a signature was refused (`SignatureRefused.reason`): stable codes for tests, logs, metrics.
UNSIGNED = "unsigned"
MALFORMED = "malformed"
ALGORITHM = "algorithm"
COVERAGE = "coverage"
MISSING_COMPONENT = "missing-component"
FUTURE = "future"
STALE = "stale"
EXPIRED = "expired"
LIFETIME = "lifetime"
UNKNOWN_KEY = "unknown-key"
BAD_SIGNATURE = "bad-signature"
DIGEST = "digest"
REPLAYED = "replayed"
MISDIRECTED = "misdirected"


class SignatureRefused(VerificationError):
    """The message is not signed as the policy requires; nothing it says may be used."""

    http_status = 401

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class ReplayCacheFull(HansaError):
    """More live nonces than the cache holds: refusing (fail closed) beats forgetting one."""

    http_status = 503


# -- messages ------------------------------------------------------------------------------------
HeaderSource = Any  # Mapping[str, str], an iterable of (name, value), werkzeug Headers, HTTPMessage


def _collect_fields(headers: HeaderSource) -> dict[str, tuple[str, ...]]:
    pairs: Iterable[tuple[str, str]] = headers.items() if hasattr(headers, "items") else headers
    out: dict[str, list[str]] = {}
    for name, value in pairs:
        if any(ch in value for ch in "\r\n\0"):
            raise SignatureRefused(MALFORMED, f"header {name!r} contains a line break or NUL")
        out.setdefault(name.lower(), []).append(value.strip(" \t"))
    return {k: tuple(v) for k, v in out.items()}


@dataclass(frozen=True)
class HttpMessage:
    """What a signature can cover: fields (lowercase names, values in order) and, for a request,
    method and target URI, for a response, the status."""

    fields: Mapping[str, tuple[str, ...]]
    method: str | None = None
    target_uri: str | None = None
    status: int | None = None

    @classmethod
    def request(cls, method: str, target_uri: str, headers: HeaderSource) -> "HttpMessage":
        return cls(_collect_fields(headers), method=method, target_uri=target_uri)

    @classmethod
    def response(cls, status: int, headers: HeaderSource) -> "HttpMessage":
        return cls(_collect_fields(headers), status=status)

    def field(self, name: str) -> str | None:
        """RFC 9421 §2.1: several lines of one field are joined with ", "."""
        values = self.fields.get(name.lower())
        return None if values is None else ", ".join(values)

    def with_fields(self, extra: Mapping[str, str]) -> "HttpMessage":
        merged = dict(self.fields)
        merged.update(_collect_fields(extra))
        return replace(self, fields=merged)


# -- derived components (RFC 9421 §2.2) ------------------------------------------------------------
def _uri_parts(uri: str) -> tuple[str, str, str, str]:
    """(scheme, authority, path, query) in normalized form; refuses what is not an absolute URI."""
    parts = urlsplit(uri)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise SignatureRefused(MALFORMED, f"target URI {uri!r} is not an absolute http(s) URI")
    if parts.username is not None or parts.fragment:
        raise SignatureRefused(MALFORMED, f"target URI {uri!r} carries credentials or a fragment")
    scheme = parts.scheme.lower()
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError as exc:
        raise SignatureRefused(MALFORMED, f"target URI {uri!r} has an invalid port") from exc
    default = 443 if scheme == "https" else 80
    authority = host if port in (None, default) else f"{host}:{port}"
    return scheme, authority, parts.path or "/", parts.query


def normalize_target_uri(uri: str) -> str:
    scheme, authority, path, query = _uri_parts(uri)
    return f"{scheme}://{authority}{path}" + (f"?{query}" if query else "")


def _derived_value(name: str, msg: HttpMessage) -> str:
    if name == "@status":
        if msg.status is None:
            raise SignatureRefused(MALFORMED, "@status can only be covered in a response")
        return f"{msg.status:03d}"
    if msg.method is None or msg.target_uri is None:
        raise SignatureRefused(MALFORMED, f"{name} needs a request (use ;req in a response)")
    if name == "@method":
        return msg.method
    scheme, authority, path, query = _uri_parts(msg.target_uri)
    if name == "@target-uri":
        return normalize_target_uri(msg.target_uri)
    if name == "@authority":
        return authority
    if name == "@scheme":
        return scheme
    if name == "@path":
        return path
    if name == "@query":
        return f"?{query}"
    if name == "@request-target":
        return path + (f"?{query}" if query else "")
    raise SignatureRefused(MALFORMED, f"unsupported derived component {name!r}")


def _component_value(component: Item, msg: HttpMessage, request: HttpMessage | None) -> str:
    name, params = component.value, component.params
    if not isinstance(name, str) or isinstance(name, Token):
        raise SignatureRefused(MALFORMED, "a covered component must be a quoted string")
    unknown = set(params) - _COMPONENT_PARAMS
    if unknown:
        raise SignatureRefused(MALFORMED, f"component {name!r}: unsupported parameters {sorted(unknown)}")
    source = msg
    if "req" in params:
        if params["req"] is not True:
            raise SignatureRefused(MALFORMED, f"component {name!r}: ;req takes no value")
        if request is None:
            raise SignatureRefused(MALFORMED, f"component {name!r};req: there is no request to bind to")
        source = request
    if name.startswith("@"):
        if name not in _DERIVED or "key" in params:
            raise SignatureRefused(MALFORMED, f"unsupported derived component {serialize_item(component)}")
        return _derived_value(name, source)
    if not name or name != name.lower():
        raise SignatureRefused(MALFORMED, f"field component {name!r} must be a lowercase field name")
    value = source.field(name)
    if value is None:
        raise SignatureRefused(
            MISSING_COMPONENT,
            f"the signature covers {serialize_item(component)} but the message has no such field "
            "(stripped on the way?)",
        )
    if "key" in params:
        key = params["key"]
        if not isinstance(key, str) or isinstance(key, Token):
            raise SignatureRefused(MALFORMED, f"component {name!r}: ;key must be a string")
        try:
            member = parse_dictionary(value, name).get(key)
        except SFError as exc:
            raise SignatureRefused(MALFORMED, str(exc)) from exc
        if member is None:
            raise SignatureRefused(MISSING_COMPONENT, f"field {name!r} has no member {key!r}")
        return serialize_member(member)
    return value


def signature_base(covered: Sequence[Item], params: Params, msg: HttpMessage, request: HttpMessage | None = None) -> bytes:
    """RFC 9421 §2.5: one `"id": value` line per covered component, then `"@signature-params"`."""
    lines: list[str] = []
    seen: set[str] = set()
    for component in covered:
        ident = serialize_item(component)
        if ident in seen:
            raise SignatureRefused(MALFORMED, f"component {ident} is covered twice")
        if component.value == "@signature-params":
            raise SignatureRefused(MALFORMED, "@signature-params cannot be a covered component")
        seen.add(ident)
        value = _component_value(component, msg, request)
        if any(not 0x20 <= ord(ch) <= 0x7E for ch in value):
            raise SignatureRefused(MALFORMED, f"component {ident} has a value that is not visible ASCII")
        lines.append(f"{ident}: {value}")
    lines.append('"@signature-params": ' + serialize_inner_list(InnerList(tuple(covered), params)))
    return "\n".join(lines).encode("ascii")


def _as_item(component: str | Item) -> Item:
    if isinstance(component, Item):
        return component
    return parse_item(component, "component") if component.startswith('"') else Item(component)


def _identifiers(components: Sequence[str | Item]) -> tuple[str, ...]:
    return tuple(serialize_item(_as_item(c)) for c in components)


def response_binding(request_label: str = LABEL) -> Item:
    """The component that binds a response to the request signature labelled `request_label`."""
    return Item("signature", {"req": True, "key": request_label})


# -- content digest (RFC 9530) -----------------------------------------------------------------------
def content_digest(body: bytes) -> str:
    return serialize_dictionary({"sha-256": Item(hashlib.sha256(body).digest())})


def check_content_digest(value: str | None, body: bytes) -> None:
    """The body must match the sha-256 member (and sha-512, if also given)."""
    if value is None:
        raise SignatureRefused(DIGEST, "the message has no Content-Digest for its body")
    try:
        members = parse_dictionary(value, "Content-Digest")
    except SFError as exc:
        raise SignatureRefused(DIGEST, str(exc)) from exc
    if "sha-256" not in members:
        raise SignatureRefused(DIGEST, "Content-Digest must carry sha-256")
    for algorithm, fn in (("sha-256", hashlib.sha256), ("sha-512", hashlib.sha512)):
        member = members.get(algorithm)
        if member is None:
            continue
        if not isinstance(member, Item) or not isinstance(member.value, bytes):
            raise SignatureRefused(DIGEST, f"Content-Digest {algorithm} must be a byte sequence")
        if not hmac.compare_digest(member.value, fn(body).digest()):
            raise SignatureRefused(DIGEST, f"the body does not match its Content-Digest ({algorithm}): altered or swapped")


# -- replay protection -------------------------------------------------------------------------------
class NonceCache:
    """Nonces seen, each kept until its signature expires (after which the signature is refused
    anyway), so memory is bounded by the request rate times the signature lifetime. Per process:
    run a site's API in one process (as Milvus Lite requires anyway)."""

    def __init__(self, capacity: int = NONCE_CACHE_CAPACITY) -> None:
        self.capacity = capacity
        self._seen: dict[str, float] = {}
        self._expiry: list[tuple[float, str]] = []
        self._lock = threading.Lock()

    def use(self, key: str, until: float, now: float) -> None:
        """Record `key` as used until `until`; refuse it if it was used before."""
        with self._lock:
            while self._expiry and self._expiry[0][0] < now:
                expires, old = heapq.heappop(self._expiry)
                if self._seen.get(old) == expires:
                    del self._seen[old]
            if key in self._seen:
                raise SignatureRefused(REPLAYED, "this signed request was already received (nonce replayed)")
            if len(self._seen) >= self.capacity:
                raise ReplayCacheFull("too many signed requests in flight to check for replays; retry shortly")
            self._seen[key] = until
            heapq.heappush(self._expiry, (until, key))

    def __len__(self) -> int:
        return len(self._seen)


# -- signing -----------------------------------------------------------------------------------------
def new_nonce() -> str:
    return secrets.token_urlsafe(18)


def _now(now: float | None) -> float:
    return time.time() if now is None else now


def _sign(identity: SiteIdentity, msg: HttpMessage, covered: Sequence[Item], params: Params,
          label: str, request: HttpMessage | None = None) -> dict[str, str]:
    base = signature_base(covered, params, msg, request)
    signature = identity.sign(base)
    return {
        "Signature-Input": serialize_dictionary({label: InnerList(tuple(covered), params)}),
        "Signature": serialize_dictionary({label: Item(signature)}),
    }


def _params(identity: SiteIdentity, now: float | None, ttl_s: int, nonce: str | None) -> Params:
    if not 0 < ttl_s <= MAX_TTL_S:
        raise InputError(f"signature lifetime must be 1..{MAX_TTL_S} s, got {ttl_s}")
    created = int(_now(now))
    params: Params = {"created": created, "expires": created + ttl_s}
    if nonce is not None:
        params["nonce"] = nonce
    params["keyid"] = identity.keyid
    params["alg"] = ALG
    return params


def sign_request(
    identity: SiteIdentity,
    method: str,
    target_uri: str,
    headers: HeaderSource,
    body: bytes,
    *,
    components: Sequence[str | Item] = REQUEST_COMPONENTS,
    label: str = LABEL,
    now: float | None = None,
    ttl_s: int = DEFAULT_TTL_S,
    nonce: str | None = None,
) -> dict[str, str]:
    """The headers to add to a request: Content-Digest, Signature-Input, Signature."""
    digest = content_digest(body)
    msg = HttpMessage.request(method, target_uri, headers).with_fields({"content-digest": digest})
    params = _params(identity, now, ttl_s, nonce or new_nonce())
    return {"Content-Digest": digest, **_sign(identity, msg, [_as_item(c) for c in components], params, label)}


def sign_response(
    identity: SiteIdentity,
    status: int,
    headers: HeaderSource,
    body: bytes,
    request: HttpMessage,
    *,
    label: str = LABEL,
    request_label: str = LABEL,
    now: float | None = None,
    ttl_s: int = DEFAULT_TTL_S,
) -> dict[str, str]:
    """The headers to add to a response, which is bound to `request`'s signature `request_label`."""
    digest = content_digest(body)
    msg = HttpMessage.response(status, headers).with_fields({"content-digest": digest})
    covered = [Item(c) for c in RESPONSE_COMPONENTS] + [response_binding(request_label)]
    params = _params(identity, now, ttl_s, None)
    return {"Content-Digest": digest, **_sign(identity, msg, covered, params, label, request)}


# -- verification ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VerifiedSignature:
    label: str
    keyid: str
    created: int
    expires: int
    nonce: str | None
    covered: tuple[str, ...]  # serialized component identifiers


def keyring(keys: Iterable[Ed25519PublicKey]) -> dict[str, Ed25519PublicKey]:
    """Trusted keys by the keyid a signer names (`sync.keys.keyid_for`)."""
    return {keyid_for(k): k for k in keys}


def _int_param(params: Params, name: str) -> int:
    value = params.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SignatureRefused(MALFORMED, f"signature parameter {name!r} must be an integer (and is required)")
    return value


def _str_param(params: Params, name: str) -> str:
    value = params.get(name)
    if not isinstance(value, str) or isinstance(value, Token) or not value:
        raise SignatureRefused(MALFORMED, f"signature parameter {name!r} must be a non-empty string (and is required)")
    return value


def _verify(
    msg: HttpMessage,
    request: HttpMessage | None,
    body: bytes,
    keys: Mapping[str, Ed25519PublicKey],
    required: Sequence[str | Item],
    label: str,
    now: float,
    require_nonce: bool,
    skew_s: int,
    max_ttl_s: int,
) -> VerifiedSignature:
    inputs_raw, signatures_raw = msg.field("signature-input"), msg.field("signature")
    if inputs_raw is None or signatures_raw is None:
        raise SignatureRefused(UNSIGNED, "the message is not signed (no Signature-Input / Signature header)")
    try:
        inputs = parse_dictionary(inputs_raw, "Signature-Input")
        signatures = parse_dictionary(signatures_raw, "Signature")
    except SFError as exc:
        raise SignatureRefused(MALFORMED, str(exc)) from exc
    member, sig_member = inputs.get(label), signatures.get(label)
    if member is None or sig_member is None:
        raise SignatureRefused(UNSIGNED, f"the message carries no signature labelled {label!r}")
    if not isinstance(member, InnerList):
        raise SignatureRefused(MALFORMED, f"Signature-Input {label!r} must be an inner list of components")
    if not isinstance(sig_member, Item) or not isinstance(sig_member.value, bytes):
        raise SignatureRefused(MALFORMED, f"Signature {label!r} must be a byte sequence")
    params = member.params
    unknown = set(params) - _SIGNATURE_PARAMS
    if unknown:
        raise SignatureRefused(MALFORMED, f"unsupported signature parameters {sorted(unknown)}")
    alg = params.get("alg")
    if alg is not None and (not isinstance(alg, str) or isinstance(alg, Token) or alg != ALG):
        raise SignatureRefused(ALGORITHM, f"signature algorithm {alg!r} refused: only {ALG!r} is accepted")
    for component in member.items:
        if not isinstance(component.value, str) or isinstance(component.value, Token):
            raise SignatureRefused(MALFORMED, "a covered component must be a quoted string")
    covered = tuple(serialize_item(c) for c in member.items)
    missing = [ident for ident in _identifiers(required) if ident not in covered]
    if missing:
        raise SignatureRefused(COVERAGE, f"the signature does not cover {', '.join(missing)} (refused as a downgrade)")

    created, expires = _int_param(params, "created"), _int_param(params, "expires")
    if expires <= created or expires - created > max_ttl_s:
        raise SignatureRefused(LIFETIME, f"signature lifetime must be 1..{max_ttl_s} s; got {expires - created} s")
    if created > now + skew_s:
        raise SignatureRefused(FUTURE, f"signature created {created - now:.0f} s in the future (clocks out of sync?)")
    if now - created > max_ttl_s + skew_s:
        raise SignatureRefused(STALE, f"signature created {now - created:.0f} s ago: stale")
    if now > expires + skew_s:
        raise SignatureRefused(EXPIRED, f"signature expired {now - expires:.0f} s ago")
    nonce = _str_param(params, "nonce") if require_nonce or "nonce" in params else None
    if nonce is not None and not 16 <= len(nonce) <= 128:
        raise SignatureRefused(MALFORMED, "nonce must be 16..128 characters")

    keyid = _str_param(params, "keyid")
    key = keys.get(keyid)
    if key is None:
        raise SignatureRefused(UNKNOWN_KEY, f"keyid {keyid!r} is not a key trusted for this message")
    base = signature_base(member.items, params, msg, request)
    if not verify_signature(key, sig_member.value, base):
        raise SignatureRefused(
            BAD_SIGNATURE,
            "signature does not verify: the message was altered, signed by another key, "
            "or (a response) answers another request",
        )
    if '"content-digest"' in covered:
        check_content_digest(msg.field("content-digest"), body)
    return VerifiedSignature(label, keyid, created, expires, nonce, covered)


def verify_request(
    method: str,
    target_uri: str,
    headers: HeaderSource,
    body: bytes,
    keys: Mapping[str, Ed25519PublicKey],
    nonces: NonceCache,
    *,
    required: Sequence[str | Item] = REQUEST_COMPONENTS,
    label: str = LABEL,
    now: float | None = None,
    skew_s: int = CLOCK_SKEW_S,
    max_ttl_s: int = MAX_TTL_S,
) -> VerifiedSignature:
    """Accept a request once: signed by one of `keys`, covering `required`, fresh, body intact."""
    t = _now(now)
    msg = HttpMessage.request(method, target_uri, headers)
    verified = _verify(msg, None, body, keys, required, label, t, True, skew_s, max_ttl_s)
    nonces.use(f"{verified.keyid}:{verified.nonce}", verified.expires + skew_s, t)
    return verified


def verify_response(
    status: int,
    headers: HeaderSource,
    body: bytes,
    keys: Mapping[str, Ed25519PublicKey],
    request: HttpMessage,
    *,
    label: str = LABEL,
    request_label: str = LABEL,
    now: float | None = None,
    skew_s: int = CLOCK_SKEW_S,
    max_ttl_s: int = MAX_TTL_S,
) -> VerifiedSignature:
    """Accept a response: signed by one of `keys`, body intact, and bound to `request`'s signature."""
    msg = HttpMessage.response(status, headers)
    required = [*RESPONSE_COMPONENTS, response_binding(request_label)]
    return _verify(msg, request, body, keys, required, label, _now(now), False, skew_s, max_ttl_s)
