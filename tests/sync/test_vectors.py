"""Exact vector encoding: bit-for-bit round trips, and refusal of every malformed spelling."""
from __future__ import annotations

import base64
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from hansa.core.errors import InputError
from hansa.sync.vectors import b64decode_strict, decode_vector, encode_vector


def test_known_encoding_is_little_endian_float32() -> None:
    expected = base64.b64encode(struct.pack("<3f", 1.0, -2.5, 0.0)).decode()
    assert encode_vector(np.array([1.0, -2.5, 0.0], dtype=np.float32)) == expected
    assert encode_vector(np.array([1.0], dtype=np.float32)) == "AACAPw=="  # 0x3f800000, LE


def test_round_trip_is_bit_exact_for_edge_values() -> None:
    f32 = np.finfo(np.float32)
    v = np.array([-0.0, 0.0, f32.max, -f32.max, f32.tiny, f32.smallest_subnormal, 1 / 3],
                 dtype=np.float32)
    out = decode_vector(encode_vector(v), len(v))
    assert out.dtype == np.float32
    assert out.tobytes() == v.tobytes()  # includes the sign of -0.0 and subnormals
    assert out.flags.writeable


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float32, st.integers(1, 64), elements=st.floats(width=32, allow_nan=False,
                                                                     allow_infinity=False)))
def test_round_trip_property(v: np.ndarray) -> None:
    s = encode_vector(v)
    assert decode_vector(s, len(v)).tobytes() == v.astype("<f4").tobytes()


def test_float64_is_rounded_once_to_float32() -> None:
    v = np.array([0.1, 2.0 / 3.0])
    assert decode_vector(encode_vector(v), 2).tobytes() == v.astype(np.float32).tobytes()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_encode_refuses_non_finite(bad: float) -> None:
    with pytest.raises(InputError, match="NaN or infinite"):
        encode_vector(np.array([0.5, bad], dtype=np.float32))


def test_encode_refuses_values_beyond_float32() -> None:
    with pytest.raises(InputError, match="float32 range"):
        encode_vector(np.array([1e300]))


@pytest.mark.parametrize("shape_or_value", [np.zeros((2, 2), np.float32), np.zeros(0, np.float32),
                                            np.array(["a", "b"]), np.array([1 + 2j])])
def test_encode_refuses_wrong_shapes_and_types(shape_or_value: np.ndarray) -> None:
    with pytest.raises(InputError):
        encode_vector(shape_or_value)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_decode_refuses_non_finite(bad: float) -> None:
    raw = struct.pack("<2f", 1.0, bad)
    with pytest.raises(InputError, match="NaN or infinite"):
        decode_vector(base64.b64encode(raw).decode(), 2)


def test_decode_refuses_wrong_length() -> None:
    s = encode_vector(np.ones(4, dtype=np.float32))
    for dim in (3, 5):
        with pytest.raises(InputError, match="dimension"):
            decode_vector(s, dim)
    odd = base64.b64encode(b"\x00" * 5).decode()  # not a whole number of float32s
    with pytest.raises(InputError, match="bytes"):
        decode_vector(odd, 1)


@pytest.mark.parametrize("dim", [0, -1, True, 1.0, 10**6])
def test_decode_refuses_bad_dimension(dim: object) -> None:
    with pytest.raises(InputError, match="dimension"):
        decode_vector("AACAPw==", dim)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", [
    "AACAPw",        # missing padding
    "AACAPw==\n",    # trailing newline
    " AACAPw==",     # leading space
    "AAC APw==",     # inner space
    "AACAP*==",      # outside the alphabet
    "AACAP-==",      # URL-safe alphabet
    "AACAPx==",      # non-zero trailing bits: another spelling of the same bytes
    "AACAPw===",     # extra padding
    "ÄACAPw==",      # non-ASCII
])
def test_decode_refuses_non_canonical_base64(text: str) -> None:
    with pytest.raises(InputError, match="base64"):
        decode_vector(text, 1)


def test_decode_refuses_non_string() -> None:
    with pytest.raises(InputError, match="base64 string"):
        decode_vector(b"AACAPw==", 1)  # type: ignore[arg-type]


def test_strict_base64_accepts_exactly_the_canonical_form() -> None:
    for data in (b"", b"\x00", b"\xff\xfe", b"abc", bytes(range(256))):
        assert b64decode_strict(base64.b64encode(data).decode(), "x") == data
