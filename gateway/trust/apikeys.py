"""API keys for query clients: who is asking, so the gateway can refuse strangers and meter fan-out.

Why this shape: a key is `hansa_<key_id>_<secret>`. The key id is public and only finds the record;
the secret (32 random bytes) is shown once, when the key is created, and the file keeps just a
per-key salt and sha256(salt + key). A slow password hash buys nothing for 256 random bits, while a
fast one keeps authentication cheap on every request. Comparison is constant-time. The file
(`<home>/gateway/api-keys.json`) is read on every request, like the registry, so a key revoked with
`hansa gateway api-key revoke` stops working on a running gateway at once; revoked keys stay on
record (403, not 401: the client learns to stop retrying, and the name is never reused).

A key may be limited to the origins it speaks for (`origins`: site ids). A query naming an
`origin` is asked at that site first (DGRAG's gate), so an origin is a claim about who the user is:
a key of one organization's front end must not claim another's. No `origins`: any origin.
"""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, ClassVar, ContextManager, Iterable, Sequence

from pydantic import AfterValidator, Field, StrictStr

from hansa.core.errors import BackendError, ConflictError, HansaError, InputError, NotFoundError, VerificationError
from hansa.core.jsonsafe import dumps, loads_strict
from hansa.core.logs import get_logger
from hansa.core.files import locked, write_bytes_atomic
from hansa.core.model import FORBID, Wire, omitted_when_none
from hansa.sync.wire import SiteId, format_utc, validate_site_id

log = get_logger(__name__)

API_KEYS_FILE = "api-keys.json"
FORMAT_VERSION = 1
KEY_PREFIX = "hansa_"
NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_KEY_RE = re.compile(r"hansa_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
MAX_AUTHORIZATION_CHARS = 256  # a real key is 66 characters; longer headers are not worth parsing


class Unauthenticated(HansaError):
    """No usable credential: the client must send `Authorization: Bearer <API key>`."""

    http_status = 401
    http_headers = {"WWW-Authenticate": 'Bearer realm="hansa"'}


def _distinct(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


Origins = Annotated[tuple[SiteId, ...], AfterValidator(_distinct)]


@dataclass(frozen=True)
class ApiKeyRecord(Wire):
    """One key of the key file. `origins` is absent, not null, when the key has no limit: files of
    keys from before origins existed stay as they were."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "API key record"
    JSON_REQUIRED: ClassVar[tuple[str, ...]] = ("revoked_at",)

    name: StrictStr
    key_id: Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{16}$")]
    salt: Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{32}$")]  # hex
    sha256: Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]  # hex of sha256(salt + key)
    created_at: StrictStr
    revoked_at: StrictStr | None = None
    # The origins this key may speak for; None (the key absent, a null is refused): any.
    origins: Annotated[Origins, omitted_when_none()] = None  # type: ignore[assignment]

    def view(self) -> dict[str, Any]:
        """What an operator may see: never the salt or hash."""
        return {"name": self.name, "key_id": self.key_id, "created_at": self.created_at,
                "revoked": self.revoked_at is not None, "revoked_at": self.revoked_at,
                "origins": list(self.origins) if self.origins is not None else None}

    def matches(self, key: str) -> bool:
        digest = hashlib.sha256(bytes.fromhex(self.salt) + key.encode("ascii")).hexdigest()
        return hmac.compare_digest(digest, self.sha256)



def _origins(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)):
        raise InputError(f"{where}: origins must be a list of site ids")
    try:
        return _distinct(validate_site_id(v) for v in value)
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from exc


def validate_key_name(name: object) -> str:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise InputError(f"invalid API key name {name!r}: use 1-64 lowercase letters, digits, '.', '_' or '-'")
    return name


class ApiKeyStore:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock_path = self.path.with_name(self.path.name + ".lock")
        self._thread_lock = threading.Lock()

    def _locked(self) -> ContextManager[None]:
        """Read-modify-write under a thread lock and an advisory file lock: two CLI invocations
        never lose each other's keys."""
        return locked(self._lock_path, self._thread_lock)

    def _load(self) -> dict[str, ApiKeyRecord]:
        if not self.path.exists():
            return {}
        data = loads_strict(self.path.read_bytes())
        if not isinstance(data, dict) or data.get("format") != FORMAT_VERSION or not isinstance(data.get("keys"), list):
            raise InputError(f"{self.path}: not a hansa API key file (format {FORMAT_VERSION})")
        out: dict[str, ApiKeyRecord] = {}
        for i, entry in enumerate(data["keys"]):
            rec = ApiKeyRecord.from_json(entry, f"{self.path} key #{i}")
            if rec.name in out:
                raise InputError(f"{self.path}: key name {rec.name!r} appears twice")
            out[rec.name] = rec
        return out

    def _save(self, keys: dict[str, ApiKeyRecord]) -> None:
        write_bytes_atomic(self.path, dumps({"format": FORMAT_VERSION,
                                             "keys": [keys[n].to_json() for n in sorted(keys)]}))

    def list(self) -> list[ApiKeyRecord]:
        return list(self._load().values())

    def create(self, name: str, origins: Sequence[str] | None = None) -> str:
        """A new key for `name` (limited to `origins` if given); the returned key is the only copy
        there will ever be."""
        validate_key_name(name)
        allowed = _origins(origins, "API key") if origins is not None else None
        key_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
        key = f"{KEY_PREFIX}{key_id}_{secret}"
        salt = secrets.token_bytes(16)
        with self._locked():
            keys = self._load()
            if name in keys:
                state = "revoked" if keys[name].revoked_at else "active"
                raise ConflictError(f"an API key named {name!r} already exists ({state}); choose another name")
            keys[name] = ApiKeyRecord(name, key_id, salt.hex(), hashlib.sha256(salt + key.encode("ascii")).hexdigest(),
                                      format_utc(datetime.now(timezone.utc)), origins=allowed)
            self._save(keys)
        return key

    def revoke(self, name: str) -> ApiKeyRecord:
        validate_key_name(name)
        with self._locked():
            keys = self._load()
            if name not in keys:
                raise NotFoundError(f"no API key named {name!r}; `hansa gateway api-key list` shows them")
            if keys[name].revoked_at is None:
                keys[name] = replace(keys[name], revoked_at=format_utc(datetime.now(timezone.utc)))
                self._save(keys)
            return keys[name]

    def authenticate(self, authorization: str | None) -> str:
        """The name behind an `Authorization: Bearer <key>` header; 401 unless a known key's secret
        matches, 403 if that key was revoked."""
        if not authorization:
            raise Unauthenticated("authentication required: send 'Authorization: Bearer <API key>' "
                                  "(an operator creates one with `hansa gateway api-key create NAME`)")
        scheme, _, key = authorization.strip().partition(" ")
        key = key.strip()
        if len(authorization) > MAX_AUTHORIZATION_CHARS or scheme.lower() != "bearer" or not key:
            raise Unauthenticated("malformed Authorization header: use 'Authorization: Bearer <API key>'")
        match = _KEY_RE.fullmatch(key)
        try:
            records = self._load()
        except InputError as exc:  # the operator's problem, not the client's: no path in the answer
            log.error("api_keys.unreadable", path=str(self.path), error=str(exc))
            raise BackendError("the gateway cannot read its API key file; the operator must repair it") from exc
        rec = next((r for r in records.values() if match and r.key_id == match.group(1)), None)
        if rec is None or not rec.matches(key):
            raise Unauthenticated("invalid API key")
        if rec.revoked_at is not None:
            raise VerificationError(f"API key {rec.name!r} was revoked at {rec.revoked_at}; ask the operator for a new one")
        return rec.name

    def allowed_origins(self, name: str) -> frozenset[str] | None:
        """The origins the key `name` may speak for (None: any). A name without a key is an
        in-process caller (e.g. `hansa eval`, which chose its own name): HTTP clients always have
        one, since the HTTP adapter authenticates before it asks."""
        rec = self._load().get(name)
        return frozenset(rec.origins) if rec is not None and rec.origins is not None else None


def open_api_keys(gateway_dir: Path) -> ApiKeyStore:
    """The key store of a gateway whose state lives in `gateway_dir` (`<home>/gateway`)."""
    return ApiKeyStore(Path(gateway_dir) / API_KEYS_FILE)
