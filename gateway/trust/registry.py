"""The federation registry in force at this gateway, and each site's publication floor, on disk.

What the gateway trusts is decided by two signed documents (gateway.trust.documents): the federation *root*
(m-of-n federation keys) and the *registry* of sites it signed. Whether a new document, or a new
publication, may be accepted is decided by gateway.trust.state, a pure state machine; this store
only keeps what it accepted, so that a CLI in one process and a running gateway in another share
one trusted state and never lose each other's updates. It lives under the directory of `path`
(`<home>/gateway/registry.json` by default):

    registry.json           the registry envelope in force: a copy for operators and sites
    registry.history/       every accepted root and registry envelope, one file per version
    registry.state.json     the commit point: version + sha256 of the root and registry in
                            force, and every site's publication floor
    federation-keys/        federation private keys kept on this machine (trials and demos);
                            only gateway.trust.admin reads or writes them

A change (`initialize`, `submit_registry`, `submit_root`, `record_publication`) reloads and
re-verifies the state under a thread lock and an advisory `flock`, asks the state machine for the
next state at the store's clock, writes the history file, and then replaces the state file
atomically (temp + fsync + os.replace + directory fsync).

Every read re-verifies what the state file pins, whenever that file changed (a stat per call):
a change made by `hansa gateway ...` takes effect on a running gateway at its next request, and a
site that lost trust (revoked, or all its keys replaced) is reported to the `on_untrusted`
listeners at once, which drop its summaries from the index. If what is on disk no longer verifies
(a tampered or rolled-back file) a running gateway keeps the registry it had and logs the refusal;
a starting gateway refuses to start rather than trust it.

The clock is injected (`clock=`, the real UTC clock by default) and is the one every time-dependent
decision of the store uses, so tests move time by handing in their own clock.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Callable, ClassVar, ContextManager, Literal, Mapping

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import Field, StrictStr

from hansa.core.files import file_signature, locked, write_bytes_atomic
from hansa.core.errors import HansaError, InputError, VerificationError
from hansa.core.jsonsafe import dumps, loads_strict
from hansa.core.logs import get_logger
from hansa.core.model import FORBID, Wire
from hansa.gateway.trust.documents import ACTIVE, REVOKED, Registry, Root, sha256_hex
from hansa.gateway.trust.state import Publication, SiteRecord, TrustedState, envelope_of
from hansa.sync.membership import validate_site_url
from hansa.sync.wire import Positive, SiteId

__all__ = ["ACTIVE", "KEYS_DIRNAME", "REVOKED", "Clock", "SiteRecord", "SiteRegistry", "utc_now",
           "validate_site_url"]

log = get_logger(__name__)

FORMAT_VERSION = 2
KEYS_DIRNAME = "federation-keys"

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The real clock: a store's default."""
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class Pin(Wire):
    """Which version of a signed document is in force, and the sha256 of its history file's bytes."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "pin"

    version: Positive
    sha256: Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]


@dataclass(frozen=True)
class StoredState(Wire):
    """The state file, the store's commit point: the root and registry pinned, every floor.
    Every key is written (a pin as null before the federation exists)."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "registry state"

    format: Literal[2]  # FORMAT_VERSION
    root: Pin | None
    registry: Pin | None
    publications: dict[SiteId, Publication]


class SiteRegistry:
    def __init__(self, path: Path, keys_dir: Path | None = None, clock: Clock = utc_now) -> None:
        self.path = Path(path)
        stem = self.path.stem
        self.state_path = self.path.with_name(f"{stem}.state.json")
        self.history_dir = self.path.with_name(f"{stem}.history")
        self.keys_dir = Path(keys_dir) if keys_dir is not None else self.path.parent / KEYS_DIRNAME
        self.clock = clock
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

    def _read_pinned(self, kind: str, pin: Pin) -> Mapping[str, Any]:
        path = self._history_file(kind, pin.version)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise VerificationError(f"{kind} version {pin.version} in force is missing ({path}): {exc}") from exc
        if sha256_hex(data) != pin.sha256:
            raise VerificationError(
                f"{path} is not the {kind} version {pin.version} this gateway accepted "
                "(its bytes changed): restore it from a backup or have the admins sign a new version"
            )
        return envelope_of(data)

    def _stored(self) -> StoredState:
        obj = loads_strict(self.state_path.read_bytes())
        if not isinstance(obj, Mapping) or obj.get("format") != FORMAT_VERSION:
            raise InputError(f"{self.state_path}: not a hansa registry state (format {FORMAT_VERSION})")
        return StoredState.from_json(obj, str(self.state_path))

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
        stored = self._stored()
        if stored.registry is not None and stored.root is None:
            raise InputError(f"{self.state_path}: a registry without a root")
        pins = {"root": stored.root, "registry": stored.registry}
        envelopes = {kind: self._read_pinned(kind, pin) if pin is not None else None for kind, pin in pins.items()}
        state = TrustedState.stored(envelopes["root"], envelopes["registry"])
        for kind, meta in (("root", state.root), ("registry", state.registry)):
            pin = pins[kind]
            if meta is not None and pin is not None and meta.version != pin.version:
                raise VerificationError(f"{self.state_path}: the stored {kind} is not version {pin.version}")
        return replace(state, publications=stored.publications)

    def _commit(self, current: TrustedState, new: TrustedState) -> None:
        """History files first, then the state file (the commit point), then the operator copy.
        A root or registry is written when its version changed; otherwise its pin stays."""
        pins: dict[str, Pin | None] = {}
        stored = self._stored() if current.root is not None else None
        for kind, env, meta, old in (
            ("root", new.root_envelope, new.root, current.root),
            ("registry", new.registry_envelope, new.registry, current.registry),
        ):
            if meta is not None and env is not None and (old is None or old.version != meta.version):
                data = dumps(dict(env))
                write_bytes_atomic(self._history_file(kind, meta.version), data)
                pins[kind] = Pin(meta.version, sha256_hex(data))
            elif old is not None and stored is not None:
                pins[kind] = getattr(stored, kind)
            else:
                pins[kind] = None
        state = StoredState(FORMAT_VERSION, pins["root"], pins["registry"], dict(sorted(new.publications.items())))
        write_bytes_atomic(self.state_path, dumps(state.to_json()))
        if new.registry is not None and (current.registry is None or current.registry.version != new.registry.version):
            write_bytes_atomic(self.path, dumps(dict(new.registry_envelope or {})))
        for site_id in sorted(set(current.publications) - set(new.publications)):
            entry = new.registry.get(site_id) if new.registry else None
            log.info("registry.floor_reset", site_id=site_id, keys_version=entry.keys_version if entry else None)

    def _transition(self, step: Callable[[TrustedState], TrustedState]) -> tuple[TrustedState, TrustedState]:
        """Reload under the lock, take `step` from what is in force, and commit what it returns
        (nothing when it returns the state unchanged). Returns (what was in force, what is now)."""
        with self._locked():
            current = self._load()
            new = step(current)
            if new is not current:
                self._commit(current, new)
        return current, new

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
                    lost = self._cache.untrusted_by(state) if self._cache else []
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
        return self.refresh().site(site_id)

    def list(self) -> list[SiteRecord]:
        return self.refresh().records()

    def keys_for(self, site_id: str) -> list[Ed25519PublicKey]:
        """The keys a publication from `site_id` must verify under; refuses (VerificationError)
        for unknown or revoked sites and while the registry or root is expired."""
        return self.refresh().keys_for(site_id, self.clock())

    def last_sequence(self, site_id: str) -> int | None:
        """The publication floor: a new publication's sequence must be above it (None: no floor)."""
        return self.refresh().last_sequence(site_id)

    def check_sequence(self, site_id: str, sequence: int, summary_count: int | None = None) -> None:
        """Refuse a replay, rollback or over-policy publication before anything is stored
        (record_publication re-checks the sequence under the lock)."""
        self.refresh().check_sequence(site_id, sequence, summary_count, self.clock())

    def record_publication(
        self, site_id: str, sequence: int, expires: str, count: int, now: datetime | None = None
    ) -> SiteRecord:
        """Raise the floor to `sequence`; refuses (ConflictError) anything not strictly above it."""
        at = now or self.clock()
        _, new = self._transition(lambda current: current.with_publication(site_id, sequence, expires, count, at))
        return new.site(site_id)

    # -- registry changes (each one verified against what is in force) --------------------------
    def initialize(self, root_envelope: Any, registry_envelope: Any, now: datetime | None = None) -> Registry:
        """Take a federation's first root (version 1) and registry; refused once a root exists."""
        at = now or self.clock()
        _, new = self._transition(lambda current: current.initialized(root_envelope, registry_envelope, at))
        assert new.root is not None and new.registry is not None
        log.info("registry.initialized", keys=len(new.root.keys), threshold=new.root.threshold)
        self.refresh()
        return new.registry

    def submit_registry(self, envelope: Any, now: datetime | None = None) -> Registry:
        """Put a signed registry in force: m distinct federation keys of the root in force signed
        it, its version is above the current one, and it has not expired. Anything else is refused
        and the registry in force stays."""
        at = now or self.clock()
        old, new = self._transition(lambda current: current.with_registry(envelope, at))
        assert new.registry is not None
        if new is old:
            return new.registry  # the same document again: nothing to do
        log.info("registry.accepted", version=new.registry.version, sites=len(new.registry.sites))
        self.refresh()
        return new.registry

    def submit_root(self, root_envelope: Any, registry_envelope: Any = None, now: datetime | None = None) -> Root:
        """Rotate the federation keys: the new root is signed by a threshold of the old keys and a
        threshold of the new ones. The registry in force must verify under the new root, or a
        registry signed by the new keys comes with it; both are checked before either is stored."""
        at = now or self.clock()
        _, new = self._transition(lambda current: current.with_root(root_envelope, registry_envelope, at))
        assert new.root is not None
        log.info("registry.root_rotated", version=new.root.version, keys=len(new.root.keys), threshold=new.root.threshold)
        self.refresh()
        return new.root
