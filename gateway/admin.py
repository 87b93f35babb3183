"""Federation authority: the federation's signing keys, and the signed documents they produce.

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

from hansa.core.errors import InputError, VerificationError
from hansa.gateway.trust import REGISTRY_TTL, REGISTRY_TYPE, ROOT_TTL, ROOT_TYPE, Registry, Root, SitePolicy
from hansa.sync.keys import PRIVATE_KEY_FILE, SiteIdentity
from hansa.sync.dsse import sign_all
from hansa.sync.membership import MAX_KEYS_PER_SITE, open_join_request, open_key_rotation
from hansa.sync.wire import format_utc

KEYS_DIRNAME = "federation-keys"
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
