"""What this gateway trusts, and the only ways that may change: the trust core as a pure value.

Why a module of its own: deciding whether a signed root or registry may replace the one in force
(thresholds, successor versions, expiry), whether a publication is above its site's floor, and
whether a site is routable must not depend on where the documents are kept or what time the process
thinks it is. Here every decision is a method of a frozen `TrustedState` that returns the next
state or raises, and every one that depends on time takes `now`; nothing reads a file, takes a
lock or asks a clock, so each rule is tested in microseconds at any instant one names. The split
is python-tuf's: this is its `TrustedMetadataSet`; the store (gateway.trust.registry) is its `Updater`
side (files, history, locks, polling), and the key-holding operations are gateway.trust.admin's, used by
the command line only. The document formats and signature checks themselves are gateway.trust.documents's.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, ClassVar, Mapping

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import StrictStr

from hansa.core.errors import ConflictError, InputError, NotFoundError, VerificationError
from hansa.core.model import FORBID, Wire
from hansa.gateway.trust.documents import (
    ACTIVE,
    Keys,
    Registry,
    Root,
    SiteEntry,
    SitePolicy,
    Status,
    check_successor,
    expiry_error,
    keys_replaced,
    verify_registry,
    verify_root,
)
from hansa.sync.dsse import envelope_json
from hansa.sync.keys import load_public_key
from hansa.sync.wire import Count, Positive, SiteId, UtcTimestamp, format_utc, parse_utc, validate_site_id

NO_FEDERATION = "this gateway has no federation yet: run `hansa gateway federation init`"


def envelope_of(envelope: Any) -> Mapping[str, Any]:
    """An envelope given as bytes, text or an object, as an object (shape is checked on verify)."""
    envelope = envelope_json(envelope)
    if not isinstance(envelope, Mapping):
        raise VerificationError("a signed registry or root must be a DSSE envelope (a JSON object)")
    return envelope


@dataclass(frozen=True)
class Publication(Wire):
    """The gateway's record of a site's current publication: the floor a new one must exceed.
    Kept in the store's state file, every key written (null where there is none yet)."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "publication record"
    JSON_REQUIRED: ClassVar[tuple[str, ...]] = ("last_sequence", "expires", "summary_count", "published_at")

    last_sequence: Count | None = None
    expires: UtcTimestamp | None = None
    summary_count: Count = 0
    published_at: UtcTimestamp | None = None


@dataclass(frozen=True)
class SiteRecord(Wire):
    """A site as the gateway sees it: its registry entry, its publication, and until when the
    federation vouches for it (`trusted_until`, the earlier of the registry's and root's expiry).
    Whether it is expired or routable is asked at a given `now`: a record does not age by itself.
    Written for operators (`view`), never read back."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "site record"

    site_id: SiteId
    url: StrictStr
    public_keys: Keys
    enrolled_at: UtcTimestamp
    status: Status = ACTIVE
    last_sequence: Count | None = None
    expires: UtcTimestamp | None = None  # of the current publication
    summary_count: Count = 0
    published_at: UtcTimestamp | None = None
    keys_version: Positive = 1
    policy: SitePolicy = field(default_factory=SitePolicy)
    trusted_until: UtcTimestamp | None = None

    def is_expired(self, now: datetime) -> bool:
        """No publication yet counts as expired: there is nothing current to route on."""
        if self.expires is None:
            return True
        return parse_utc(self.expires, "expires") <= now

    @property
    def is_withdrawn(self) -> bool:
        """The site's publication in force holds no summary: it withdrew from the federation
        (`hansa site uninstall` signs such a publication); a later publication brings it back."""
        return self.expires is not None and self.summary_count == 0

    def is_routable(self, now: datetime) -> bool:
        vouched = self.trusted_until is None or parse_utc(self.trusted_until, "trusted_until") > now
        return self.status == ACTIVE and vouched and not self.is_expired(now) and not self.is_withdrawn

    def view(self, now: datetime) -> dict[str, Any]:
        """What operators see (API and CLI): the record plus its state at `now`."""
        return {**self.to_json(), "expired": self.is_expired(now), "withdrawn": self.is_withdrawn,
                "routable": self.is_routable(now)}


def check_sequence_value(site_id: str, pub: Publication, sequence: int) -> None:
    if not isinstance(sequence, int) or isinstance(sequence, bool) or sequence < 0:
        raise InputError(f"publication sequence must be a non-negative integer, got {sequence!r}")
    if pub.last_sequence is not None and sequence <= pub.last_sequence:
        raise ConflictError(
            f"site {site_id!r}: publication sequence {sequence} is not above the last accepted "
            f"{pub.last_sequence} (replay or rollback refused); publish with a higher sequence"
        )


def _new_registry(envelope: Mapping[str, Any], root: Root, current: Registry | None, now: datetime) -> tuple[Registry, bytes]:
    """A registry signed under `root` that may follow `current` at `now`."""
    registry, data = verify_registry(envelope, root)
    check_successor(current, registry)
    if registry.is_expired(now):
        raise VerificationError(
            f"registry version {registry.version} expired at {registry.expires}: refused; "
            "sign it again with a later expiry"
        )
    return registry, data


@dataclass(frozen=True)
class TrustedState:
    """Nothing (no federation yet) or a root, the registry it signed, the envelopes and exact
    payload bytes of both, and the publication floors. Each transition returns a new state."""

    root: Root | None = None
    root_bytes: bytes = b""
    registry: Registry | None = None
    registry_bytes: bytes = b""
    publications: Mapping[str, Publication] = field(default_factory=dict)
    root_envelope: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    registry_envelope: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    # -- reading the stored state (signatures only: expiry is checked when data is accepted) ----
    @classmethod
    def stored(
        cls, root_envelope: Mapping[str, Any] | None, registry_envelope: Mapping[str, Any] | None,
        publications: Mapping[str, Publication] | None = None,
    ) -> "TrustedState":
        """The state pinned by a store, re-verified: the root under its own keys (its bytes were
        pinned when it was accepted), the registry under that root."""
        root = registry = None
        root_bytes = registry_bytes = b""
        if root_envelope is not None:
            root, root_bytes = verify_root(root_envelope, None)
        if registry_envelope is not None:
            if root is None:
                raise InputError("a registry without a root")
            registry, registry_bytes = verify_registry(registry_envelope, root)
        return cls(root, root_bytes, registry, registry_bytes, dict(publications or {}), root_envelope, registry_envelope)

    # -- queries ----------------------------------------------------------------------------------
    def trusted_until(self) -> str | None:
        if self.root is None or self.registry is None:
            return None
        return min((self.root.expires, self.registry.expires), key=lambda t: parse_utc(t, "expires"))

    def record(self, entry: SiteEntry) -> SiteRecord:
        pub = self.publications.get(entry.site_id, Publication())
        return SiteRecord(
            site_id=entry.site_id, url=entry.url, public_keys=entry.public_keys, enrolled_at=entry.admitted_at,
            status=entry.status, last_sequence=pub.last_sequence, expires=pub.expires,
            summary_count=pub.summary_count, published_at=pub.published_at, keys_version=entry.keys_version,
            policy=entry.policy, trusted_until=self.trusted_until(),
        )

    def site(self, site_id: str) -> SiteRecord:
        validate_site_id(site_id)
        entry = self.registry.get(site_id) if self.registry else None
        if entry is None:
            raise NotFoundError(f"site {site_id!r} is not enrolled; it joins with `hansa site join-request`")
        return self.record(entry)

    def records(self) -> list[SiteRecord]:
        return [self.record(e) for e in self.registry.sites] if self.registry else []

    def last_sequence(self, site_id: str) -> int | None:
        validate_site_id(site_id)
        pub = self.publications.get(site_id)
        return pub.last_sequence if pub else None

    def trusted_entry(self, site_id: str, now: datetime) -> SiteEntry:
        """The entry of a site whose signed data may be accepted at `now`, or VerificationError."""
        validate_site_id(site_id)
        if self.root is None or self.registry is None:
            raise VerificationError(
                f"site {site_id!r} is not enrolled: this gateway has no federation registry yet "
                "(`hansa gateway federation init`)"
            )
        entry = self.registry.get(site_id)
        if entry is None:
            raise VerificationError(f"site {site_id!r} is not enrolled: nothing from it is accepted")
        if not entry.active:
            raise VerificationError(f"site {site_id!r} is revoked: nothing from it is accepted")
        if self.root.is_expired(now):
            raise expiry_error("root", self.root.expires)
        if self.registry.is_expired(now):
            raise expiry_error("registry", self.registry.expires)
        return entry

    def keys_for(self, site_id: str, now: datetime) -> list[Ed25519PublicKey]:
        return [load_public_key(k) for k in self.trusted_entry(site_id, now).public_keys]

    def check_sequence(self, site_id: str, sequence: int, summary_count: int | None, now: datetime) -> SiteEntry:
        """Refuse a replay, rollback or over-policy publication from a site trusted at `now`."""
        entry = self.trusted_entry(site_id, now)
        check_sequence_value(site_id, self.publications.get(site_id, Publication()), sequence)
        if summary_count is not None and summary_count > entry.policy.max_summaries:
            raise InputError(
                f"site {site_id!r}: {summary_count} summaries exceed the registry policy's "
                f"max_summaries ({entry.policy.max_summaries})"
            )
        return entry

    def untrusted_by(self, new: "TrustedState") -> list[str]:
        """Sites trusted here whose data `new` no longer vouches for (revoked, or every key replaced)."""
        if self.registry is None:
            return []
        lost = []
        for before in self.registry.sites:
            after = new.registry.get(before.site_id) if new.registry is not None else None
            if before.active and (after is None or not after.active or keys_replaced(before, after)):
                lost.append(before.site_id)
        return lost

    # -- transitions ------------------------------------------------------------------------------
    def with_publication(self, site_id: str, sequence: int, expires: str, count: int, now: datetime) -> "TrustedState":
        """The floor raised to `sequence`; refuses (ConflictError) anything not strictly above it."""
        parse_utc(expires, "expires")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise InputError(f"summary count must be a non-negative integer, got {count!r}")
        self.trusted_entry(site_id, now)
        check_sequence_value(site_id, self.publications.get(site_id, Publication()), sequence)
        pub = Publication(sequence, expires, count, format_utc(now))
        return replace(self, publications={**self.publications, site_id: pub})

    def initialized(self, root_envelope: Any, registry_envelope: Any, now: datetime) -> "TrustedState":
        """A federation's first root (version 1) and registry; refused once a root exists."""
        root_env, reg_env = envelope_of(root_envelope), envelope_of(registry_envelope)
        if self.root is not None:
            raise ConflictError(
                f"this gateway already trusts federation root version {self.root.version}; "
                "rotate it with `hansa gateway federation rotate-root` instead"
            )
        root, root_bytes = verify_root(root_env, None)
        if root.version != 1:
            raise VerificationError(f"a federation starts at root version 1, not {root.version}")
        if root.is_expired(now):
            raise expiry_error("root", root.expires)
        registry, registry_bytes = _new_registry(reg_env, root, None, now)
        return TrustedState(root, root_bytes, registry, registry_bytes, self.publications, root_env, reg_env)

    def with_registry(self, envelope: Any, now: datetime) -> "TrustedState":
        """A registry signed by m distinct keys of the root in force, above the current version and
        not expired at `now`; the same version with the same bytes returns this state unchanged."""
        env = envelope_of(envelope)
        if self.root is None:
            raise NotFoundError(NO_FEDERATION)
        registry, data = verify_registry(env, self.root)
        if self.registry is not None and registry.version == self.registry.version:
            if data == self.registry_bytes:
                return self  # the same document again: nothing to do
            raise ConflictError(
                f"registry version {registry.version} is already in force with different content: "
                "refused; sign the change as a new version"
            )
        if self.root.is_expired(now):
            raise expiry_error("root", self.root.expires)
        registry, data = _new_registry(env, self.root, self.registry, now)
        return replace(self, registry=registry, registry_bytes=data, registry_envelope=env,
                       publications=self._floors_after(registry))

    def with_root(self, root_envelope: Any, registry_envelope: Any, now: datetime) -> "TrustedState":
        """The next root, signed by a threshold of the old keys and of its own. The registry in
        force must verify under it, or `registry_envelope` (signed by the new keys) replaces it."""
        root_env = envelope_of(root_envelope)
        reg_env = envelope_of(registry_envelope) if registry_envelope is not None else None
        if self.root is None:
            raise NotFoundError(NO_FEDERATION)
        root, root_bytes = verify_root(root_env, self.root)
        if root.is_expired(now):
            raise expiry_error("root", root.expires)
        if reg_env is None:
            if self.registry is None or self.registry_envelope is None:
                raise InputError("no registry in force: submit one signed by the new root's keys")
            registry, registry_bytes = verify_registry(self.registry_envelope, root)
            return replace(self, root=root, root_bytes=root_bytes, root_envelope=root_env,
                           registry=registry, registry_bytes=registry_bytes)
        registry, registry_bytes = _new_registry(reg_env, root, self.registry, now)
        return TrustedState(root, root_bytes, registry, registry_bytes, self._floors_after(registry), root_env, reg_env)

    def _floors_after(self, new: Registry) -> dict[str, Publication]:
        """Publication floors under the next registry: a revoked site has nothing current to route on
        (its floor stays, so nothing it published can come back); a site whose keys were all replaced
        starts a new floor (guarantee 8: a thief's huge sequence numbers must not lock it out)."""
        floors = dict(self.publications)
        for after in new.sites:
            before = self.registry.get(after.site_id) if self.registry else None
            if before is None or after.site_id not in floors:
                continue
            if before.active and not after.active:
                floors[after.site_id] = replace(floors[after.site_id], expires=None, summary_count=0)
            elif keys_replaced(before, after):
                del floors[after.site_id]
        return floors
