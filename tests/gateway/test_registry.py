"""SiteRegistry: validation, persistence across restarts, the replay floor, atomic writes."""
from __future__ import annotations

import json
import os
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from hansa.core.errors import ConflictError, InputError, NotFoundError, VerificationError
from hansa.gateway.registry import ACTIVE, REVOKED, SiteRegistry, validate_site_url
from hansa.sync.keys import SiteIdentity
from hansa.sync.wire import format_utc

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
LATER = format_utc(NOW + timedelta(hours=1))


@pytest.fixture(scope="module")
def key() -> str:
    return SiteIdentity.generate().public_key_b64


@pytest.fixture
def reg(tmp_path: Path) -> SiteRegistry:
    return SiteRegistry(tmp_path / "gateway" / "registry.json")


def test_enroll_persists_and_survives_a_restart(reg: SiteRegistry, key: str) -> None:
    rec = reg.enroll("site-a", "https://a.example.org/api/", [key], now=NOW)
    assert rec.url == "https://a.example.org/api"
    assert rec.status == ACTIVE and rec.last_sequence is None and rec.enrolled_at == "2026-01-01T12:00:00Z"
    reopened = SiteRegistry(reg.path)
    assert reopened.get("site-a") == rec
    assert [r.site_id for r in reopened.list()] == ["site-a"]
    assert len(reopened.keys_for("site-a")) == 1


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
        ("", "non-empty"),
    ],
)
def test_bad_urls_are_refused_and_nothing_is_written(reg: SiteRegistry, key: str, url: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        reg.enroll("site-a", url, [key])
    assert not reg.path.exists()


@pytest.mark.parametrize("site_id", ["../etc", "Site-A", "a_b", "", "-a", "a" * 65])
def test_bad_site_ids_are_refused(reg: SiteRegistry, key: str, site_id: str) -> None:
    with pytest.raises(InputError, match="site id"):
        reg.enroll(site_id, "https://a.example.org", [key])
    assert not reg.path.exists()


@pytest.mark.parametrize("bad_key", ["not base64!", "AAAA", "-----BEGIN PUBLIC KEY-----"])
def test_bad_keys_are_refused_as_input_errors(reg: SiteRegistry, bad_key: str) -> None:
    with pytest.raises(InputError):
        reg.enroll("site-a", "https://a.example.org", [bad_key])
    with pytest.raises(InputError, match="at least one"):
        reg.enroll("site-a", "https://a.example.org", [])
    assert not reg.path.exists()


def test_enrolling_twice_conflicts_and_revocation_untrusts(reg: SiteRegistry, key: str) -> None:
    reg.enroll("site-a", "https://a.example.org", [key])
    with pytest.raises(ConflictError, match="already enrolled"):
        reg.enroll("site-a", "https://other.example.org", [key])
    assert reg.get("site-a").url == "https://a.example.org"
    reg.record_publication("site-a", 5, LATER, 3, now=NOW)
    rec = reg.revoke("site-a")
    assert rec.status == REVOKED and rec.summary_count == 0 and rec.expires is None
    with pytest.raises(VerificationError, match="revoked"):
        reg.keys_for("site-a")
    with pytest.raises(VerificationError, match="revoked"):
        reg.record_publication("site-a", 6, LATER, 1)
    assert SiteRegistry(reg.path).get("site-a").last_sequence == 5


def test_reenrolment_keeps_the_sequence_floor(reg: SiteRegistry, key: str) -> None:
    reg.enroll("site-a", "https://a.example.org", [key])
    reg.record_publication("site-a", 9, LATER, 2)
    reg.revoke("site-a")
    new_key = SiteIdentity.generate().public_key_b64
    rec = reg.enroll("site-a", "https://a2.example.org", [new_key])
    assert rec.status == ACTIVE and rec.last_sequence == 9 and rec.public_keys == (new_key,)
    with pytest.raises(ConflictError):
        reg.record_publication("site-a", 9, LATER, 2)


def test_unknown_sites(reg: SiteRegistry) -> None:
    with pytest.raises(NotFoundError):
        reg.get("nobody")
    with pytest.raises(NotFoundError):
        reg.revoke("nobody")
    with pytest.raises(VerificationError, match="not enrolled"):
        reg.keys_for("nobody")


def test_replay_and_rollback_are_refused_after_a_restart(reg: SiteRegistry, key: str) -> None:
    reg.enroll("site-a", "https://a.example.org", [key])
    reg.check_sequence("site-a", 0)  # never published: any sequence is acceptable
    reg.record_publication("site-a", 3, LATER, 4, now=NOW)
    restarted = SiteRegistry(reg.path)
    for seq in (3, 2, 0):
        with pytest.raises(ConflictError, match="replay or rollback"):
            restarted.check_sequence("site-a", seq)
        with pytest.raises(ConflictError):
            restarted.record_publication("site-a", seq, LATER, 1)
    rec = restarted.get("site-a")
    assert (rec.last_sequence, rec.summary_count, rec.expires) == (3, 4, LATER)
    rec = restarted.record_publication("site-a", 4, LATER, 7)
    assert (rec.last_sequence, rec.summary_count) == (4, 7)


def test_expiry_and_routability(reg: SiteRegistry, key: str) -> None:
    rec = reg.enroll("site-a", "https://a.example.org", [key])
    assert rec.is_expired(NOW) and not rec.is_routable(NOW)  # nothing published yet
    rec = reg.record_publication("site-a", 1, LATER, 1)
    assert rec.is_routable(NOW)
    assert not rec.is_routable(NOW + timedelta(hours=2))
    view = rec.view(NOW + timedelta(hours=2))
    assert view["expired"] is True and view["routable"] is False and view["site_id"] == "site-a"


def test_a_failed_write_leaves_the_old_file_intact(reg: SiteRegistry, key: str, monkeypatch) -> None:
    reg.enroll("site-a", "https://a.example.org", [key])
    before = reg.path.read_bytes()

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        reg.record_publication("site-a", 1, LATER, 2)
    monkeypatch.undo()
    assert reg.path.read_bytes() == before
    assert [p.name for p in reg.path.parent.iterdir() if p.suffix == ".tmp"] == []


def test_a_tampered_registry_file_is_refused(reg: SiteRegistry, key: str) -> None:
    reg.enroll("site-a", "https://a.example.org", [key])
    data = json.loads(reg.path.read_text())
    data["sites"][0]["url"] = "gopher://evil"
    reg.path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="only http"):
        reg.list()


def test_concurrent_publications_never_lose_the_floor(reg: SiteRegistry, key: str) -> None:
    """Several writers race; exactly one wins each sequence and the floor ends at the maximum."""
    reg.enroll("site-a", "https://a.example.org", [key])
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
