"""The federation's signed metadata: who may change the registry (root), and who is in it (registry).

Modelled on TUF's root and targets roles. The *root* lists the federation keys and the threshold
m of n that must sign; the *registry* lists the sites (id, URL, keys, key-set version, status,
policy) and is valid only when m distinct root keys signed its exact bytes. Both carry a version
that only goes up and an expiry. A new root must be signed by a threshold of the old keys *and* a
threshold of its own, so neither a stolen old key set nor a fresh one can take over alone.

Every value here is a frozen dataclass of the model layer (core/model.py): its field types say what
JSON it accepts, and its `__post_init__` validates what they cannot say on construction, whoever
builds it (a parse or hansa's own code). Registry changes are made through methods that return the
next value (`admit`, `rotate`, `revoke`, `renew`), so a malformed or contradictory registry cannot
be written in the first place; `check_successor` then
refuses any history the methods would not produce (a key set changed without a new key-set
version, a site deleted instead of revoked), whoever built the document.

Nothing here touches disk or clocks other than through the `now` arguments: which document may
follow which is gateway.trust.state's decision, and the store (gateway.trust.registry) keeps what it
accepted.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Annotated, Any, ClassVar, Iterable, Literal, Sequence

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import Field, StrictStr

from hansa.core.errors import ConflictError, InputError, NotFoundError, VerificationError
from hansa.core.model import FORBID, Wire
from hansa.sync.dsse import unverified_payload, verify_envelope
from hansa.sync.keys import load_public_key
from hansa.sync.membership import Keys, parse_json, validate_public_keys, validate_site_url
from hansa.sync.wire import (
    MAX_INT64,
    Positive,
    SiteId,
    UtcTimestamp,
    canonical_json,
    format_utc,
    parse_utc,
    validate_site_id,
)

ROOT_TYPE = "application/vnd.hansa.federation-root+json; v=1"
REGISTRY_TYPE = "application/vnd.hansa.registry+json; v=1"
ACTIVE = "active"
REVOKED = "revoked"
ROOT_TTL = timedelta(days=365)
REGISTRY_TTL = timedelta(days=90)
MAX_SITES = 10_000
DEFAULT_MAX_SUMMARIES = 100_000

Status = Literal["active", "revoked"]


def _positive(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_INT64:
        raise InputError(f"{what} must be a positive integer")
    return value


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Root(Wire):
    """The federation keys and how many of them must sign a registry or the next root."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "root"

    version: Positive
    expires: UtcTimestamp
    keys: Keys
    threshold: Positive

    def __post_init__(self) -> None:
        _positive(self.version, "root version")
        parse_utc(self.expires, "root: expires")
        if validate_public_keys(list(self.keys), "federation") != self.keys:
            raise InputError("root: federation keys must be distinct base64 Ed25519 keys")
        if not isinstance(self.threshold, int) or isinstance(self.threshold, bool) or not 1 <= self.threshold <= len(self.keys):
            raise InputError(f"root: threshold must be between 1 and the number of keys ({len(self.keys)})")

    def public_keys(self) -> list[Ed25519PublicKey]:
        return [load_public_key(k) for k in self.keys]

    def is_expired(self, now: datetime) -> bool:
        return parse_utc(self.expires, "root: expires") <= now

    def to_bytes(self) -> bytes:
        return canonical_json(self.to_json())

    @classmethod
    def from_bytes(cls, data: bytes) -> "Root":
        return cls.from_json(parse_json(data, cls.WHERE))

    def successor(self, keys: Sequence[str], threshold: int, now: datetime, ttl: timedelta = ROOT_TTL) -> "Root":
        return Root(self.version + 1, format_utc(now + ttl), validate_public_keys(list(keys), "federation"), threshold)


@dataclass(frozen=True)
class SitePolicy(Wire):
    """What the gateway accepts from a site beyond a valid signature."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "site policy"
    JSON_REQUIRED: ClassVar[tuple[str, ...]] = ("max_summaries",)

    max_summaries: Positive = DEFAULT_MAX_SUMMARIES  # summaries in one publication

    def __post_init__(self) -> None:
        _positive(self.max_summaries, "policy: max_summaries")


@dataclass(frozen=True)
class SiteEntry(Wire):
    """One member: its namespace (`site_id`), where the gateway calls it, and the keys that speak for it."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "registry site"
    JSON_REQUIRED: ClassVar[tuple[str, ...]] = ("policy",)

    site_id: SiteId
    url: StrictStr
    public_keys: Keys
    keys_version: Positive
    status: Status
    admitted_at: UtcTimestamp
    policy: SitePolicy = field(default_factory=SitePolicy)

    def __post_init__(self) -> None:
        validate_site_id(self.site_id)
        if validate_site_url(self.url) != self.url:
            raise InputError(f"site {self.site_id!r}: URL must be written as {validate_site_url(self.url)!r}")
        if validate_public_keys(list(self.public_keys)) != self.public_keys:
            raise InputError(f"site {self.site_id!r}: public keys must be distinct base64 Ed25519 keys")
        _positive(self.keys_version, f"site {self.site_id!r}: keys_version")
        if self.status not in (ACTIVE, REVOKED):
            raise InputError(f"site {self.site_id!r}: status must be {ACTIVE!r} or {REVOKED!r}")
        parse_utc(self.admitted_at, f"site {self.site_id!r}: admitted_at")
        if not isinstance(self.policy, SitePolicy):
            raise InputError(f"site {self.site_id!r}: policy must be a SitePolicy")

    @property
    def active(self) -> bool:
        return self.status == ACTIVE


@dataclass(frozen=True)
class Registry(Wire):
    """The sites of the federation at one version. `sites` is sorted by id, one entry per id.

    Every key is written, `gateway_url` as null when unset: one registry has one shape."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "registry"
    JSON_REQUIRED: ClassVar[tuple[str, ...]] = ("sites", "gateway_url")

    version: Positive
    expires: UtcTimestamp
    sites: Annotated[tuple[SiteEntry, ...], Field(max_length=MAX_SITES)] = ()
    gateway_url: StrictStr | None = None  # when set, join requests must be addressed to it

    def __post_init__(self) -> None:
        _positive(self.version, "registry version")
        parse_utc(self.expires, "registry: expires")
        if not isinstance(self.sites, tuple) or not all(isinstance(s, SiteEntry) for s in self.sites):
            raise InputError("registry: sites must be a tuple of SiteEntry")
        ids = [s.site_id for s in self.sites]
        if ids != sorted(set(ids)):
            raise InputError("registry: sites must be sorted by id and each id listed once")
        if len(ids) > MAX_SITES:
            raise InputError(f"registry: at most {MAX_SITES} sites")
        if self.gateway_url is not None and validate_site_url(self.gateway_url) != self.gateway_url:
            raise InputError(f"registry: gateway URL must be written as {validate_site_url(self.gateway_url)!r}")

    # -- reading ----------------------------------------------------------------------------------
    def get(self, site_id: str) -> SiteEntry | None:
        validate_site_id(site_id)
        return next((s for s in self.sites if s.site_id == site_id), None)

    def require(self, site_id: str) -> SiteEntry:
        entry = self.get(site_id)
        if entry is None:
            raise NotFoundError(f"site {site_id!r} is not in the registry; it joins with `hansa site join-request`")
        return entry

    def is_expired(self, now: datetime) -> bool:
        return parse_utc(self.expires, "registry: expires") <= now

    def to_bytes(self) -> bytes:
        return canonical_json(self.to_json())

    @classmethod
    def from_bytes(cls, data: bytes) -> "Registry":
        return cls.from_json(parse_json(data, cls.WHERE))

    # -- the next version (each returns a new Registry; version + 1, fresh expiry) ----------------
    def _next(self, sites: Iterable[SiteEntry], now: datetime, ttl: timedelta) -> "Registry":
        if ttl <= timedelta(0):
            raise InputError("a registry's lifetime must be positive: every signed registry expires")
        ordered = tuple(sorted(sites, key=lambda s: s.site_id))
        return Registry(self.version + 1, format_utc(now + ttl), ordered, self.gateway_url)

    def _replace_site(self, entry: SiteEntry, now: datetime, ttl: timedelta) -> "Registry":
        return self._next([s for s in self.sites if s.site_id != entry.site_id] + [entry], now, ttl)

    def admit(
        self, site_id: str, url: str, public_keys: Sequence[str], now: datetime,
        ttl: timedelta = REGISTRY_TTL, policy: SitePolicy | None = None,
    ) -> "Registry":
        """A new member, or a revoked one re-admitted (under a new key-set version)."""
        old = self.get(site_id)
        if old is not None and old.active:
            raise ConflictError(
                f"site {site_id!r} is already a member; change its keys with a rotation, "
                "or revoke it first"
            )
        entry = SiteEntry(
            site_id=site_id,
            url=validate_site_url(url),
            public_keys=validate_public_keys(list(public_keys)),
            keys_version=1 if old is None else old.keys_version + 1,
            status=ACTIVE,
            admitted_at=format_utc(now),
            policy=policy or (old.policy if old else SitePolicy()),
        )
        return self._replace_site(entry, now, ttl)

    def rotate(self, site_id: str, public_keys: Sequence[str], now: datetime, ttl: timedelta = REGISTRY_TTL) -> "Registry":
        old = self.require(site_id)
        if not old.active:
            raise VerificationError(f"site {site_id!r} is revoked: re-admit it with a join request instead")
        keys = validate_public_keys(list(public_keys))
        if set(keys) == set(old.public_keys):
            raise InputError(f"site {site_id!r} already has exactly these keys")
        return self._replace_site(replace(old, public_keys=keys, keys_version=old.keys_version + 1), now, ttl)

    def revoke(self, site_id: str, now: datetime, ttl: timedelta = REGISTRY_TTL) -> "Registry":
        old = self.require(site_id)
        if not old.active:
            raise ConflictError(f"site {site_id!r} is already revoked")
        return self._replace_site(replace(old, status=REVOKED), now, ttl)

    def renew(self, now: datetime, ttl: timedelta = REGISTRY_TTL) -> "Registry":
        """The same sites under a new version and expiry (registries expire; admins re-sign them)."""
        return self._next(self.sites, now, ttl)


def check_successor(old: Registry | None, new: Registry) -> None:
    """Refuse a registry that does not follow from the one in force (rollback, silent key swaps)."""
    if old is None:
        return
    if new.version <= old.version:
        raise ConflictError(
            f"registry version {new.version} is not above the version in force ({old.version}): "
            "rollback refused; sign a new version"
        )
    for before in old.sites:
        after = new.get(before.site_id)
        if after is None:
            raise InputError(
                f"registry version {new.version} drops site {before.site_id!r}: revoke a site instead "
                "of deleting it, so its id and replay floor stay reserved"
            )
        if after.keys_version < before.keys_version:
            raise InputError(f"site {before.site_id!r}: keys_version went down ({before.keys_version} -> {after.keys_version})")
        if after.keys_version == before.keys_version:
            if after.public_keys != before.public_keys:
                raise InputError(
                    f"site {before.site_id!r}: its keys changed without a new keys_version; use a rotation"
                )
            if after.active and not before.active:
                raise InputError(
                    f"site {before.site_id!r} was re-admitted without a new keys_version; use a join request"
                )


def keys_replaced(old: SiteEntry, new: SiteEntry) -> bool:
    """True when no key of the old set survives: nothing signed before can verify any more, so the
    site's replay floor may start again (recovery after a key compromise)."""
    return not set(old.public_keys) & set(new.public_keys)


# -- envelopes ----------------------------------------------------------------------------------
def verify_root(envelope: Any, trusted: Root | None) -> tuple[Root, bytes]:
    """The root in `envelope`, verified.

    With `trusted` (rotation): signed by trusted.threshold of the trusted keys (checked first,
    before parsing), then by its own threshold of its own keys, and exactly one version higher.
    Without (the federation's first root, or the stored root whose bytes the store has pinned):
    signed by its own threshold of its own keys."""
    if trusted is None:
        data = unverified_payload(envelope, ROOT_TYPE)
        root = Root.from_bytes(data)
    else:
        _, data = verify_envelope(envelope, trusted.public_keys(), {ROOT_TYPE}, threshold=trusted.threshold)
        root = Root.from_bytes(data)
        if root.version != trusted.version + 1:
            raise ConflictError(
                f"root version {root.version} does not follow the root in force ({trusted.version}); "
                f"sign version {trusted.version + 1}"
            )
    _, own = verify_envelope(envelope, root.public_keys(), {ROOT_TYPE}, threshold=root.threshold)
    if own != data:
        raise VerificationError("root: the envelope's payload changed between checks")
    return root, data


def verify_registry(envelope: Any, root: Root) -> tuple[Registry, bytes]:
    """The registry in `envelope`, signed by `root.threshold` distinct root keys (expiry is the caller's)."""
    _, data = verify_envelope(envelope, root.public_keys(), {REGISTRY_TYPE}, threshold=root.threshold)
    return Registry.from_bytes(data), data


def expiry_error(what: str, expires: str) -> VerificationError:
    command = "federation rotate-root" if what == "root" else "federation renew"
    return VerificationError(
        f"the federation {what} expired at {expires}: federation admins must sign a new version "
        f"(`hansa gateway {command} --key ...`)"
    )
