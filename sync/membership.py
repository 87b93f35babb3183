"""What a site signs to become, and stay, a member of a federation: join requests and key rotations.

Both are requests, not authority. A join request is self-signed like a certificate signing
request: every key it lists signs it, which proves the site holds those keys, and the federation
admins decide (with their threshold of federation keys) whether it enters the registry. A key
rotation is signed by one of the site's current keys *and* by every new key, so neither a thief of
the new keys nor a lone holder of an old one can write it; again the admins approve it.

Because the keys that verify a join request are inside it, its payload is parsed (strictly, and
only as far as the key list) before the signature check: there is no other key to check it with.
A rotation is verified under the site's current keys first and parsed only after that.

The site id and URL validation live here because both sides need them: the site when it writes a
request, the gateway when it reads one and whenever it reads its registry.
"""
from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any, ClassVar, Sequence
from urllib.parse import urlsplit

from pydantic import Field, StrictStr

from hansa.core.errors import InputError, VerificationError
from hansa.core.jsonsafe import loads_strict
from hansa.core.model import FORBID, Wire
from hansa.sync.dsse import MAX_SIGNATURES, sign_all, unverified_payload, verify_envelope
from hansa.sync.keys import SiteIdentity, load_public_key, public_key_raw
from hansa.sync.publication import MAX_CLOCK_SKEW
from hansa.sync.wire import SiteId, UtcTimestamp, canonical_json, format_utc, parse_utc, validate_site_id

JOIN_REQUEST_TYPE = "application/vnd.hansa.join-request+json; v=1"
KEY_ROTATION_TYPE = "application/vnd.hansa.site-keys+json; v=1"
MAX_KEYS_PER_SITE = 8  # a rotation carries one old and every new signature: within MAX_SIGNATURES
MAX_URL_CHARS = 2048
MAX_REQUEST_AGE = timedelta(days=7)  # how long a request may wait for the admins' approval
NONCE_RE = re.compile(r"^[0-9a-f]{32}$")

assert MAX_KEYS_PER_SITE + 1 <= MAX_SIGNATURES


def validate_site_url(url: object) -> str:
    """The base URL the gateway calls: http(s), a host, no credentials, query or fragment.

    Returned without a trailing slash so `f"{url}/v1/retrieve"` is the one way to build a call.
    Address checks (private ranges, metadata endpoints) happen at call time, after resolution."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_CHARS:
        raise InputError(f"site URL must be a non-empty string of at most {MAX_URL_CHARS} characters")
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        raise InputError(f"site URL {url!r} contains whitespace or control characters")
    if not url.isascii():
        raise InputError(f"site URL {url!r}: use ASCII only (punycode for international host names)")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise InputError(f"site URL {url!r}: only http:// and https:// are allowed")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise InputError(f"site URL {url!r}: credentials in the URL are not allowed")
    if not parts.hostname:
        raise InputError(f"site URL {url!r} has no host")
    if parts.fragment or "#" in url:
        raise InputError(f"site URL {url!r}: a fragment is not allowed")
    if parts.query or "?" in url:
        raise InputError(f"site URL {url!r}: a query string is not allowed; give the site's base URL")
    if any(seg in (".", "..") for seg in parts.path.split("/")):
        raise InputError(f"site URL {url!r}: '.' and '..' path segments are not allowed")
    try:
        parts.port  # noqa: B018 - raises ValueError on a malformed or out-of-range port
    except ValueError as exc:
        raise InputError(f"site URL {url!r}: invalid port") from exc
    return f"{parts.scheme}://{parts.netloc}{parts.path}".rstrip("/")


def validate_public_keys(public_keys: object, what: str = "site") -> tuple[str, ...]:
    """Base64 Ed25519 public keys: at least one, each a valid point, no duplicates, bounded."""
    if isinstance(public_keys, str):
        public_keys = [public_keys]
    if not isinstance(public_keys, (list, tuple)):
        raise InputError(f"{what} public keys must be a list of base64 strings")
    keys: list[str] = []
    raws: set[bytes] = set()
    for k in public_keys:
        if not isinstance(k, str):
            raise InputError(f"{what} public keys must be base64 strings")
        k = k.strip()
        try:
            raw = public_key_raw(load_public_key(k))
        except VerificationError as exc:  # a bad key where one is being registered is bad input
            raise InputError(str(exc)) from exc
        if raw not in raws:
            raws.add(raw)
            keys.append(k)
    if not keys:
        raise InputError(f"a {what} needs at least one Ed25519 public key (base64)")
    if len(keys) > MAX_KEYS_PER_SITE:
        raise InputError(f"at most {MAX_KEYS_PER_SITE} public keys per {what}")
    return tuple(keys)


def new_nonce() -> str:
    return secrets.token_hex(16)


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _check_fresh(issued_at: str, now: datetime, what: str) -> None:
    moment = parse_utc(issued_at, what)
    if moment > now + MAX_CLOCK_SKEW:
        raise VerificationError(f"{what} was issued at {issued_at}, in the future: fix the clock (NTP)")
    if now - moment > MAX_REQUEST_AGE:
        raise VerificationError(
            f"{what} was issued at {issued_at}, more than {MAX_REQUEST_AGE.days} days ago: "
            "ask the site for a fresh one"
        )


def _nonce(value: object, what: str) -> str:
    if not isinstance(value, str) or not NONCE_RE.fullmatch(value):
        raise InputError(f"{what}: nonce must be 32 lowercase hex characters")
    return value


# base64 Ed25519 public keys; which are valid and distinct is each document's __post_init__'s
Keys = tuple[StrictStr, ...]
Nonce = Annotated[StrictStr, Field(pattern=NONCE_RE.pattern)]


@dataclass(frozen=True)
class JoinRequest(Wire):
    """A site asking `gateway_url`'s federation to admit it under `site_id` at `url`.

    Every key is required and none other is allowed: what is signed has one shape."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "join request"

    site_id: SiteId
    url: StrictStr
    public_keys: Keys
    gateway_url: StrictStr
    nonce: Nonce
    issued_at: UtcTimestamp

    def __post_init__(self) -> None:
        validate_site_id(self.site_id)
        if validate_site_url(self.url) != self.url:
            raise InputError(f"join request: site URL must be written as {validate_site_url(self.url)!r}")
        if validate_site_url(self.gateway_url) != self.gateway_url:
            raise InputError(f"join request: gateway URL must be written as {validate_site_url(self.gateway_url)!r}")
        if validate_public_keys(list(self.public_keys)) != self.public_keys:
            raise InputError("join request: public keys must be distinct, without surrounding spaces")
        _nonce(self.nonce, "join request")
        parse_utc(self.issued_at, "join request: issued_at")



@dataclass(frozen=True)
class KeyRotation(Wire):
    """A site replacing its key set `previous_keys` (as the registry holds it) by `public_keys`."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "key rotation"

    site_id: SiteId
    previous_keys: Keys
    public_keys: Keys
    nonce: Nonce
    issued_at: UtcTimestamp

    def __post_init__(self) -> None:
        validate_site_id(self.site_id)
        for keys in (self.previous_keys, self.public_keys):
            if validate_public_keys(list(keys)) != keys:
                raise InputError("key rotation: public keys must be distinct, without surrounding spaces")
        if set(self.previous_keys) == set(self.public_keys):
            raise InputError("key rotation: the new key set equals the current one; nothing to rotate")
        _nonce(self.nonce, "key rotation")
        parse_utc(self.issued_at, "key rotation: issued_at")



def build_join_request(
    identities: Sequence[SiteIdentity], site_id: str, url: str, gateway_url: str, now: datetime | None = None
) -> dict[str, Any]:
    """Sign a join request with every key it lists (proof of possession)."""
    request = JoinRequest(
        site_id=validate_site_id(site_id),
        url=validate_site_url(url),
        public_keys=validate_public_keys([i.public_key_b64 for i in identities]),
        gateway_url=validate_site_url(gateway_url),
        nonce=new_nonce(),
        issued_at=format_utc(now or utc_now()),
    )
    return sign_all(JOIN_REQUEST_TYPE, canonical_json(request.to_json()), identities)


def parse_json(data: bytes, what: str) -> Any:
    """A signed document's payload, parsed strictly; bad JSON is the sender's input error."""
    try:
        return loads_strict(data)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{what}: invalid JSON ({exc})") from exc


def open_join_request(envelope: Any, now: datetime | None = None) -> JoinRequest:
    """A join request whose every listed key signed it, issued within MAX_REQUEST_AGE."""
    request = JoinRequest.from_json(parse_json(unverified_payload(envelope, JOIN_REQUEST_TYPE), "join request"))
    keys = [load_public_key(k) for k in request.public_keys]
    _, verified = verify_envelope(envelope, keys, {JOIN_REQUEST_TYPE}, threshold=len(keys))
    if canonical_json(request.to_json()) != verified:
        raise VerificationError("join request: the payload is not in canonical form; re-create it")
    _check_fresh(request.issued_at, now or utc_now(), f"join request from {request.site_id!r}")
    return request


def build_key_rotation(
    current: SiteIdentity,
    previous_keys: Sequence[str],
    new_identities: Sequence[SiteIdentity],
    site_id: str,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Sign a rotation with one current key and every new key.

    `previous_keys` is the site's whole key set as the registry holds it now; `current` must be
    one of them."""
    rotation = KeyRotation(
        site_id=validate_site_id(site_id),
        previous_keys=validate_public_keys(list(previous_keys)),
        public_keys=validate_public_keys([i.public_key_b64 for i in new_identities]),
        nonce=new_nonce(),
        issued_at=format_utc(now or utc_now()),
    )
    if current.public_key_b64 not in rotation.previous_keys:
        raise InputError("key rotation: the signing key is not one of the site's current keys")
    return sign_all(KEY_ROTATION_TYPE, canonical_json(rotation.to_json()), [current, *new_identities])


def open_key_rotation(
    envelope: Any, site_id: str, current_keys: Sequence[str], now: datetime | None = None
) -> KeyRotation:
    """Verify a rotation for `site_id` whose registry key set is `current_keys`.

    Verified first under the current keys (one suffices: a site's documents need one signature),
    then parsed, then checked to be signed by every new key and to replace exactly that set."""
    current = [load_public_key(k) for k in current_keys]
    _, data = verify_envelope(envelope, current, {KEY_ROTATION_TYPE}, threshold=1)
    rotation = KeyRotation.from_json(parse_json(data, "key rotation"))
    if rotation.site_id != site_id:
        raise VerificationError(
            f"key rotation names site {rotation.site_id!r}, not {site_id!r}: a site rotates only its own keys"
        )
    if set(rotation.previous_keys) != set(current_keys):
        raise VerificationError(
            f"key rotation for {site_id!r} replaces a key set the registry does not hold now "
            "(stale or replayed request); make a new one from the current keys"
        )
    new = [load_public_key(k) for k in rotation.public_keys]
    verify_envelope(envelope, new, {KEY_ROTATION_TYPE}, threshold=len(new))
    _check_fresh(rotation.issued_at, now or utc_now(), f"key rotation for {site_id!r}")
    return rotation
