"""The federation registry in force at this gateway, and each site's publication floor.

What the gateway trusts is decided by two signed documents (gateway.trust): the federation *root*
(m-of-n federation keys) and the *registry* of sites it signed. This store keeps them, and the
gateway's own record of what each site last published (the replay/rollback floor), under the
directory of `path` (`<home>/gateway/registry.json` by default):

    registry.json           the registry envelope in force: a copy for operators and sites
    registry.history/       every accepted root and registry envelope, one file per version
    registry.state.json     the commit point: version + sha256 of the root and registry in
                            force, and every site's publication floor
    federation-keys/        federation private keys kept on this machine (trials and demos)

A change is accepted only through `initialize`, `submit_registry` or `submit_root`, which verify
the threshold, the version (strictly increasing; the same version must be the same bytes) and the
expiry against what is in force, write the history file, and then replace the state file
atomically (temp + fsync + os.replace + directory fsync) under a thread lock and an advisory
`flock`, so a CLI in one process and a running gateway in another never lose each other's updates.

Every read re-verifies what the state file pins, whenever that file changed (a stat per call):
a change made by `hansa gateway ...` takes effect on a running gateway at its next request, and a
site that lost trust (revoked, or all its keys replaced) is reported to the `on_untrusted`
listeners at once, which drop its summaries from the index. If what is on disk no longer verifies
(a tampered or rolled-back file) a running gateway keeps the registry it had and logs the refusal;
a starting gateway refuses to start rather than trust it.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, ContextManager, Mapping, Sequence

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from hansa.core.files import file_signature, locked, write_bytes_atomic
from hansa.core.errors import ConflictError, HansaError, InputError, NotFoundError, VerificationError
from hansa.core.jsonsafe import dumps, loads_strict
from hansa.core.logs import get_logger
from hansa.gateway import admin
from hansa.gateway.trust import (
    ACTIVE,
    REGISTRY_TTL,
    REVOKED,
    Registry,
    Root,
    SiteEntry,
    SitePolicy,
    check_successor,
    expiry_error,
    keys_replaced,
    sha256_hex,
    verify_registry,
    verify_root,
)
from hansa.sync.dsse import envelope_json
from hansa.sync.keys import SiteIdentity, load_public_key
from hansa.sync.membership import validate_site_url
from hansa.sync.wire import MAX_INT64, format_utc, parse_utc, validate_site_id

__all__ = ["ACTIVE", "REVOKED", "SiteRecord", "SiteRegistry", "utc_now", "validate_site_url"]

log = get_logger(__name__)

FORMAT_VERSION = 2


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _envelope(envelope: Any) -> Mapping[str, Any]:
    """An envelope given as bytes, text or an object, as an object (shape is checked on verify)."""
    envelope = envelope_json(envelope)
    if not isinstance(envelope, Mapping):
        raise VerificationError("a signed registry or root must be a DSSE envelope (a JSON object)")
    return envelope


@dataclass(frozen=True)
class Publication:
    """The gateway's record of a site's current publication: the floor a new one must exceed."""

    last_sequence: int | None = None
    expires: str | None = None
    summary_count: int = 0
    published_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"last_sequence": self.last_sequence, "expires": self.expires,
                "summary_count": self.summary_count, "published_at": self.published_at}

    @classmethod
    def from_json(cls, obj: Any, where: str) -> "Publication":
        if not isinstance(obj, Mapping) or set(obj) != {"last_sequence", "expires", "summary_count", "published_at"}:
            raise InputError(f"{where}: not a publication record")
        seq, count = obj["last_sequence"], obj["summary_count"]
        if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq <= MAX_INT64):
            raise InputError(f"{where}: last_sequence must be a non-negative integer or null")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise InputError(f"{where}: summary_count must be a non-negative integer")
        for key in ("expires", "published_at"):
            if obj[key] is not None:
                parse_utc(obj[key], f"{where}: {key}")
        return cls(seq, obj["expires"], count, obj["published_at"])


@dataclass(frozen=True)
class SiteRecord:
    """A site as the gateway sees it: its registry entry, its publication, and until when the
    federation vouches for it (`trusted_until`, the earlier of the registry's and root's expiry)."""

    site_id: str
    url: str
    public_keys: tuple[str, ...]
    enrolled_at: str
    status: str = ACTIVE
    last_sequence: int | None = None
    expires: str | None = None  # of the current publication
    summary_count: int = 0
    published_at: str | None = None
    keys_version: int = 1
    policy: SitePolicy = field(default_factory=SitePolicy)
    trusted_until: str | None = None

    def is_expired(self, now: datetime | None = None) -> bool:
        """No publication yet counts as expired: there is nothing current to route on."""
        if self.expires is None:
            return True
        return parse_utc(self.expires, "expires") <= (now or utc_now())

    @property
    def is_withdrawn(self) -> bool:
        """The site's publication in force holds no summary: it withdrew from the federation
        (`hansa site uninstall` signs such a publication); a later publication brings it back."""
        return self.expires is not None and self.summary_count == 0

    def is_routable(self, now: datetime | None = None) -> bool:
        now = now or utc_now()
        vouched = self.trusted_until is None or parse_utc(self.trusted_until, "trusted_until") > now
        return self.status == ACTIVE and vouched and not self.is_expired(now) and not self.is_withdrawn

    def to_json(self) -> dict[str, Any]:
        return {
            "site_id": self.site_id,
            "url": self.url,
            "public_keys": list(self.public_keys),
            "keys_version": self.keys_version,
            "enrolled_at": self.enrolled_at,
            "status": self.status,
            "policy": self.policy.to_json(),
            "trusted_until": self.trusted_until,
            "last_sequence": self.last_sequence,
            "expires": self.expires,
            "summary_count": self.summary_count,
            "published_at": self.published_at,
        }

    def view(self, now: datetime | None = None) -> dict[str, Any]:
        """What operators see (API and CLI): the record plus its state at `now`."""
        now = now or utc_now()
        return {**self.to_json(), "expired": self.is_expired(now), "withdrawn": self.is_withdrawn,
                "routable": self.is_routable(now)}


@dataclass(frozen=True)
class TrustedState:
    """What one verified read of the store found: nothing (no federation yet) or a root, the
    registry it signed, the exact payload bytes of both, and the publication floors."""

    root: Root | None = None
    root_bytes: bytes = b""
    registry: Registry | None = None
    registry_bytes: bytes = b""
    publications: Mapping[str, Publication] = field(default_factory=dict)

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

    def trusted_entry(self, site_id: str, now: datetime) -> SiteEntry:
        """The entry of a site whose signed data may be accepted now, or VerificationError."""
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


def _lost_trust(old: Registry | None, new: Registry | None) -> list[str]:
    """Sites trusted under `old` whose data `new` no longer vouches for (revoked, or every key replaced)."""
    if old is None:
        return []
    lost = []
    for before in old.sites:
        after = new.get(before.site_id) if new is not None else None
        if before.active and (after is None or not after.active or keys_replaced(before, after)):
            lost.append(before.site_id)
    return lost


def _floors_after(current: TrustedState, new: Registry) -> dict[str, Publication]:
    """Publication floors under the next registry: a revoked site has nothing current to route on
    (its floor stays, so nothing it published can come back); a site whose keys were all replaced
    starts a new floor (guarantee 8: a thief's huge sequence numbers must not lock it out)."""
    floors = dict(current.publications)
    for after in new.sites:
        before = current.registry.get(after.site_id) if current.registry else None
        if before is None or after.site_id not in floors:
            continue
        if before.active and not after.active:
            floors[after.site_id] = replace(floors[after.site_id], expires=None, summary_count=0)
        elif keys_replaced(before, after):
            del floors[after.site_id]
            log.info("registry.floor_reset", site_id=after.site_id, keys_version=after.keys_version)
    return floors


class SiteRegistry:
    def __init__(self, path: Path, keys_dir: Path | None = None) -> None:
        self.path = Path(path)
        stem = self.path.stem
        self.state_path = self.path.with_name(f"{stem}.state.json")
        self.history_dir = self.path.with_name(f"{stem}.history")
        self.keys_dir = Path(keys_dir) if keys_dir is not None else self.path.parent / admin.KEYS_DIRNAME
        self._lock_path = self.path.with_name(self.path.name + ".lock")
        self._write_lock = threading.RLock()
        self._cache_lock = threading.Lock()
        self._cache: TrustedState | None = None
        self._cache_token: tuple[int, ...] | None = None
        self._listeners: list[Callable[[str], None]] = []

    # -- storage --------------------------------------------------------------------------------
    def _locked(self) -> ContextManager[None]:
        return locked(self._lock_path, self._write_lock)

    def _history_file(self, kind: str, version: int) -> Path:
        return self.history_dir / f"{kind}-{version:08d}.json"

    def _token(self) -> tuple[int, ...] | None:
        return file_signature(self.state_path)

    def _read_pinned(self, kind: str, pin: Any) -> Mapping[str, Any]:
        where = f"{self.state_path}: {kind}"
        if not isinstance(pin, Mapping) or set(pin) != {"version", "sha256"}:
            raise InputError(f"{where} pin must be {{version, sha256}}")
        path = self._history_file(kind, pin["version"])
        try:
            data = path.read_bytes()
        except (OSError, TypeError, ValueError) as exc:
            raise VerificationError(f"{kind} version {pin['version']} in force is missing ({path}): {exc}") from exc
        if sha256_hex(data) != pin["sha256"]:
            raise VerificationError(
                f"{path} is not the {kind} version {pin['version']} this gateway accepted "
                "(its bytes changed): restore it from a backup or have the admins sign a new version"
            )
        return _envelope(data)

    def _load(self) -> TrustedState:
        """Read and verify everything the state file pins (raises if any of it does not verify)."""
        if not self.state_path.exists():
            if self.path.exists():  # the copy is written after the state, so this is no crash
                raise InputError(
                    f"{self.path} exists without {self.state_path.name}: an unsigned registry from an earlier "
                    "hansa, or lost state. Move it away, create the federation (`hansa gateway federation "
                    "init`) and admit each site again"
                )
            return TrustedState()
        obj = loads_strict(self.state_path.read_bytes())
        if not isinstance(obj, Mapping) or obj.get("format") != FORMAT_VERSION or set(obj) != {
            "format", "root", "registry", "publications"
        }:
            raise InputError(f"{self.state_path}: not a hansa registry state (format {FORMAT_VERSION})")
        root = registry = None
        root_bytes = registry_bytes = b""
        if obj["root"] is not None:
            root, root_bytes = verify_root(self._read_pinned("root", obj["root"]), None)
            if root.version != obj["root"]["version"]:
                raise VerificationError(f"{self.state_path}: the stored root is not version {obj['root']['version']}")
        if obj["registry"] is not None:
            if root is None:
                raise InputError(f"{self.state_path}: a registry without a root")
            registry, registry_bytes = verify_registry(self._read_pinned("registry", obj["registry"]), root)
            if registry.version != obj["registry"]["version"]:
                raise VerificationError(
                    f"{self.state_path}: the stored registry is not version {obj['registry']['version']}"
                )
        pubs = obj["publications"]
        if not isinstance(pubs, Mapping):
            raise InputError(f"{self.state_path}: publications must be an object")
        publications = {
            validate_site_id(sid): Publication.from_json(p, f"{self.state_path}: {sid}") for sid, p in pubs.items()
        }
        return TrustedState(root, root_bytes, registry, registry_bytes, publications)

    def _commit(
        self,
        current: TrustedState,
        *,
        root_envelope: Mapping[str, Any] | None = None,
        registry_envelope: Mapping[str, Any] | None = None,
        new: TrustedState,
    ) -> None:
        """History files first, then the state file (the commit point), then the operator copy."""
        pins = {}
        for kind, env, meta, old in (
            ("root", root_envelope, new.root, current.root),
            ("registry", registry_envelope, new.registry, current.registry),
        ):
            if env is not None and meta is not None:
                data = dumps(dict(env))
                write_bytes_atomic(self._history_file(kind, meta.version), data)
                pins[kind] = {"version": meta.version, "sha256": sha256_hex(data)}
            elif old is not None:
                pins[kind] = self._pin_of(kind)
            else:
                pins[kind] = None
        state = {
            "format": FORMAT_VERSION,
            "root": pins["root"],
            "registry": pins["registry"],
            "publications": {sid: p.to_json() for sid, p in sorted(new.publications.items())},
        }
        write_bytes_atomic(self.state_path, dumps(state))
        if registry_envelope is not None:
            write_bytes_atomic(self.path, dumps(dict(registry_envelope)))

    def _pin_of(self, kind: str) -> Any:
        return loads_strict(self.state_path.read_bytes())[kind]

    # -- the state in force ---------------------------------------------------------------------
    def on_untrusted(self, listener: Callable[[str], None]) -> None:
        """Call `listener(site_id)` whenever a site loses trust (revocation, all keys replaced)."""
        self._listeners.append(listener)

    def refresh(self) -> TrustedState:
        """The verified state in force, reloaded if the stored state changed since the last call."""
        lost: list[str] = []
        with self._cache_lock:
            token = self._token()
            if self._cache is None or token != self._cache_token:
                try:
                    state = self._load()
                except HansaError as exc:
                    if self._cache is None:
                        raise VerificationError(f"the stored federation registry is refused: {exc}") from exc
                    log.error("registry.refused", error=str(exc), kept_version=self._version(self._cache))
                    self._cache_token = token  # keep the previous registry in force; log once
                else:
                    lost = _lost_trust(self._cache.registry if self._cache else None, state.registry)
                    self._cache, self._cache_token = state, token
            current = self._cache
        for site_id in lost:
            log.info("registry.untrusted", site_id=site_id)
            for listener in list(self._listeners):
                try:
                    listener(site_id)
                except Exception:  # the change is committed; a startup purge catches up later
                    log.exception("registry.listener_failed", site_id=site_id)
        return current

    def poll(self) -> None:
        """Apply a change made by another process (e.g. `hansa gateway revoke`) now; for hooks
        that run before each request."""
        self.refresh()

    @staticmethod
    def _version(state: TrustedState) -> int | None:
        return state.registry.version if state.registry else None

    # -- queries --------------------------------------------------------------------------------
    @property
    def root(self) -> Root | None:
        return self.refresh().root

    @property
    def registry(self) -> Registry | None:
        return self.refresh().registry

    def get(self, site_id: str) -> SiteRecord:
        state = self.refresh()
        validate_site_id(site_id)
        entry = state.registry.get(site_id) if state.registry else None
        if entry is None:
            raise NotFoundError(f"site {site_id!r} is not enrolled; it joins with `hansa site join-request`")
        return state.record(entry)

    def list(self) -> list[SiteRecord]:
        state = self.refresh()
        return [state.record(e) for e in state.registry.sites] if state.registry else []

    def keys_for(self, site_id: str) -> list[Ed25519PublicKey]:
        """The keys a publication from `site_id` must verify under; refuses (VerificationError)
        for unknown or revoked sites and while the registry or root is expired."""
        entry = self.refresh().trusted_entry(site_id, utc_now())
        return [load_public_key(k) for k in entry.public_keys]

    def last_sequence(self, site_id: str) -> int | None:
        """The publication floor: a new publication's sequence must be above it (None: no floor)."""
        validate_site_id(site_id)
        pub = self.refresh().publications.get(site_id)
        return pub.last_sequence if pub else None

    def check_sequence(self, site_id: str, sequence: int, summary_count: int | None = None) -> None:
        """Refuse a replay, rollback or over-policy publication before anything is stored
        (record_publication re-checks the sequence under the lock)."""
        state = self.refresh()
        entry = state.trusted_entry(site_id, utc_now())
        self._check_sequence(site_id, state.publications.get(site_id, Publication()), sequence)
        if summary_count is not None and summary_count > entry.policy.max_summaries:
            raise InputError(
                f"site {site_id!r}: {summary_count} summaries exceed the registry policy's "
                f"max_summaries ({entry.policy.max_summaries})"
            )

    @staticmethod
    def _check_sequence(site_id: str, pub: Publication, sequence: int) -> None:
        if not isinstance(sequence, int) or isinstance(sequence, bool) or sequence < 0:
            raise InputError(f"publication sequence must be a non-negative integer, got {sequence!r}")
        if pub.last_sequence is not None and sequence <= pub.last_sequence:
            raise ConflictError(
                f"site {site_id!r}: publication sequence {sequence} is not above the last accepted "
                f"{pub.last_sequence} (replay or rollback refused); publish with a higher sequence"
            )

    def record_publication(
        self, site_id: str, sequence: int, expires: str, count: int, now: datetime | None = None
    ) -> SiteRecord:
        """Raise the floor to `sequence`; refuses (ConflictError) anything not strictly above it."""
        parse_utc(expires, "expires")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise InputError(f"summary count must be a non-negative integer, got {count!r}")
        now = now or utc_now()
        with self._locked():
            current = self._load()
            entry = current.trusted_entry(site_id, now)
            self._check_sequence(site_id, current.publications.get(site_id, Publication()), sequence)
            pub = Publication(sequence, expires, count, format_utc(now))
            new = replace(current, publications={**current.publications, site_id: pub})
            self._commit(current, new=new)
        return new.record(entry)

    # -- registry changes (each one verified against what is in force) --------------------------
    def initialize(self, root_envelope: Any, registry_envelope: Any, now: datetime | None = None) -> Registry:
        """Take a federation's first root (version 1) and registry; refused once a root exists."""
        now = now or utc_now()
        root_env, reg_env = _envelope(root_envelope), _envelope(registry_envelope)
        with self._locked():
            current = self._load()
            if current.root is not None:
                raise ConflictError(
                    f"this gateway already trusts federation root version {current.root.version}; "
                    "rotate it with `hansa gateway federation rotate-root` instead"
                )
            root, root_bytes = verify_root(root_env, None)
            if root.version != 1:
                raise VerificationError(f"a federation starts at root version 1, not {root.version}")
            if root.is_expired(now):
                raise expiry_error("root", root.expires)
            registry, registry_bytes = self._verify_new_registry(reg_env, root, None, now)
            new = TrustedState(root, root_bytes, registry, registry_bytes, current.publications)
            self._commit(current, root_envelope=root_env, registry_envelope=reg_env, new=new)
        log.info("registry.initialized", keys=len(root.keys), threshold=root.threshold)
        self.refresh()
        return registry

    @staticmethod
    def _verify_new_registry(
        envelope: Mapping[str, Any], root: Root, current: Registry | None, now: datetime
    ) -> tuple[Registry, bytes]:
        registry, data = verify_registry(envelope, root)
        check_successor(current, registry)
        if registry.is_expired(now):
            raise VerificationError(
                f"registry version {registry.version} expired at {registry.expires}: refused; "
                "sign it again with a later expiry"
            )
        return registry, data

    def submit_registry(self, envelope: Any, now: datetime | None = None) -> Registry:
        """Put a signed registry in force: m distinct federation keys of the root in force signed
        it, its version is above the current one, and it has not expired. Anything else is refused
        and the registry in force stays."""
        now = now or utc_now()
        env = _envelope(envelope)
        with self._locked():
            current = self._load()
            if current.root is None:
                raise NotFoundError("this gateway has no federation yet: run `hansa gateway federation init`")
            registry, data = verify_registry(env, current.root)
            if current.registry is not None and registry.version == current.registry.version:
                if data == current.registry_bytes:
                    return current.registry  # the same document again: nothing to do
                raise ConflictError(
                    f"registry version {registry.version} is already in force with different content: "
                    "refused; sign the change as a new version"
                )
            if current.root.is_expired(now):
                raise expiry_error("root", current.root.expires)
            registry, data = self._verify_new_registry(env, current.root, current.registry, now)
            new = replace(current, registry=registry, registry_bytes=data,
                          publications=_floors_after(current, registry))
            self._commit(current, registry_envelope=env, new=new)
        log.info("registry.accepted", version=registry.version, sites=len(registry.sites))
        self.refresh()
        return registry

    def submit_root(self, root_envelope: Any, registry_envelope: Any = None, now: datetime | None = None) -> Root:
        """Rotate the federation keys: the new root is signed by a threshold of the old keys and a
        threshold of the new ones. The registry in force must verify under the new root, or a
        registry signed by the new keys comes with it; both are checked before either is stored."""
        now = now or utc_now()
        root_env = _envelope(root_envelope)
        reg_env = _envelope(registry_envelope) if registry_envelope is not None else None
        with self._locked():
            current = self._load()
            if current.root is None:
                raise NotFoundError("this gateway has no federation yet: run `hansa gateway federation init`")
            root, root_bytes = verify_root(root_env, current.root)
            if root.is_expired(now):
                raise expiry_error("root", root.expires)
            if reg_env is None:
                if current.registry is None:
                    raise InputError("no registry in force: submit one signed by the new root's keys")
                registry, registry_bytes = verify_registry(self._read_pinned("registry", self._pin_of("registry")), root)
            else:
                registry, registry_bytes = self._verify_new_registry(reg_env, root, current.registry, now)
            new = TrustedState(root, root_bytes, registry, registry_bytes,
                               _floors_after(current, registry) if reg_env is not None else current.publications)
            self._commit(current, root_envelope=root_env, registry_envelope=reg_env, new=new)
        log.info("registry.root_rotated", version=root.version, keys=len(root.keys), threshold=root.threshold)
        self.refresh()
        return root

    # -- the local (trial, demo) flow: federation keys kept on this machine ---------------------
    def init_federation(
        self, threshold: int, count: int, gateway_url: str | None = None, now: datetime | None = None,
        registry_ttl: timedelta = REGISTRY_TTL,
    ) -> list[SiteIdentity]:
        """Create `count` federation keys under `keys_dir` and the federation's first root and
        registry, signed by all of them. Returns the keys (print their keyids)."""
        now = now or utc_now()
        if self.refresh().root is not None:
            raise ConflictError("this gateway already has a federation; `hansa gateway sites` shows it")
        if not isinstance(threshold, int) or isinstance(threshold, bool) or not 1 <= threshold <= count:
            raise InputError(f"threshold must be between 1 and the number of keys ({count})")
        url = validate_site_url(gateway_url) if gateway_url is not None else None
        identities = admin.create_keys(self.keys_dir, count)
        root_env, reg_env = admin.genesis(identities, threshold, now, url, registry_ttl=registry_ttl)
        self.initialize(root_env, reg_env, now)
        return identities

    def _signers(self, keys: Sequence[SiteIdentity] | None, need_threshold: bool = True) -> list[SiteIdentity]:
        """`keys`, or every federation key kept on this machine, if they carry the authority."""
        state = self.refresh()
        if state.root is None:
            raise NotFoundError("this gateway has no federation yet: run `hansa gateway federation init`")
        given = list(keys) if keys is not None else admin.local_keys(self.keys_dir)
        return admin.authorized(state.root, given, need_threshold)

    def draft(
        self, change: admin.Change, keys: Sequence[SiteIdentity] | None = None, now: datetime | None = None,
        need_threshold: bool = True,
    ) -> dict[str, Any]:
        """The next registry built by `change` from the one in force, signed by `keys` (default:
        the local federation keys). Drafts for other admins to countersign skip the threshold."""
        now = now or utc_now()
        signers = self._signers(keys, need_threshold)
        current = self.refresh().registry
        if current is None:
            raise NotFoundError("this gateway has no registry yet: run `hansa gateway federation init`")
        return admin.sign_registry(change(current, now), signers)

    def change(
        self, change: admin.Change, keys: Sequence[SiteIdentity] | None = None, now: datetime | None = None
    ) -> Registry:
        """Draft, sign and submit: the one path every registry change takes."""
        now = now or utc_now()
        return self.submit_registry(self.draft(change, keys, now), now)

    def enroll(
        self, site_id: str, url: str, public_keys: Sequence[str], now: datetime | None = None,
        keys: Sequence[SiteIdentity] | None = None,
    ) -> SiteRecord:
        """Admit a site in one step (create + approve with local federation keys): trials and demos.
        A gateway without any federation first gets a local 1-of-1 one, and says so in its log.
        A real site sends a join request instead (`hansa site join-request`)."""
        validate_site_id(site_id)
        url = validate_site_url(url)
        if keys is None and self.refresh().root is None:
            log.warning("registry.local_federation", keys_dir=str(self.keys_dir),
                        note="created a 1-of-1 federation key on this machine: fine for a trial, not for production")
            self.init_federation(1, 1)
        self.change(admin.enrolment(site_id, url, public_keys), keys, now)
        log.info("registry.enrolled", site_id=site_id, url=url)
        return self.get(site_id)

    def revoke(self, site_id: str, keys: Sequence[SiteIdentity] | None = None, now: datetime | None = None) -> SiteRecord:
        """Untrust everything from a site at once: it drops out of routing and publishing now, and
        the gateway drops its summaries from the index (listeners; and at every start)."""
        validate_site_id(site_id)
        self.change(admin.revocation(site_id), keys, now)
        log.info("registry.revoked", site_id=site_id)
        return self.get(site_id)
