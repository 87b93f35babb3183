"""Ed25519 identities: a site's signing key on disk, and public keys as the registry enrolls them.

The private key is the site's whole authority over its namespace, so it is written with mode 0600
from the first byte (a temporary file created O_EXCL with 0600, then hard-linked into place, so a
crash never leaves a half-written key and an existing key is never overwritten), and a key file
that group or others can read is refused on load rather than silently used.

Public keys are exchanged as base64 of their raw 32 bytes; `keyid` is a short hash of those bytes,
a hint for humans and logs only — verification never trusts it (see sync.dsse).
"""
from __future__ import annotations

import hashlib
import os
import secrets
import stat
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from hansa.core.errors import ConflictError, InputError, VerificationError
from hansa.core.files import fsync_dir
from hansa.sync.vectors import b64decode_strict, b64encode

PRIVATE_KEY_FILE = "site-ed25519.pem"
PUBLIC_KEY_FILE = "site-ed25519.pub"  # one line: base64 of the raw public key, as enrolled
PUBLIC_KEY_BYTES = 32
SIGNATURE_BYTES = 64
_MAX_KEY_FILE_BYTES = 64 * 1024


def public_key_raw(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def public_key_b64(key: Ed25519PublicKey) -> str:
    return b64encode(public_key_raw(key))


def keyid_for(key: Ed25519PublicKey) -> str:
    """First 32 hex characters of sha256(raw public key): stable, short, and only ever a hint."""
    return hashlib.sha256(public_key_raw(key)).hexdigest()[:32]


def load_public_key(b64: str) -> Ed25519PublicKey:
    """Parse an enrolled public key: canonical base64 of exactly 32 raw bytes, nothing else."""
    try:
        raw = b64decode_strict(b64, "public key")
    except InputError as exc:
        raise VerificationError(str(exc)) from exc
    if len(raw) != PUBLIC_KEY_BYTES:
        raise VerificationError(
            f"public key must be {PUBLIC_KEY_BYTES} raw bytes (Ed25519), got {len(raw)}: "
            "enroll the site's `public_key_b64`, not a PEM or DER encoding"
        )
    try:
        return Ed25519PublicKey.from_public_bytes(raw)
    except ValueError as exc:
        raise VerificationError(f"public key is not a valid Ed25519 point: {exc}") from exc


def verify_signature(key: Ed25519PublicKey, signature: bytes, data: bytes) -> bool:
    """The one place a signature is checked; strict RFC 8032 (S < L, canonical R) via OpenSSL."""
    if not isinstance(key, Ed25519PublicKey):
        raise TypeError(f"expected an Ed25519PublicKey, got {type(key).__name__}")
    if len(signature) != SIGNATURE_BYTES:
        return False
    try:
        key.verify(signature, data)
    except InvalidSignature:
        return False
    return True


class SiteIdentity:
    """A site's Ed25519 signing key."""

    def __init__(self, private_key: Ed25519PrivateKey) -> None:
        if not isinstance(private_key, Ed25519PrivateKey):
            raise TypeError(f"expected an Ed25519PrivateKey, got {type(private_key).__name__}")
        self._private_key = private_key
        self.public_key: Ed25519PublicKey = private_key.public_key()

    @classmethod
    def generate(cls) -> "SiteIdentity":
        return cls(Ed25519PrivateKey.generate())

    @property
    def public_key_b64(self) -> str:
        return public_key_b64(self.public_key)

    @property
    def keyid(self) -> str:
        return keyid_for(self.public_key)

    def sign(self, data: bytes) -> bytes:
        return self._private_key.sign(data)

    def __repr__(self) -> str:
        return f"SiteIdentity(keyid={self.keyid!r})"

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write the private key (PEM, 0600) and public key beside it; never overwrite a key."""
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        private_path, public_path = folder / PRIVATE_KEY_FILE, folder / PUBLIC_KEY_FILE
        for path in (private_path, public_path):
            if os.path.lexists(path):
                raise ConflictError(
                    f"{path} already exists: a site keeps its identity. Load it, or move the old "
                    "key away first (and enroll the new public key) to create another"
                )
        pem = self._private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        _write_new_file(private_path, pem, 0o600)
        try:
            _write_new_file(public_path, (self.public_key_b64 + "\n").encode("ascii"), 0o644)
        except BaseException:
            private_path.unlink(missing_ok=True)
            raise
        fsync_dir(folder)
        return private_path

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> "SiteIdentity":
        """Read the key `save` wrote; refuse it if group/others can access it or it mismatches."""
        folder = Path(directory)
        private_path = folder / PRIVATE_KEY_FILE
        try:
            fd = os.open(private_path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError as exc:
            raise InputError(
                f"no site key at {private_path}: create one with `SiteIdentity.generate().save()`"
            ) from exc
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise InputError(f"{private_path} is not a regular file")
            if info.st_mode & 0o077:
                raise VerificationError(
                    f"private key {private_path} is accessible by group or others "
                    f"(mode {stat.S_IMODE(info.st_mode):04o}); run `chmod 600 {private_path}` "
                    "and consider the key exposed if others could log in"
                )
            data = os.read(fd, _MAX_KEY_FILE_BYTES + 1)
        finally:
            os.close(fd)
        if len(data) > _MAX_KEY_FILE_BYTES:
            raise InputError(f"{private_path} is too large to be an Ed25519 PEM key")
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
            raise InputError(
                f"{private_path} is not an unencrypted PEM private key ({exc})"
            ) from exc
        if not isinstance(key, Ed25519PrivateKey):
            raise VerificationError(f"{private_path} holds a {type(key).__name__}, not Ed25519")
        identity = cls(key)
        public_path = folder / PUBLIC_KEY_FILE
        if public_path.exists():
            written = public_path.read_text(encoding="ascii", errors="replace").strip()
            if written != identity.public_key_b64:
                raise VerificationError(
                    f"{public_path} does not match {private_path}: one of them was replaced; "
                    "restore the pair or regenerate and re-enroll"
                )
        return identity


def _write_new_file(path: Path, data: bytes, mode: int) -> None:
    """Create `path` with `data` atomically and without clobbering; the mode holds from creation."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(tmp, flags | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        try:
            os.fchmod(fd, mode)  # the umask may only have narrowed it; make it exact
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError as exc:
            raise ConflictError(
                f"{path} appeared while writing it; nothing was overwritten"
            ) from exc
    finally:
        tmp.unlink(missing_ok=True)
