"""The trust core alone (gateway.trust.state): every rule decided at a `now` the test names, with no
store, no file and no patched clock. The store around it (persistence, locks, tampering on disk)
is tested in test_registry.py, federation governance end to end in test_federation.py."""
from __future__ import annotations

import ast
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from hansa.core.errors import ConflictError, VerificationError
from hansa.gateway.trust import admin
from hansa.gateway.trust.documents import Registry, Root
from hansa.gateway.trust.state import TrustedState
from hansa.sync.keys import SiteIdentity
from hansa.sync.wire import format_utc

T0 = datetime(2030, 6, 1, 12, tzinfo=timezone.utc)
SITE = "site-a"
URL = "https://a.example.org"


@pytest.fixture(scope="module")
def keys() -> list[SiteIdentity]:
    return [SiteIdentity.generate() for _ in range(3)]


@pytest.fixture(scope="module")
def site_key() -> str:
    return SiteIdentity.generate().public_key_b64


def genesis(keys: list[SiteIdentity], root_ttl: timedelta = timedelta(days=365),
            registry_ttl: timedelta = timedelta(days=90)) -> TrustedState:
    """A 2-of-3 federation begun at T0."""
    root_env, reg_env = admin.genesis(keys, 2, T0, root_ttl=root_ttl, registry_ttl=registry_ttl)
    return TrustedState().initialized(root_env, reg_env, T0)


def next_registry(state: TrustedState, signers: list[SiteIdentity], make, now: datetime = T0) -> dict:
    assert state.registry is not None
    return admin.sign_registry(make(state.registry, now), signers)


def with_member(keys: list[SiteIdentity], site_key: str) -> TrustedState:
    state = genesis(keys)
    return state.with_registry(next_registry(state, keys[:2], admin.enrolment(SITE, URL, [site_key])), T0)


# -- thresholds -----------------------------------------------------------------------------------
def test_a_registry_signed_below_the_threshold_is_refused(keys, site_key) -> None:
    state = genesis(keys)
    admission = admin.enrolment(SITE, URL, [site_key])
    for signers in ([keys[0]], [keys[0], keys[0]], [keys[0], SiteIdentity.generate()]):
        with pytest.raises(VerificationError):
            state.with_registry(next_registry(state, signers, admission), T0)
    assert state.registry is not None and state.registry.version == 1  # a value: nothing changed
    accepted = state.with_registry(next_registry(state, keys[1:], admission), T0)
    assert accepted.registry is not None and accepted.registry.version == 2


def test_a_root_rotation_needs_the_old_and_the_new_thresholds(keys) -> None:
    state = genesis(keys)
    assert state.root is not None and state.registry is not None
    new = [SiteIdentity.generate() for _ in range(3)]
    proposed = state.root.successor([k.public_key_b64 for k in new], 2, T0)
    renewed = admin.sign_registry(state.registry.renew(T0), new)
    with pytest.raises(VerificationError):
        state.with_root(admin.sign_root(proposed, new), renewed, T0)  # the old keys never agreed
    rotated = state.with_root(admin.sign_root(proposed, [*keys[:2], *new[:2]]), renewed, T0)
    assert rotated.root == proposed and rotated.registry is not None and rotated.registry.version == 2


# -- successor rules -----------------------------------------------------------------------------
def test_a_registry_rollback_or_a_rewritten_version_is_refused(keys, site_key) -> None:
    state = with_member(keys, site_key)  # registry version 2
    renewed = state.with_registry(next_registry(state, keys[:2], admin.renewal()), T0)  # version 3
    assert renewed.registry is not None and renewed.registry.version == 3
    old = state.registry
    assert old is not None
    with pytest.raises(ConflictError, match="rollback refused"):
        renewed.with_registry(admin.sign_registry(Registry(2, old.expires, old.sites), keys[:2]), T0)
    rewritten = Registry(3, format_utc(T0 + timedelta(days=30)), old.sites)
    with pytest.raises(ConflictError, match="already in force with different content"):
        renewed.with_registry(admin.sign_registry(rewritten, keys[:2]), T0)
    assert renewed.registry_envelope is not None
    assert renewed.with_registry(renewed.registry_envelope, T0) is renewed  # the same document: no change


def test_a_first_root_must_be_version_one(keys) -> None:
    root = Root(2, format_utc(T0 + timedelta(days=365)), tuple(k.public_key_b64 for k in keys), 2)
    registry = Registry(1, format_utc(T0 + timedelta(days=90)))
    with pytest.raises(VerificationError, match="starts at root version 1"):
        TrustedState().initialized(admin.sign_root(root, keys), admin.sign_registry(registry, keys), T0)
    with pytest.raises(ConflictError, match="already trusts"):
        genesis(keys).initialized(*admin.genesis(keys, 2, T0), T0)


# -- expiry ----------------------------------------------------------------------------------------
def test_an_expired_root_or_registry_is_refused_at_now_past_expiry_and_accepted_before(keys, site_key) -> None:
    root_env, reg_env = admin.genesis(keys, 2, T0, root_ttl=timedelta(days=10), registry_ttl=timedelta(days=20))
    TrustedState().initialized(root_env, reg_env, T0 + timedelta(days=10) - timedelta(seconds=1))
    with pytest.raises(VerificationError, match="root expired"):
        TrustedState().initialized(root_env, reg_env, T0 + timedelta(days=10))
    state = genesis(keys)
    short = next_registry(state, keys[:2], admin.enrolment(SITE, URL, [site_key], ttl=timedelta(hours=1)))
    assert state.with_registry(short, T0 + timedelta(minutes=59)).registry is not None
    with pytest.raises(VerificationError, match="expired at .*: refused"):
        state.with_registry(short, T0 + timedelta(hours=1))


def test_the_registry_in_force_stops_trust_once_expired(keys, site_key) -> None:
    state = with_member(keys, site_key)
    assert state.registry is not None
    expires = datetime.fromisoformat(state.registry.expires.replace("Z", "+00:00"))
    assert len(state.keys_for(SITE, expires - timedelta(seconds=1))) == 1
    with pytest.raises(VerificationError, match="registry expired"):
        state.keys_for(SITE, expires)
    with pytest.raises(VerificationError, match="registry expired"):
        state.with_publication(SITE, 1, format_utc(expires + timedelta(days=1)), 1, expires)


# -- publication floors ----------------------------------------------------------------------------
def test_a_publication_replay_or_rollback_is_refused(keys, site_key) -> None:
    state = with_member(keys, site_key)
    later = format_utc(T0 + timedelta(days=1))
    state.check_sequence(SITE, 0, None, T0)  # never published: any sequence is acceptable
    published = state.with_publication(SITE, 5, later, 3, T0)
    assert published.last_sequence(SITE) == 5 and state.last_sequence(SITE) is None
    for seq in (5, 4, 0):
        with pytest.raises(ConflictError, match="replay or rollback"):
            published.check_sequence(SITE, seq, None, T0)
        with pytest.raises(ConflictError, match="replay or rollback"):
            published.with_publication(SITE, seq, later, 1, T0)
    assert published.with_publication(SITE, 6, later, 1, T0).last_sequence(SITE) == 6


# -- revocation and routability ------------------------------------------------------------------
def test_revocation_makes_a_site_unroutable_at_once(keys, site_key) -> None:
    state = with_member(keys, site_key)
    published = state.with_publication(SITE, 1, format_utc(T0 + timedelta(days=1)), 3, T0)
    assert published.site(SITE).is_routable(T0)
    assert not published.site(SITE).is_routable(T0 + timedelta(days=1))  # its publication expired
    revoked = published.with_registry(next_registry(published, keys[:2], admin.revocation(SITE)), T0)
    record = revoked.site(SITE)
    assert not record.is_routable(T0) and record.summary_count == 0 and record.last_sequence == 1
    assert published.untrusted_by(revoked) == [SITE]
    with pytest.raises(VerificationError, match="revoked"):
        revoked.keys_for(SITE, T0)
    with pytest.raises(VerificationError, match="revoked"):
        revoked.with_publication(SITE, 2, format_utc(T0 + timedelta(days=1)), 1, T0)


# -- the wall: no IO and no clock of its own -------------------------------------------------------
def test_the_state_machine_touches_no_file_lock_or_clock() -> None:
    source = (Path(__file__).resolve().parents[3] / "gateway" / "trust" / "state.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not imported & {"os", "threading", "time", "pathlib", "hansa.core.files", "hansa.core.logs"}
    calls = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    assert not calls & {"now", "utcnow", "today", "time", "open", "read_bytes", "write_bytes"}
