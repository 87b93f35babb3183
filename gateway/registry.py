"""The federation's enrolled sites, persisted as one small JSON file.

Why a file and not the summary index: the registry is the authority the gateway checks before it
trusts anything (keys, URL, the replay floor), so it must survive restarts exactly, be readable by
an operator, and never be half-written. Every change is read-modify-write under a lock (a thread
lock plus an advisory `flock` on a sibling lock file, so `hansa gateway enroll` in one process and
a running gateway in another never lose each other's updates) and lands with an atomic replace
(temp file + fsync + `os.replace` + directory fsync). Reads go to the file each time: an enrolment
or revocation made by the CLI takes effect on a running gateway at its next request.

This class is deliberately small: a later issue wraps it in a signed, threshold-governed registry.
"""
from __future__ import annotations

import fcntl
import os
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Sequence
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from hansa.core.errors import ConflictError, InputError, NotFoundError, VerificationError
from hansa.core.jsonsafe import dumps, loads_strict
from hansa.core.logs import get_logger
from hansa.sync.keys import load_public_key
from hansa.sync.wire import format_utc, parse_utc, validate_site_id

log = get_logger(__name__)

ACTIVE = "active"
REVOKED = "revoked"
FORMAT_VERSION = 1
MAX_KEYS_PER_SITE = 16
MAX_URL_CHARS = 2048


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def validate_site_url(url: object) -> str:
    """The base URL the gateway calls: http(s), a host, no credentials, query or fragment.

    Returned without a trailing slash so `f"{url}/v1/retrieve"` is the one way to build a call.
    Address checks (private ranges, metadata endpoints) happen at call time, after resolution."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_CHARS:
        raise InputError(f"site URL must be a non-empty string of at most {MAX_URL_CHARS} characters")
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        raise InputError(f"site URL {url!r} contains whitespace or control characters")
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
    try:
        parts.port  # noqa: B018 - raises ValueError on a malformed or out-of-range port
    except ValueError as exc:
        raise InputError(f"site URL {url!r}: invalid port") from exc
    return f"{parts.scheme}://{parts.netloc}{parts.path}".rstrip("/")


def _validate_keys(public_keys: Sequence[str]) -> tuple[str, ...]:
    if isinstance(public_keys, str):
        public_keys = [public_keys]
    keys: list[str] = []
    for k in public_keys:
        if not isinstance(k, str):
            raise InputError("public keys must be base64 strings")
        k = k.strip()
        try:
            load_public_key(k)
        except VerificationError as exc:  # at enrolment a bad key is bad input, not a forgery
            raise InputError(str(exc)) from exc
        if k not in keys:
            keys.append(k)
    if not keys:
        raise InputError("enrol a site with at least one Ed25519 public key (base64)")
    if len(keys) > MAX_KEYS_PER_SITE:
        raise InputError(f"at most {MAX_KEYS_PER_SITE} public keys per site")
    return tuple(keys)


@dataclass(frozen=True)
class SiteRecord:
    """One enrolled site; `last_sequence` is the replay/rollback floor (None: never published)."""

    site_id: str
    url: str
    public_keys: tuple[str, ...]
    enrolled_at: str
    status: str = ACTIVE
    last_sequence: int | None = None
    expires: str | None = None  # of the current publication
    summary_count: int = 0
    published_at: str | None = None

    def is_expired(self, now: datetime | None = None) -> bool:
        """No publication yet counts as expired: there is nothing current to route on."""
        if self.expires is None:
            return True
        return parse_utc(self.expires, "expires") <= (now or utc_now())

    def is_routable(self, now: datetime | None = None) -> bool:
        return self.status == ACTIVE and not self.is_expired(now)

    def to_json(self) -> dict[str, Any]:
        return {
            "site_id": self.site_id,
            "url": self.url,
            "public_keys": list(self.public_keys),
            "enrolled_at": self.enrolled_at,
            "status": self.status,
            "last_sequence": self.last_sequence,
            "expires": self.expires,
            "summary_count": self.summary_count,
            "published_at": self.published_at,
        }

    def view(self, now: datetime | None = None) -> dict[str, Any]:
        """What operators see (API and CLI): the stored record plus its state at `now`."""
        now = now or utc_now()
        return {**self.to_json(), "expired": self.is_expired(now), "routable": self.is_routable(now)}

    @classmethod
    def from_json(cls, obj: Any, where: str) -> "SiteRecord":
        """Re-validates what it reads: a hand-edited registry must not smuggle in a bad URL or id."""
        if not isinstance(obj, dict):
            raise InputError(f"{where}: a site entry must be an object")
        try:
            status = obj["status"]
            if status not in (ACTIVE, REVOKED):
                raise InputError(f"{where}: status must be {ACTIVE!r} or {REVOKED!r}")
            seq = obj.get("last_sequence")
            if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool) or seq < 0):
                raise InputError(f"{where}: last_sequence must be a non-negative integer or null")
            count = obj.get("summary_count", 0)
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise InputError(f"{where}: summary_count must be a non-negative integer")
            expires = obj.get("expires")
            if expires is not None:
                parse_utc(expires, f"{where}: expires")
            return cls(
                site_id=validate_site_id(obj["site_id"]),
                url=validate_site_url(obj["url"]),
                public_keys=_validate_keys(obj["public_keys"]),
                enrolled_at=format_utc(parse_utc(obj["enrolled_at"], f"{where}: enrolled_at")),
                status=status,
                last_sequence=seq,
                expires=expires,
                summary_count=count,
                published_at=(
                    None if obj.get("published_at") is None
                    else format_utc(parse_utc(obj["published_at"], f"{where}: published_at"))
                ),
            )
        except KeyError as exc:
            raise InputError(f"{where}: missing {exc.args[0]!r}") from exc


class SiteRegistry:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock_path = self.path.with_name(self.path.name + ".lock")
        self._thread_lock = threading.RLock()

    # -- storage --------------------------------------------------------------------------------
    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._thread_lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self._lock_path, "a+b") as lock_file:
                fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(lock_file.fileno(), fcntl.LOCK_UN)

    def _load(self) -> dict[str, SiteRecord]:
        if not self.path.exists():
            return {}
        data = loads_strict(self.path.read_bytes())
        if not isinstance(data, dict) or data.get("format") != FORMAT_VERSION or not isinstance(data.get("sites"), list):
            raise InputError(f"{self.path}: not a hansa site registry (format {FORMAT_VERSION})")
        sites: dict[str, SiteRecord] = {}
        for i, entry in enumerate(data["sites"]):
            rec = SiteRecord.from_json(entry, f"{self.path} site #{i}")
            if rec.site_id in sites:
                raise InputError(f"{self.path}: site {rec.site_id!r} appears twice")
            sites[rec.site_id] = rec
        return sites

    def _save(self, sites: dict[str, SiteRecord]) -> None:
        body = dumps({"format": FORMAT_VERSION, "sites": [sites[k].to_json() for k in sorted(sites)]})
        fd, tmp = tempfile.mkstemp(prefix=self.path.name + ".", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(body)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def _read(self) -> dict[str, SiteRecord]:
        with self._locked():
            return self._load()

    @staticmethod
    def _require(sites: dict[str, SiteRecord], site_id: str) -> SiteRecord:
        validate_site_id(site_id)
        if site_id not in sites:
            raise NotFoundError(f"site {site_id!r} is not enrolled; enrol it with `hansa gateway enroll`")
        return sites[site_id]

    # -- queries --------------------------------------------------------------------------------
    def get(self, site_id: str) -> SiteRecord:
        return self._require(self._read(), site_id)

    def list(self) -> list[SiteRecord]:
        return [rec for _, rec in sorted(self._read().items())]

    def keys_for(self, site_id: str) -> list[Ed25519PublicKey]:
        """The keys a publication from `site_id` must verify under; unknown or revoked sites have
        none, so this refuses (VerificationError) rather than return an empty list to misuse."""
        sites = self._read()
        validate_site_id(site_id)
        rec = sites.get(site_id)
        if rec is None:
            raise VerificationError(f"site {site_id!r} is not enrolled: nothing from it is accepted")
        if rec.status != ACTIVE:
            raise VerificationError(f"site {site_id!r} is revoked: nothing from it is accepted")
        return [load_public_key(k) for k in rec.public_keys]

    def check_sequence(self, site_id: str, sequence: int) -> None:
        """Refuse a replay or rollback before anything is stored (record_publication re-checks)."""
        self._check_sequence(self._require(self._read(), site_id), sequence)

    @staticmethod
    def _check_sequence(rec: SiteRecord, sequence: int) -> None:
        if not isinstance(sequence, int) or isinstance(sequence, bool) or sequence < 0:
            raise InputError(f"publication sequence must be a non-negative integer, got {sequence!r}")
        if rec.last_sequence is not None and sequence <= rec.last_sequence:
            raise ConflictError(
                f"site {rec.site_id!r}: publication sequence {sequence} is not above the last accepted "
                f"{rec.last_sequence} (replay or rollback refused); publish with a higher sequence"
            )

    # -- changes --------------------------------------------------------------------------------
    def enroll(self, site_id: str, url: str, public_keys: Sequence[str], now: datetime | None = None) -> SiteRecord:
        """Add a site, or re-activate a revoked one with new keys/URL.

        Re-enrolment keeps the sequence floor: publications accepted before the revocation can
        never be replayed. (Resetting the floor after a key compromise belongs to key rotation.)"""
        validate_site_id(site_id)
        url = validate_site_url(url)
        keys = _validate_keys(public_keys)
        with self._locked():
            sites = self._load()
            old = sites.get(site_id)
            if old is not None and old.status == ACTIVE:
                raise ConflictError(f"site {site_id!r} is already enrolled; revoke it first to change its keys or URL")
            rec = SiteRecord(
                site_id=site_id,
                url=url,
                public_keys=keys,
                enrolled_at=format_utc(now or utc_now()),
                last_sequence=old.last_sequence if old else None,
            )
            sites[site_id] = rec
            self._save(sites)
        log.info("registry.enrolled", site_id=site_id, url=url, keys=len(keys))
        return rec

    def revoke(self, site_id: str) -> SiteRecord:
        """Untrust everything from a site at once: it drops out of routing and publishing now; its
        summaries are removed from the index by the gateway (immediately or at its next start)."""
        with self._locked():
            sites = self._load()
            rec = replace(self._require(sites, site_id), status=REVOKED, expires=None, summary_count=0)
            sites[site_id] = rec
            self._save(sites)
        log.info("registry.revoked", site_id=site_id)
        return rec

    def record_publication(
        self, site_id: str, sequence: int, expires: str, count: int, now: datetime | None = None
    ) -> SiteRecord:
        """Raise the floor to `sequence`; refuses (ConflictError) anything not strictly above it."""
        parse_utc(expires, "expires")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise InputError(f"summary count must be a non-negative integer, got {count!r}")
        with self._locked():
            sites = self._load()
            rec = self._require(sites, site_id)
            if rec.status != ACTIVE:
                raise VerificationError(f"site {site_id!r} is revoked: its publication is not recorded")
            self._check_sequence(rec, sequence)
            rec = replace(
                rec,
                last_sequence=sequence,
                expires=expires,
                summary_count=count,
                published_at=format_utc(now or utc_now()),
            )
            sites[site_id] = rec
            self._save(sites)
        return rec
