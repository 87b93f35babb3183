"""Exact encodings for bytes that are signed: base64 text and embedding vectors.

Embeddings never travel as JSON floats: a decimal round trip can change the last bit, and a
signature is over bytes, not over numbers. A vector is the base64 of its little-endian float32
bytes, so what a site signs is bit for bit what the gateway stores. Base64 is decoded strictly and
must be canonical (the one string `b64encode` would produce), so one vector has one encoding and
nobody can smuggle a second spelling of the same bytes past a byte-level comparison.
"""
from __future__ import annotations

import base64
import binascii

import numpy as np

from hansa.core.errors import InputError

WIRE_DTYPE = np.dtype("<f4")
MAX_DIM = 65536


def b64encode(data: bytes) -> str:
    """Standard base64 with padding: the only spelling `b64decode_strict` accepts."""
    return base64.b64encode(data).decode("ascii")


def b64decode_strict(text: object, what: str) -> bytes:
    """Decode canonical standard base64 or raise InputError naming `what`.

    Refuses non-strings, characters outside the standard alphabet (including whitespace and the
    URL-safe `-`/`_`), wrong padding, and non-zero trailing bits."""
    if not isinstance(text, str):
        raise InputError(f"{what}: expected a base64 string, got {type(text).__name__}")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InputError(f"{what}: not valid standard base64 ({exc}); send padded base64") from exc
    if b64encode(raw) != text:
        raise InputError(f"{what}: base64 is not in canonical form; re-encode the original bytes")
    return raw


def encode_vector(v: np.ndarray) -> str:
    """Encode a 1-D real vector as base64 of little-endian float32.

    float32 input round-trips bit for bit; wider floats are rounded to float32 once, here."""
    arr = np.asarray(v)
    if arr.ndim != 1 or arr.size == 0:
        raise InputError(f"vector must be 1-dimensional and non-empty, got shape {arr.shape}")
    if arr.size > MAX_DIM:
        raise InputError(f"vector has {arr.size} values; at most {MAX_DIM} are supported")
    if arr.dtype.kind not in "fiu":
        raise InputError(f"vector must hold real numbers, got dtype {arr.dtype}")
    with np.errstate(over="ignore"):
        wire = arr.astype(WIRE_DTYPE)
    if not np.isfinite(wire).all():
        raise InputError("vector holds NaN or infinite values (or values beyond float32 range)")
    return b64encode(wire.tobytes())


def decode_vector(s: str, dim: int) -> np.ndarray:
    """Decode what `encode_vector` produced; the result is a fresh native float32 array."""
    if not isinstance(dim, int) or isinstance(dim, bool) or not 1 <= dim <= MAX_DIM:
        raise InputError(f"vector dimension must be an integer in 1..{MAX_DIM}, got {dim!r}")
    raw = b64decode_strict(s, "vector")
    if len(raw) != dim * WIRE_DTYPE.itemsize:
        raise InputError(
            f"vector has {len(raw)} bytes but dimension {dim} needs {dim * WIRE_DTYPE.itemsize}: "
            "the vector was made with another model or is truncated"
        )
    out = np.frombuffer(raw, dtype=WIRE_DTYPE).astype(np.float32)
    if not np.isfinite(out).all():
        raise InputError("vector holds NaN or infinite values")
    return out
