"""Federation trust, attacked: thresholds (guarantee 3), key rotation (4), recovery (8), isolation
(9), revocation (10) and admin authority (14). Every refusal also checks that nothing the registry
stores changed, and that the registry in force is still the previous one."""
from __future__ import annotations

import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from hansa.core.errors import ConflictError, InputError, VerificationError
from hansa.gateway.trust import admin
from hansa.gateway.trust.registry import ACTIVE, REVOKED, SiteRegistry
from hansa.gateway.trust.documents import Registry, Root, SiteEntry, SitePolicy
from hansa.sync.dsse import sign_all
from hansa.sync.keys import SiteIdentity
from hansa.sync.membership import (
    JOIN_REQUEST_TYPE,
    KEY_ROTATION_TYPE,
    JoinRequest,
    KeyRotation,
    build_join_request,
    build_key_rotation,
    new_nonce,
)
from hansa.sync.wire import canonical_json, format_utc
from tests.clock import ManualClock

GW = "https://gateway.example.org"
URL = "https://a.example.org"
LATER = format_utc(datetime.now(timezone.utc) + timedelta(days=1))


def now() -> datetime:
    return datetime.now(timezone.utc)


@pytest.fixture
def fed(tmp_path: Path) -> tuple[SiteRegistry, list[SiteIdentity]]:
    """A 2-of-3 federation whose join requests must be addressed to GW."""
    reg = SiteRegistry(tmp_path / "gateway" / "registry.json")
    keys = admin.init_federation(reg, 2, 3, GW)
    return reg, keys


def stored(reg: SiteRegistry) -> dict[str, bytes]:
    files = [reg.state_path, reg.path, *sorted(reg.history_dir.glob("*"))]
    return {p.name: p.read_bytes() for p in files if p.exists()}


def member(reg: SiteRegistry, keys: list[SiteIdentity], site_id: str = "site-a") -> SiteIdentity:
    site = SiteIdentity.generate()
    admin.change(reg, admin.admission(build_join_request([site], site_id, URL, GW)), keys[:2])
    return site


# -- guarantee 3: m of n distinct federation keys ---------------------------------------------------
def test_init_creates_private_keys_and_a_self_consistent_root(fed) -> None:
    reg, keys = fed
    root = reg.root
    assert (root.version, root.threshold, len(root.keys)) == (1, 2, 3)
    assert set(root.keys) == {k.public_key_b64 for k in keys}
    for k in keys:
        pem = reg.keys_dir / k.keyid / "site-ed25519.pem"
        assert pem.stat().st_mode & 0o777 == 0o600
        assert (pem.parent.stat().st_mode & 0o777) == 0o700
    assert reg.registry.version == 1 and reg.registry.sites == () and reg.registry.gateway_url == GW
    with pytest.raises(ConflictError, match="already has a federation"):
        admin.init_federation(reg, 1, 1)
    with pytest.raises(InputError, match="threshold"):
        admin.init_federation(SiteRegistry(reg.path.with_name("other.json")), 4, 3)


def test_a_registry_below_threshold_is_refused(fed) -> None:
    reg, keys = fed
    site = SiteIdentity.generate()
    proposed = reg.registry.admit("site-a", URL, [site.public_key_b64], now())
    before = stored(reg)
    with pytest.raises(VerificationError, match="1 of 2 required"):
        reg.submit_registry(admin.sign_registry(proposed, keys[:1]))
    assert stored(reg) == before and reg.registry.version == 1
    with pytest.raises(VerificationError, match="not enrolled"):
        reg.keys_for("site-a")
    reg.submit_registry(admin.sign_registry(proposed, [keys[0], keys[2]]))  # any 2 of the 3
    assert reg.registry.version == 2 and reg.get("site-a").status == ACTIVE


def test_the_same_key_signing_twice_counts_once(fed) -> None:
    reg, keys = fed
    proposed = reg.registry.admit("site-a", URL, [SiteIdentity.generate().public_key_b64], now())
    env = admin.sign_registry(proposed, keys[:1])
    (sig,) = env["signatures"]
    repeated = {**env, "signatures": [sig, sig]}
    disguised = {**env, "signatures": [sig, {"keyid": keys[1].keyid, "sig": sig["sig"]}]}  # keyid is a hint only
    before = stored(reg)
    for attempt in (repeated, disguised):
        with pytest.raises(VerificationError, match="1 of 2 required"):
            reg.submit_registry(attempt)
    with pytest.raises(VerificationError, match="1 distinct federation key"):
        admin.change(reg, admin.renewal(), [keys[0], keys[0]])
    assert stored(reg) == before and reg.registry.version == 1


def test_keys_outside_the_root_carry_no_authority(fed) -> None:
    reg, keys = fed
    site = member(reg, keys)
    stranger = SiteIdentity.generate()
    before = stored(reg)
    with pytest.raises(VerificationError, match="1 of 2 required"):  # verification ignores the stranger
        reg.submit_registry(admin.sign_registry(reg.registry.revoke("site-a", now()), [keys[0], stranger]))
    with pytest.raises(VerificationError, match="not federation keys"):  # and the admin is told at once
        admin.change(reg, admin.revocation("site-a"), [keys[0], site])
    assert stored(reg) == before and reg.get("site-a").status == ACTIVE


# -- guarantee 5 for the registry: versions only go up, also after a restart ----------------------
def test_rollback_and_a_second_version_n_are_refused_after_a_restart(fed) -> None:
    reg, keys = fed
    v2 = admin.sign_registry(reg.registry.admit("site-a", URL, [SiteIdentity.generate().public_key_b64], now()), keys)
    reg.submit_registry(v2)
    v2_registry = reg.registry
    v3 = admin.sign_registry(v2_registry.revoke("site-a", now()), keys[:2])
    reg.submit_registry(v3)
    restarted = SiteRegistry(reg.path)
    before = stored(reg)
    with pytest.raises(ConflictError, match="rollback refused"):
        restarted.submit_registry(v2)  # validly signed, but older than what is in force
    other_v3 = admin.sign_registry(v2_registry.admit("site-b", URL, [SiteIdentity.generate().public_key_b64], now()), keys)
    with pytest.raises(ConflictError, match="different content"):
        restarted.submit_registry(other_v3)
    assert restarted.submit_registry(v3).version == 3  # the same bytes again: accepted, nothing written
    assert stored(reg) == before
    assert restarted.registry.version == 3 and restarted.get("site-a").status == REVOKED


def test_histories_the_model_would_not_write_are_refused(fed) -> None:
    reg, keys = fed
    member(reg, keys)
    current = reg.registry
    entry = current.require("site-a")
    thief = SiteIdentity.generate().public_key_b64
    silent_swap = Registry(current.version + 1, current.expires, (SiteEntry(
        entry.site_id, entry.url, (thief,), entry.keys_version, ACTIVE, entry.admitted_at, SitePolicy()),), GW)
    dropped = Registry(current.version + 1, current.expires, (), GW)
    before = stored(reg)
    with pytest.raises(InputError, match="without a new keys_version"):
        reg.submit_registry(admin.sign_registry(silent_swap, keys))
    with pytest.raises(InputError, match="revoke a site instead"):
        reg.submit_registry(admin.sign_registry(dropped, keys))
    with pytest.raises(InputError, match="sorted by id"):
        Registry(3, current.expires, (entry, entry))
    assert stored(reg) == before


# -- guarantee 6 for the registry: every registry expires -----------------------------------------
def test_an_expired_registry_is_refused(fed) -> None:
    reg, keys = fed
    stale = reg.registry.admit("site-a", URL, [SiteIdentity.generate().public_key_b64], now() - timedelta(days=30),
                               ttl=timedelta(days=1))
    before = stored(reg)
    with pytest.raises(VerificationError, match="expired"):
        reg.submit_registry(admin.sign_registry(stale, keys))
    assert stored(reg) == before and reg.registry.version == 1


def test_a_registry_that_expires_in_force_stops_trust_until_renewed(fed) -> None:
    reg, keys = fed
    member(reg, keys)
    reg.record_publication("site-a", 1, format_utc(now() + timedelta(days=400)), 2)
    assert reg.get("site-a").is_routable(reg.clock())
    later = ManualClock(now() + timedelta(days=91))
    reg = SiteRegistry(reg.path, clock=later)  # the same store, 91 days on
    with pytest.raises(VerificationError, match="registry expired"):
        reg.keys_for("site-a")
    with pytest.raises(VerificationError, match="registry expired"):
        reg.record_publication("site-a", 2, format_utc(later() + timedelta(days=1)), 2)
    assert not reg.get("site-a").is_routable(later())
    assert reg.last_sequence("site-a") == 1
    admin.change(reg, admin.renewal(), keys[1:])
    assert reg.get("site-a").is_routable(later()) and len(reg.keys_for("site-a")) == 1


# -- root rotation: a threshold of the old keys and of the new ones ------------------------------
def test_root_rotation_needs_the_old_and_the_new_keys(fed) -> None:
    reg, keys = fed
    member(reg, keys)
    new = [SiteIdentity.generate() for _ in range(3)]
    root, registry = reg.root, reg.registry
    proposed = root.successor([k.public_key_b64 for k in new], 2, now())
    renewed = admin.sign_registry(registry.renew(now()), new)
    skipping = Root(root.version + 2, proposed.expires, proposed.keys, 2)
    before = stored(reg)
    attempts = {
        "only the new keys (a fresh federation taking over)": (admin.sign_root(proposed, new), VerificationError),
        "only the old keys (new keys never proved)": (admin.sign_root(proposed, keys), VerificationError),
        "one old key and the new ones": (admin.sign_root(proposed, [keys[0], *new]), VerificationError),
        "one new key and the old ones": (admin.sign_root(proposed, [*keys, new[0]]), VerificationError),
        "a skipped version": (admin.sign_root(skipping, [*keys, *new]), ConflictError),
    }
    for what, (envelope, error) in attempts.items():
        with pytest.raises(error):
            reg.submit_root(envelope, renewed)
        assert stored(reg) == before, what
    with pytest.raises(ConflictError, match="rollback"):  # a good root cannot carry an old registry version
        reg.submit_root(admin.sign_root(proposed, [*keys, *new]), admin.sign_registry(registry, new))
    assert stored(reg) == before
    assert reg.root == root

    reg.submit_root(*admin.rotate_root(root, registry, keys[:2], new, 2, now()))
    restarted = SiteRegistry(reg.path)
    assert restarted.root.version == 2 and set(restarted.root.keys) == {k.public_key_b64 for k in new}
    assert restarted.get("site-a").status == ACTIVE  # the sites carried over
    with pytest.raises(VerificationError):  # the old keys are powerless now
        restarted.submit_registry(admin.sign_registry(restarted.registry.renew(now()), keys))
    restarted.submit_registry(admin.sign_registry(restarted.registry.renew(now()), new[1:]))


def test_a_root_rotation_that_would_orphan_the_registry_is_refused(fed) -> None:
    reg, keys = fed
    new = [SiteIdentity.generate() for _ in range(2)]
    proposed = reg.root.successor([k.public_key_b64 for k in new], 2, now())
    before = stored(reg)
    with pytest.raises(VerificationError):  # the registry in force is signed by keys the new root drops
        reg.submit_root(admin.sign_root(proposed, [*keys, *new]))
    assert stored(reg) == before and reg.root.version == 1


# -- guarantee 4: site key rotation, old and new keys -----------------------------------------------
def rotation_signed_by(site_id: str, previous: list[str], new: list[SiteIdentity], signers: list[SiteIdentity]) -> dict:
    body = KeyRotation(site_id, tuple(previous), tuple(k.public_key_b64 for k in new), new_nonce(), format_utc(now()))
    return sign_all(KEY_ROTATION_TYPE, canonical_json(body.to_json()), signers)


def test_a_site_rotation_needs_a_current_key_and_every_new_key(fed) -> None:
    reg, keys = fed
    site = member(reg, keys)
    other = member(reg, keys, "site-b")
    new = SiteIdentity.generate()
    current = [site.public_key_b64]
    before = stored(reg)
    refused = {
        "without the old key": ("site-a", rotation_signed_by("site-a", current, [new], [new]), "0 of 1"),
        "without the new key": ("site-a", rotation_signed_by("site-a", current, [new], [site]), "0 of 1"),
        "stale key set": ("site-a", rotation_signed_by("site-a", [SiteIdentity.generate().public_key_b64], [new], [site, new]),
                          "does not hold"),
        "another site's key": ("site-a", rotation_signed_by("site-a", current, [new], [other, new]), "0 of 1"),
        "for another site": ("site-b", rotation_signed_by("site-a", current, [new], [site, new]), "0 of 1"),
        "naming another site": ("site-b", rotation_signed_by("site-a", [other.public_key_b64], [new], [other, new]),
                                "names site"),
    }
    for what, (target, envelope, message) in refused.items():
        with pytest.raises(VerificationError, match=message):
            admin.change(reg, admin.rotation(target, envelope), keys[:2])
        assert stored(reg) == before, what
    admin.change(reg, admin.rotation("site-a", build_key_rotation(site, current, [new], "site-a")), keys[:2])
    rec = reg.get("site-a")
    assert rec.keys_version == 2 and rec.public_keys == (new.public_key_b64,)


# -- guarantee 8: rotation resets the floor (only when nothing old can verify) ---------------------
def test_rotation_resets_the_floor_only_when_every_key_is_replaced(fed) -> None:
    reg, keys = fed
    site = member(reg, keys)
    reg.record_publication("site-a", 2**62, LATER, 3)  # a thief's publication pinned the floor high
    lost: list[str] = []
    reg.on_untrusted(lost.append)

    added = SiteIdentity.generate()  # the old key stays: its old publications still verify
    admin.change(reg, admin.rotation("site-a", build_key_rotation(site, [site.public_key_b64], [site, added], "site-a")), keys[:2])
    assert reg.last_sequence("site-a") == 2**62 and lost == []
    with pytest.raises(ConflictError, match="replay or rollback"):
        reg.check_sequence("site-a", 1)

    fresh = SiteIdentity.generate()  # every key replaced: nothing signed before verifies any more
    rotation = build_key_rotation(added, [site.public_key_b64, added.public_key_b64], [fresh], "site-a")
    admin.change(reg, admin.rotation("site-a", rotation), keys[:2])
    rec = SiteRegistry(reg.path).get("site-a")
    assert rec.last_sequence is None and rec.summary_count == 0 and not rec.is_routable(now())
    assert lost == ["site-a"]  # its summaries leave the index now
    reg.check_sequence("site-a", 1)
    assert reg.record_publication("site-a", 1, LATER, 2).last_sequence == 1
    assert [k for k in reg.keys_for("site-a")][0].public_bytes_raw() == fresh.public_key.public_bytes_raw()


# -- join requests -------------------------------------------------------------------------------------
def test_a_join_request_is_approved_into_a_new_registry_version(fed) -> None:
    reg, keys = fed
    site = SiteIdentity.generate()
    request = build_join_request([site], "site-a", URL + "/", GW)
    assert admin.change(reg, admin.admission(request), keys[:2]).version == 2
    rec = reg.get("site-a")
    assert (rec.url, rec.public_keys, rec.keys_version, rec.status) == (URL, (site.public_key_b64,), 1, ACTIVE)
    before = stored(reg)
    with pytest.raises(ConflictError, match="already a member"):
        admin.change(reg, admin.admission(request), keys[:2])
    assert stored(reg) == before


def test_forged_stale_and_misaddressed_join_requests_are_refused(fed) -> None:
    reg, keys = fed
    site, thief = SiteIdentity.generate(), SiteIdentity.generate()
    body = JoinRequest("site-a", URL, (site.public_key_b64,), GW, new_nonce(), format_utc(now()))
    forged = sign_all(JOIN_REQUEST_TYPE, canonical_json(body.to_json()), [thief])  # lists a key it does not hold
    good = build_join_request([site], "site-a", URL, GW)
    tampered = {**good, "payload": sign_all(JOIN_REQUEST_TYPE, canonical_json(
        {**body.to_json(), "url": "https://evil.example.org"}), [thief])["payload"]}
    attempts = {
        "forged": (forged, VerificationError, "0 of 1"),
        "tampered": (tampered, VerificationError, "0 of 1"),
        "elsewhere": (build_join_request([site], "site-a", URL, "https://other-gateway.example.org"),
                      VerificationError, "addressed to"),
        "stale": (build_join_request([site], "site-a", URL, GW, now() - timedelta(days=8)), VerificationError, "days ago"),
        "future": (build_join_request([site], "site-a", URL, GW, now() + timedelta(hours=1)), VerificationError, "future"),
        "not a join request": ({**good, "payloadType": KEY_ROTATION_TYPE}, VerificationError, "expected a DSSE"),
    }
    before = stored(reg)
    for what, (envelope, error, message) in attempts.items():
        with pytest.raises(error, match=message):
            admin.change(reg, admin.admission(envelope), keys[:2])
        assert stored(reg) == before, what
    assert reg.registry.sites == ()


# -- guarantee 9: namespaces, spoofed ids ------------------------------------------------------------
@pytest.mark.parametrize("site_id", [
    "../x", "..", "acme/../x", "Acme", "ACME", "\u0430cme", "\uff41\uff43\uff4d\uff45", "ac\u200bme", "acme\n",
    "acme.", "acme%2f", "acme ", "",
])
def test_spoofed_and_traversing_site_ids_are_refused(fed, site_id: str) -> None:
    reg, keys = fed
    member(reg, keys, "acme")
    site = SiteIdentity.generate()
    before = stored(reg)
    with pytest.raises(InputError, match="site id"):
        build_join_request([site], site_id, URL, GW)
    crafted = {"site_id": site_id, "url": URL, "public_keys": [site.public_key_b64], "gateway_url": GW,
               "nonce": new_nonce(), "issued_at": format_utc(now())}
    signed = sign_all(JOIN_REQUEST_TYPE, canonical_json(crafted), [site])  # a request the site tool would not write
    with pytest.raises(InputError, match="site id"):
        admin.change(reg, admin.admission(signed), keys[:2])
    with pytest.raises(InputError, match="site id"):
        admin.enroll(reg, site_id, URL, [site.public_key_b64], keys=keys[:2])
    with pytest.raises(InputError, match="site id"):
        reg.keys_for(site_id)
    assert stored(reg) == before
    assert [r.site_id for r in reg.list()] == ["acme"]


# -- guarantee 14: registry changes need federation authority ----------------------------------------
def test_admin_actions_without_federation_keys_are_refused(fed, tmp_path: Path) -> None:
    reg, keys = fed
    site = member(reg, keys)
    before = stored(reg)
    for given, message in (
        ([], "0 distinct"),
        (keys[:1], "1 distinct federation key"),
        ([site], "not federation keys"),
        ([SiteIdentity.generate(), keys[0]], "not federation keys"),
    ):
        with pytest.raises(VerificationError, match=message):
            admin.change(reg, admin.revocation("site-a"), given)
        with pytest.raises(VerificationError, match=message):
            admin.enroll(reg, "site-b", URL, [SiteIdentity.generate().public_key_b64], keys=given)
    with pytest.raises(VerificationError):  # a site signing a registry itself
        reg.submit_registry(admin.sign_registry(reg.registry.revoke("site-a", now()), [site]))
    # the local flow signs with the keys on this machine: here only one of the two needed
    for k in keys[1:]:
        shutil.move(str(reg.keys_dir / k.keyid), str(tmp_path / k.keyid))
    with pytest.raises(VerificationError, match="1 distinct federation key"):
        admin.revoke(reg, "site-a")
    with pytest.raises(VerificationError, match="1 distinct federation key"):
        admin.enroll(reg, "site-b", URL, [SiteIdentity.generate().public_key_b64])
    assert stored(reg) == before and reg.get("site-a").status == ACTIVE


# -- guarantee 10: revocation, at once and everywhere -------------------------------------------------
def test_revocation_in_another_process_takes_effect_at_the_next_request(fed) -> None:
    reg, keys = fed
    member(reg, keys)
    gateway = SiteRegistry(reg.path)  # the running gateway's view
    gateway.record_publication("site-a", 4, LATER, 3)
    lost: list[str] = []
    gateway.on_untrusted(lost.append)
    assert gateway.get("site-a").is_routable(now())

    admin.change(SiteRegistry(reg.path), admin.revocation("site-a"), keys[1:])  # `hansa gateway revoke` elsewhere
    gateway.poll()  # what the app does before each request
    assert lost == ["site-a"]
    rec = gateway.get("site-a")
    assert rec.status == REVOKED and not rec.is_routable(now()) and rec.summary_count == 0 and rec.last_sequence == 4
    with pytest.raises(VerificationError, match="revoked"):
        gateway.keys_for("site-a")
    with pytest.raises(VerificationError, match="revoked"):
        gateway.check_sequence("site-a", 5)
    with pytest.raises(VerificationError, match="revoked"):
        gateway.record_publication("site-a", 5, LATER, 3)
    gateway.poll()
    assert lost == ["site-a"]  # reported once
