"""SiteRegistry as a store: validation, persistence across restarts, the replay floor, atomic
writes, tampering with what is stored. Federation governance (thresholds, rotation, revocation,
authority) is tested in test_federation*.py."""
from __future__ import annotations

import json
import os
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from hansa.core.errors import ConflictError, InputError, NotFoundError, VerificationError
from hansa.gateway.trust import admin
from hansa.gateway.trust.registry import ACTIVE, REVOKED, SiteRegistry, validate_site_url
from hansa.sync.keys import SiteIdentity
from hansa.sync.wire import format_utc
from tests.clock import ManualClock

LATER = format_utc(datetime.now(timezone.utc) + timedelta(days=1))


@pytest.fixture(scope="module")
def key() -> str:
    return SiteIdentity.generate().public_key_b64


@pytest.fixture
def reg(tmp_path: Path) -> SiteRegistry:
    return SiteRegistry(tmp_path / "gateway" / "registry.json")


def stored(reg: SiteRegistry) -> dict[str, bytes]:
    """Every byte the registry keeps (federation keys aside): what a refusal must leave alone."""
    files = [reg.state_path, reg.path, *sorted(reg.history_dir.glob("*"))]
    return {p.name: p.read_bytes() for p in files if p.exists()}


def test_enroll_persists_and_survives_a_restart(tmp_path: Path, key: str) -> None:
    clock = ManualClock("2026-01-01T12:00:00Z")
    reg = SiteRegistry(tmp_path / "gateway" / "registry.json", clock=clock)
    rec = admin.enroll(reg, "site-a", "https://a.example.org/api/", [key])
    assert rec.url == "https://a.example.org/api" and rec.keys_version == 1
    assert rec.status == ACTIVE and rec.last_sequence is None and rec.enrolled_at == "2026-01-01T12:00:00Z"
    reopened = SiteRegistry(reg.path, clock=clock)
    assert reopened.get("site-a") == rec
    assert [r.site_id for r in reopened.list()] == ["site-a"]
    assert reopened.registry.version == 2  # version 1 is the empty registry the federation began with
    clock.move_to("2026-01-02T00:00:00Z")
    assert len(reopened.keys_for("site-a")) == 1
    # the file operators read is the signed envelope in force
    envelope = json.loads(reg.path.read_text())
    assert set(envelope) == {"payloadType", "payload", "signatures"}
    assert envelope["payloadType"] == "application/vnd.hansa.registry+json; v=1"


@pytest.mark.parametrize(
    "url, message",
    [
        ("ftp://a.example.org", "only http"),
        ("file:///etc/passwd", "only http"),
        ("https://user:pw@a.example.org", "credentials"),
        ("https://a.example.org/#frag", "fragment"),
        ("https://a.example.org/?x=1", "query"),
        ("https://a.example.org:99999", "port"),
        ("https:///nohost", "no host"),
        ("https://a.example.org/\nx", "control"),
        ("https://a.example.org/../admin", "'..'"),
        ("https://exаmple.org", "ASCII"),  # Cyrillic 'а'
        ("", "non-empty"),
    ],
)
def test_bad_urls_are_refused_and_nothing_is_written(reg: SiteRegistry, key: str, url: str, message: str) -> None:
    admin.enroll(reg, "site-z", "https://z.example.org", [key])
    before = stored(reg)
    with pytest.raises(InputError, match=message):
        admin.enroll(reg, "site-a", url, [key])
    assert stored(reg) == before


@pytest.mark.parametrize("site_id", ["../etc", "Site-A", "a_b", "", "-a", "a" * 65, "site-a\n", "sïte"])
def test_bad_site_ids_are_refused(reg: SiteRegistry, key: str, site_id: str) -> None:
    with pytest.raises(InputError, match="site id"):
        admin.enroll(reg, site_id, "https://a.example.org", [key])
    assert not reg.state_path.exists()  # not even the local federation was created


@pytest.mark.parametrize("bad_key", ["not base64!", "AAAA", "-----BEGIN PUBLIC KEY-----"])
def test_bad_keys_are_refused_as_input_errors(reg: SiteRegistry, key: str, bad_key: str) -> None:
    admin.enroll(reg, "site-z", "https://z.example.org", [key])
    before = stored(reg)
    with pytest.raises(InputError):
        admin.enroll(reg, "site-a", "https://a.example.org", [bad_key])
    with pytest.raises(InputError, match="at least one"):
        admin.enroll(reg, "site-a", "https://a.example.org", [])
    assert stored(reg) == before


def test_enrolling_twice_conflicts_and_revocation_untrusts(reg: SiteRegistry, key: str) -> None:
    admin.enroll(reg, "site-a", "https://a.example.org", [key])
    before = stored(reg)
    with pytest.raises(ConflictError, match="already a member"):
        admin.enroll(reg, "site-a", "https://other.example.org", [key])
    assert stored(reg) == before
    reg.record_publication("site-a", 5, LATER, 3)
    rec = admin.revoke(reg, "site-a")
    assert rec.status == REVOKED and rec.summary_count == 0 and rec.expires is None
    with pytest.raises(VerificationError, match="revoked"):
        reg.keys_for("site-a")
    with pytest.raises(VerificationError, match="revoked"):
        reg.record_publication("site-a", 6, LATER, 1)
    assert SiteRegistry(reg.path).get("site-a").last_sequence == 5
    with pytest.raises(ConflictError, match="already revoked"):
        admin.revoke(reg, "site-a")


def test_readmission_keeps_the_floor_unless_every_key_is_new(reg: SiteRegistry, key: str) -> None:
    admin.enroll(reg, "site-a", "https://a.example.org", [key])
    reg.record_publication("site-a", 9, LATER, 2)
    admin.revoke(reg, "site-a")
    rec = admin.enroll(reg, "site-a", "https://a2.example.org", [key])  # same key: old publications still verify
    assert rec.status == ACTIVE and rec.last_sequence == 9 and rec.keys_version == 2
    with pytest.raises(ConflictError):
        reg.record_publication("site-a", 9, LATER, 2)
    admin.revoke(reg, "site-a")
    new_key = SiteIdentity.generate().public_key_b64
    rec = admin.enroll(reg, "site-a", "https://a2.example.org", [new_key])  # nothing signed before verifies now
    assert rec.last_sequence is None and rec.keys_version == 3 and rec.public_keys == (new_key,)


def test_unknown_sites(reg: SiteRegistry, key: str) -> None:
    with pytest.raises(VerificationError, match="not enrolled"):
        reg.keys_for("nobody")  # no federation at all yet
    with pytest.raises(NotFoundError, match="no federation yet"):
        admin.revoke(reg, "nobody")
    assert not reg.state_path.exists()  # only `enroll` (the demo flow) creates a local federation
    admin.enroll(reg, "site-a", "https://a.example.org", [key])
    with pytest.raises(NotFoundError):
        reg.get("nobody")
    with pytest.raises(NotFoundError):
        admin.revoke(reg, "nobody")
    with pytest.raises(VerificationError, match="not enrolled"):
        reg.keys_for("nobody")
    assert reg.last_sequence("nobody") is None


def test_replay_and_rollback_are_refused_after_a_restart(reg: SiteRegistry, key: str) -> None:
    admin.enroll(reg, "site-a", "https://a.example.org", [key])
    reg.check_sequence("site-a", 0)  # never published: any sequence is acceptable
    reg.record_publication("site-a", 3, LATER, 4)
    restarted = SiteRegistry(reg.path)
    assert restarted.last_sequence("site-a") == 3
    before = stored(reg)
    for seq in (3, 2, 0):
        with pytest.raises(ConflictError, match="replay or rollback"):
            restarted.check_sequence("site-a", seq)
        with pytest.raises(ConflictError):
            restarted.record_publication("site-a", seq, LATER, 1)
    assert stored(reg) == before
    rec = restarted.get("site-a")
    assert (rec.last_sequence, rec.summary_count, rec.expires) == (3, 4, LATER)
    rec = restarted.record_publication("site-a", 4, LATER, 7)
    assert (rec.last_sequence, rec.summary_count) == (4, 7)


def test_site_policy_caps_a_publication(reg: SiteRegistry, key: str) -> None:
    admin.enroll(reg, "site-a", "https://a.example.org", [key])
    cap = reg.get("site-a").policy.max_summaries
    reg.check_sequence("site-a", 1, cap)
    with pytest.raises(InputError, match="max_summaries"):
        reg.check_sequence("site-a", 1, cap + 1)


def test_expiry_and_routability(reg: SiteRegistry, key: str) -> None:
    now = datetime.now(timezone.utc)
    rec = admin.enroll(reg, "site-a", "https://a.example.org", [key])
    assert rec.is_expired(now) and not rec.is_routable(now)  # nothing published yet
    rec = reg.record_publication("site-a", 1, format_utc(now + timedelta(hours=1)), 1)
    assert rec.is_routable(now)
    assert not rec.is_routable(now + timedelta(hours=2))
    view = rec.view(now + timedelta(hours=2))
    assert view["expired"] is True and view["routable"] is False and view["site_id"] == "site-a"


def test_a_failed_write_leaves_the_old_state_intact(reg: SiteRegistry, key: str, monkeypatch) -> None:
    admin.enroll(reg, "site-a", "https://a.example.org", [key])
    before = stored(reg)

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        reg.record_publication("site-a", 1, LATER, 2)
    with pytest.raises(OSError):
        admin.revoke(reg, "site-a")
    monkeypatch.undo()
    assert stored(reg) == before
    assert [p.name for p in reg.path.parent.rglob("*.tmp")] == []
    assert SiteRegistry(reg.path).get("site-a").status == ACTIVE


def test_a_tampered_history_file_is_refused(reg: SiteRegistry, key: str) -> None:
    """The state file pins the sha256 of the registry in force: changed bytes are refused. A
    running registry keeps the version it had; a starting one refuses to start on it."""
    admin.enroll(reg, "site-a", "https://a.example.org", [key])
    assert reg.get("site-a").status == ACTIVE
    pinned = reg.history_dir / "registry-00000002.json"
    data = json.loads(pinned.read_text())
    data["signatures"] = data["signatures"] * 2  # different bytes, same signature
    pinned.write_text(json.dumps(data))
    os.utime(reg.state_path)  # make the running registry look again
    assert reg.get("site-a").status == ACTIVE  # the previous one stays in force
    with pytest.raises(VerificationError, match="bytes changed"):
        SiteRegistry(reg.path).list()


def test_an_edited_operator_copy_is_not_trusted(reg: SiteRegistry, key: str) -> None:
    admin.enroll(reg, "site-a", "https://a.example.org", [key])
    reg.path.write_text(json.dumps({"payloadType": "x", "payload": "", "signatures": []}))
    assert SiteRegistry(reg.path).get("site-a").url == "https://a.example.org"


def test_concurrent_publications_never_lose_the_floor(reg: SiteRegistry, key: str) -> None:
    """Several writers race; exactly one wins each sequence and the floor ends at the maximum."""
    admin.enroll(reg, "site-a", "https://a.example.org", [key])
    wins: list[int] = []
    lock = threading.Lock()

    def publish(seq: int) -> None:
        try:
            SiteRegistry(reg.path).record_publication("site-a", seq, LATER, seq)
        except ConflictError:
            return
        with lock:
            wins.append(seq)

    threads = [threading.Thread(target=publish, args=(s,)) for s in (5, 5, 5, 6, 6, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wins.count(5) <= 1 and wins.count(6) <= 1 and wins.count(7) == 1
    assert reg.get("site-a").last_sequence == 7


def test_validate_site_url_normalizes() -> None:
    assert validate_site_url("http://127.0.0.1:8701/") == "http://127.0.0.1:8701"
    assert validate_site_url("https://[::1]:8443/base") == "https://[::1]:8443/base"


def test_an_unsigned_registry_from_an_earlier_version_is_refused(reg: SiteRegistry, key: str) -> None:
    reg.path.parent.mkdir(parents=True)
    reg.path.write_text(json.dumps({"format": 1, "sites": [{"site_id": "site-a", "url": "https://a.example.org",
                                                             "public_keys": [key], "status": "active"}]}))
    with pytest.raises(VerificationError, match="unsigned registry from an earlier hansa"):
        reg.list()
    with pytest.raises(VerificationError, match="unsigned registry"):
        admin.enroll(reg, "site-b", "https://b.example.org", [key])
    assert not reg.state_path.exists()
