"""Site identities on disk and public keys as enrolled: permissions, atomicity, strict parsing."""
from __future__ import annotations

import base64
import hashlib
import os
import stat
from pathlib import Path
from typing import Any, Callable

import pytest
from cryptography.hazmat.primitives import serialization

from hansa.core.errors import ConflictError, InputError, VerificationError
from hansa.sync.keys import (
    PRIVATE_KEY_FILE,
    PUBLIC_KEY_FILE,
    SiteIdentity,
    keyid_for,
    load_public_key,
    public_key_b64,
    verify_signature,
)


@pytest.fixture(scope="module")
def identity() -> SiteIdentity:
    return SiteIdentity.generate()


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_save_and_load_round_trip(identity: SiteIdentity, tmp_path: Path) -> None:
    identity.save(tmp_path / "keys")
    loaded = SiteIdentity.load(tmp_path / "keys")
    assert loaded.public_key_b64 == identity.public_key_b64
    assert loaded.keyid == identity.keyid
    sig = loaded.sign(b"hello")
    assert verify_signature(identity.public_key, sig, b"hello")
    published = (tmp_path / "keys" / PUBLIC_KEY_FILE).read_text()
    assert published == identity.public_key_b64 + "\n"
    assert sorted(p.name for p in (tmp_path / "keys").iterdir()) == sorted(
        [PRIVATE_KEY_FILE, PUBLIC_KEY_FILE]
    )  # no temporary files left behind


def test_private_key_is_0600_even_with_a_permissive_umask(identity: SiteIdentity,
                                                          tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        identity.save(tmp_path)
    finally:
        os.umask(old)
    assert _mode(tmp_path / PRIVATE_KEY_FILE) == 0o600
    assert (tmp_path / PRIVATE_KEY_FILE).read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")


def test_private_key_file_is_created_with_mode_0600(identity: SiteIdentity, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The file never exists with wider permissions: the mode is given to os.open itself."""
    created: list[tuple[str, int, int]] = []
    real_open = os.open

    def spy(path, flags, mode=0o777, *args, **kwargs):  # type: ignore[no-untyped-def]
        if flags & os.O_CREAT:
            created.append((str(path), flags, mode))
        return real_open(path, flags, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    identity.save(tmp_path)
    private = [c for c in created if PRIVATE_KEY_FILE in c[0]]
    assert len(private) == 1
    _, flags, mode = private[0]
    assert flags & os.O_EXCL and mode == 0o600


def test_save_never_overwrites_a_key(identity: SiteIdentity, tmp_path: Path) -> None:
    identity.save(tmp_path)
    before = (tmp_path / PRIVATE_KEY_FILE).read_bytes()
    with pytest.raises(ConflictError, match="already exists"):
        SiteIdentity.generate().save(tmp_path)
    assert (tmp_path / PRIVATE_KEY_FILE).read_bytes() == before
    assert SiteIdentity.load(tmp_path).keyid == identity.keyid


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660, 0o602])
def test_load_refuses_a_key_others_can_access(identity: SiteIdentity, tmp_path: Path,
                                              mode: int) -> None:
    identity.save(tmp_path)
    os.chmod(tmp_path / PRIVATE_KEY_FILE, mode)
    with pytest.raises(VerificationError, match="chmod 600") as err:
        SiteIdentity.load(tmp_path)
    assert f"{mode:04o}" in str(err.value)
    os.chmod(tmp_path / PRIVATE_KEY_FILE, 0o400)  # owner-only, even read-only, is fine
    assert SiteIdentity.load(tmp_path).keyid == identity.keyid


def test_load_refuses_missing_corrupt_and_mismatched_keys(identity: SiteIdentity,
                                                          tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no site key"):
        SiteIdentity.load(tmp_path)
    identity.save(tmp_path)
    (tmp_path / PUBLIC_KEY_FILE).write_text(SiteIdentity.generate().public_key_b64 + "\n")
    with pytest.raises(VerificationError, match="does not match"):
        SiteIdentity.load(tmp_path)
    (tmp_path / PUBLIC_KEY_FILE).unlink()
    (tmp_path / PRIVATE_KEY_FILE).write_bytes(b"not a key")
    with pytest.raises(InputError, match="PEM"):
        SiteIdentity.load(tmp_path)


def test_load_refuses_a_non_ed25519_key(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption())
    path = tmp_path / PRIVATE_KEY_FILE
    path.write_bytes(pem)
    path.chmod(0o600)
    with pytest.raises(VerificationError, match="not Ed25519"):
        SiteIdentity.load(tmp_path)


def test_keyid_is_a_truncated_sha256_of_the_raw_public_key(identity: SiteIdentity) -> None:
    raw = base64.b64decode(identity.public_key_b64)
    assert len(raw) == 32
    assert identity.keyid == hashlib.sha256(raw).hexdigest()[:32]
    assert keyid_for(identity.public_key) == identity.keyid
    assert identity.keyid != SiteIdentity.generate().keyid
    assert identity.keyid in repr(identity)


def test_load_public_key_round_trip(identity: SiteIdentity) -> None:
    key = load_public_key(identity.public_key_b64)
    assert public_key_b64(key) == identity.public_key_b64
    assert verify_signature(key, identity.sign(b"m"), b"m")
    assert not verify_signature(key, identity.sign(b"m"), b"n")


@pytest.mark.parametrize("make", [
    lambda raw: base64.b64encode(raw[:31]).decode(),          # too short
    lambda raw: base64.b64encode(raw + b"\x00").decode(),     # too long
    lambda raw: base64.b64encode(raw).decode().rstrip("="),   # missing padding
    lambda raw: base64.b64encode(raw).decode() + "\n",        # whitespace
    lambda raw: base64.urlsafe_b64encode(b"\xfb" * 32).decode(),  # URL-safe alphabet
    lambda raw: raw.hex(),                                    # hex, not base64
    lambda raw: raw,                                          # bytes, not text
])
def test_load_public_key_is_strict(identity: SiteIdentity, make: Callable[[bytes], Any]) -> None:
    raw = base64.b64decode(identity.public_key_b64)
    with pytest.raises(VerificationError):
        load_public_key(make(raw))


def test_verify_signature_refuses_wrong_lengths(identity: SiteIdentity) -> None:
    sig = identity.sign(b"m")
    assert not verify_signature(identity.public_key, sig[:63], b"m")
    assert not verify_signature(identity.public_key, sig + b"\x00", b"m")
    assert not verify_signature(identity.public_key, b"", b"m")
