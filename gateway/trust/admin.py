"""Federation authority: the federation's signing keys, and the signed documents they produce.

This is the only module that holds federation private keys, so it is kept apart from everything
that serves requests: the command line (and the in-process trial federation, hansa.federation)
imports it; no other module of the gateway does (tests/test_import_walls.py holds that wall). The
store it works through (gateway.trust.registry) and the state machine behind it only verify.

`hansa gateway federation init` creates all n keys on one machine, which suits a trial or a demo.
In production each key belongs to a different admin and lives on that admin's machine (or a
hardware token): a registry change is drafted once (`--out DRAFT`), countersigned by each admin
(`hansa gateway federation sign DRAFT --key ...`) and submitted when m of them have signed. The
gateway never needs a federation private key to run; it only verifies.

Keys are stored as `<keys_dir>/<keyid>/site-ed25519.pem` (0600, in 0700 folders) through
`SiteIdentity.save`, the one place that writes private keys; a key file others can read is refused.
"""
from __future__ import annotations

import os
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Sequence

from hansa.core.errors import ConflictError, InputError, NotFoundError, VerificationError
from hansa.core.logs import get_logger
from hansa.gateway.trust.registry import KEYS_DIRNAME, SiteRecord, SiteRegistry
from hansa.gateway.trust.documents import REGISTRY_TTL, REGISTRY_TYPE, ROOT_TTL, ROOT_TYPE, Registry, Root, SitePolicy
from hansa.sync.keys import PRIVATE_KEY_FILE, SiteIdentity
from hansa.sync.dsse import sign_all
from hansa.sync.membership import MAX_KEYS_PER_SITE, open_join_request, open_key_rotation, validate_site_url
from hansa.sync.wire import format_utc, validate_site_id

__all__ = ["KEYS_DIRNAME", "Change", "admission", "authorized", "change", "create_keys", "draft", "enroll",
           "enrolment", "genesis", "init_federation", "load_key", "local_keys", "renewal", "revocation",
           "revoke", "rotate_root", "rotation", "sign_registry", "sign_root"]

log = get_logger(__name__)
KEYID_RE = re.compile(r"^[0-9a-f]{32}$")
MAX_FEDERATION_KEYS = MAX_KEYS_PER_SITE  # old and new root keys both sign a rotation: 2n <= 16


def create_keys(keys_dir: Path, count: int) -> list[SiteIdentity]:
    """`count` new federation keys, each in its own 0700 folder named by its keyid."""
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_FEDERATION_KEYS:
        raise InputError(f"a federation has 1 to {MAX_FEDERATION_KEYS} keys")
    keys_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(keys_dir, 0o700)
    identities = []
    for _ in range(count):
        identity = SiteIdentity.generate()
        identity.save(keys_dir / identity.keyid)
        identities.append(identity)
    return identities


def load_key(ref: str, keys_dir: Path) -> SiteIdentity:
    """A federation key by keyid (under `keys_dir`) or by the path of its folder or PEM file."""
    ref = ref.strip()
    if KEYID_RE.fullmatch(ref):
        folder = keys_dir / ref
    else:
        path = Path(ref).expanduser()
        folder = path.parent if path.name == PRIVATE_KEY_FILE else path
    if not (folder / PRIVATE_KEY_FILE).is_file():
        raise InputError(
            f"no federation key {ref!r}: give a keyid printed by `hansa gateway federation init` "
            f"(looked in {keys_dir}) or the folder holding the key's {PRIVATE_KEY_FILE}"
        )
    return SiteIdentity.load(folder)


def local_keys(keys_dir: Path) -> list[SiteIdentity]:
    """Every federation key kept on this machine (the demo/local flow signs with these)."""
    if not keys_dir.is_dir():
        return []
    return [SiteIdentity.load(d) for d in sorted(keys_dir.iterdir()) if (d / PRIVATE_KEY_FILE).is_file()]


def authorized(root: Root, identities: Sequence[SiteIdentity], need_threshold: bool = True) -> list[SiteIdentity]:
    """The given keys, once each, if all are federation keys of `root` (and, unless drafting, at
    least its threshold). A site key or a stray key is refused outright rather than ignored, so an
    admin learns at once that it carries no authority."""
    strangers = [i.keyid for i in identities if i.public_key_b64 not in root.keys]
    if strangers:
        raise VerificationError(
            f"key(s) {', '.join(strangers)} are not federation keys (root version {root.version}): "
            "they cannot sign registry changes"
        )
    distinct = list({i.keyid: i for i in identities}.values())
    if not distinct or (need_threshold and len(distinct) < root.threshold):
        raise VerificationError(
            f"{len(distinct)} distinct federation key(s) given but {root.threshold} of {len(root.keys)} "
            "must sign a registry change: add --key for more admins, or draft with --out and collect "
            "signatures with `hansa gateway federation sign`"
        )
    return distinct


def sign_registry(registry: Registry, signers: Sequence[SiteIdentity]) -> dict[str, Any]:
    return sign_all(REGISTRY_TYPE, registry.to_bytes(), signers)


def sign_root(root: Root, signers: Sequence[SiteIdentity]) -> dict[str, Any]:
    return sign_all(ROOT_TYPE, root.to_bytes(), signers)


def genesis(
    identities: Sequence[SiteIdentity], threshold: int, now: datetime, gateway_url: str | None = None,
    root_ttl: timedelta = ROOT_TTL, registry_ttl: timedelta = REGISTRY_TTL,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Root version 1 and an empty registry version 1, each signed by every key."""
    root = Root(1, format_utc(now + root_ttl), tuple(i.public_key_b64 for i in identities), threshold)
    registry = Registry(1, format_utc(now + registry_ttl), (), gateway_url)
    return sign_root(root, identities), sign_registry(registry, identities)


def rotate_root(
    current: Root, registry: Registry, old_signers: Sequence[SiteIdentity], new_keys: Sequence[SiteIdentity],
    threshold: int, now: datetime, root_ttl: timedelta = ROOT_TTL, registry_ttl: timedelta = REGISTRY_TTL,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The next root, signed by the old and the new keys, and the registry re-signed by the new ones
    (a registry is only valid under the root in force)."""
    old = authorized(current, old_signers)
    root = current.successor([i.public_key_b64 for i in new_keys], threshold, now, root_ttl)
    return sign_root(root, [*old, *new_keys]), sign_registry(registry.renew(now, registry_ttl), new_keys)


# -- registry changes: each builds the next registry from the one in force ----------------------
Change = Callable[[Registry, datetime], Registry]


def admission(request_envelope: Any, policy: SitePolicy | None = None, ttl: timedelta = REGISTRY_TTL) -> Change:
    """Admit the site of a verified, fresh join request addressed to this federation."""

    def make(registry: Registry, now: datetime) -> Registry:
        request = open_join_request(request_envelope, now)
        if registry.gateway_url is not None and request.gateway_url != registry.gateway_url:
            raise VerificationError(
                f"the join request from {request.site_id!r} is addressed to {request.gateway_url}, "
                f"not to this federation's gateway {registry.gateway_url}"
            )
        return registry.admit(request.site_id, request.url, request.public_keys, now, ttl, policy)

    return make


def enrolment(site_id: str, url: str, public_keys: Sequence[str], ttl: timedelta = REGISTRY_TTL) -> Change:
    """Admit a site from its public keys alone (trials and demos; a real site sends a join request)."""
    return lambda registry, now: registry.admit(site_id, url, public_keys, now, ttl)


def rotation(site_id: str, rotation_envelope: Any, ttl: timedelta = REGISTRY_TTL) -> Change:
    """Replace `site_id`'s keys by those of a rotation signed by a current key and every new key."""

    def make(registry: Registry, now: datetime) -> Registry:
        entry = registry.require(site_id)
        if not entry.active:
            raise VerificationError(f"site {site_id!r} is revoked: re-admit it with a join request instead")
        rotated = open_key_rotation(rotation_envelope, site_id, entry.public_keys, now)
        return registry.rotate(site_id, rotated.public_keys, now, ttl)

    return make


def revocation(site_id: str, ttl: timedelta = REGISTRY_TTL) -> Change:
    return lambda registry, now: registry.revoke(site_id, now, ttl)


def renewal(ttl: timedelta = REGISTRY_TTL) -> Change:
    return lambda registry, now: registry.renew(now, ttl)


# -- the operations that sign, through a store (the command line; trials and demos) -------------
def init_federation(
    store: SiteRegistry, threshold: int, count: int, gateway_url: str | None = None, now: datetime | None = None,
    registry_ttl: timedelta = REGISTRY_TTL,
) -> list[SiteIdentity]:
    """Create `count` federation keys under the store's `keys_dir` and the federation's first root
    and registry, signed by all of them. Returns the keys (print their keyids)."""
    now = now or store.clock()
    if store.refresh().root is not None:
        raise ConflictError("this gateway already has a federation; `hansa gateway sites` shows it")
    if not isinstance(threshold, int) or isinstance(threshold, bool) or not 1 <= threshold <= count:
        raise InputError(f"threshold must be between 1 and the number of keys ({count})")
    url = validate_site_url(gateway_url) if gateway_url is not None else None
    identities = create_keys(store.keys_dir, count)
    root_env, reg_env = genesis(identities, threshold, now, url, registry_ttl=registry_ttl)
    store.initialize(root_env, reg_env, now)
    return identities


def _signers(store: SiteRegistry, keys: Sequence[SiteIdentity] | None, need_threshold: bool) -> list[SiteIdentity]:
    """`keys`, or every federation key kept on this machine, if they carry the authority."""
    root = store.refresh().root
    if root is None:
        raise NotFoundError("this gateway has no federation yet: run `hansa gateway federation init`")
    given = list(keys) if keys is not None else local_keys(store.keys_dir)
    return authorized(root, given, need_threshold)


def draft(
    store: SiteRegistry, make: Change, keys: Sequence[SiteIdentity] | None = None, now: datetime | None = None,
    need_threshold: bool = True,
) -> dict[str, Any]:
    """The next registry built by `make` from the one in force, signed by `keys` (default: the
    local federation keys). Drafts for other admins to countersign skip the threshold."""
    now = now or store.clock()
    signers = _signers(store, keys, need_threshold)
    current = store.refresh().registry
    if current is None:
        raise NotFoundError("this gateway has no registry yet: run `hansa gateway federation init`")
    return sign_registry(make(current, now), signers)


def change(
    store: SiteRegistry, make: Change, keys: Sequence[SiteIdentity] | None = None, now: datetime | None = None
) -> Registry:
    """Draft, sign and submit: the one path every registry change takes."""
    now = now or store.clock()
    return store.submit_registry(draft(store, make, keys, now), now)


def enroll(
    store: SiteRegistry, site_id: str, url: str, public_keys: Sequence[str], now: datetime | None = None,
    keys: Sequence[SiteIdentity] | None = None,
) -> SiteRecord:
    """Admit a site in one step (create + approve with local federation keys): trials and demos.
    A gateway without any federation first gets a local 1-of-1 one, and says so in its log.
    A real site sends a join request instead (`hansa site join-request`)."""
    validate_site_id(site_id)
    url = validate_site_url(url)
    if keys is None and store.refresh().root is None:
        log.warning("registry.local_federation", keys_dir=str(store.keys_dir),
                    note="created a 1-of-1 federation key on this machine: fine for a trial, not for production")
        init_federation(store, 1, 1, now=now)
    change(store, enrolment(site_id, url, public_keys), keys, now)
    log.info("registry.enrolled", site_id=site_id, url=url)
    return store.get(site_id)


def revoke(
    store: SiteRegistry, site_id: str, keys: Sequence[SiteIdentity] | None = None, now: datetime | None = None
) -> SiteRecord:
    """Untrust everything from a site at once: it drops out of routing and publishing now, and
    the gateway drops its summaries from the index (listeners; and at every start)."""
    validate_site_id(site_id)
    change(store, revocation(site_id), keys, now)
    log.info("registry.revoked", site_id=site_id)
    return store.get(site_id)
