"""DSSE envelopes: PAE exactly per the spec, and every way to tamper with an envelope refused."""
from __future__ import annotations

import base64
import copy
import json
from typing import Any, Callable

import pytest

from hansa.core.errors import VerificationError
from hansa.sync.dsse import MAX_SIGNATURES, pae, sign_envelope, verify_envelope
from hansa.sync.keys import SiteIdentity

T = "application/vnd.hansa.test+json; v=1"
OTHER_T = "application/vnd.hansa.other+json; v=1"
ALLOWED = {T, OTHER_T}
PAYLOAD = b'{"hello": "world!"}'  # 19 bytes: its base64 has padding


@pytest.fixture(scope="module")
def alice() -> SiteIdentity:
    return SiteIdentity.generate()


@pytest.fixture(scope="module")
def bob() -> SiteIdentity:
    return SiteIdentity.generate()


@pytest.fixture()
def env(alice: SiteIdentity) -> dict[str, Any]:
    return sign_envelope(T, PAYLOAD, alice)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_pae_matches_the_dsse_spec_example() -> None:
    # DSSE protocol.md: PAE("http://example.com/HelloWorld", "hello world")
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_pae_uses_byte_lengths_and_separates_fields() -> None:
    assert pae("", b"") == b"DSSEv1 0  0 "
    assert pae("\u00e9", b"\x00 ") == b"DSSEv1 2 \xc3\xa9 2 \x00 "  # 2 UTF-8 bytes, not 1 char
    # Moving bytes between type and body changes the encoding: no ambiguity to exploit.
    assert pae("a b", b"c") != pae("a", b"b c")
    assert pae("a", b"12 b") == b"DSSEv1 1 a 4 12 b"


def test_round_trip_from_object_and_from_bytes(alice: SiteIdentity, env: dict[str, Any]) -> None:
    assert env["payloadType"] == T
    assert env["signatures"][0]["keyid"] == alice.keyid
    assert verify_envelope(env, [alice.public_key], ALLOWED) == (T, PAYLOAD)
    assert verify_envelope(json.dumps(env).encode(), [alice.public_key], ALLOWED) == (T, PAYLOAD)
    assert verify_envelope(json.dumps(env), [alice.public_key], ALLOWED) == (T, PAYLOAD)


def test_payload_is_returned_unparsed(alice: SiteIdentity) -> None:
    """Verify-before-parse: the verifier hands back exact bytes, even ones no JSON parser takes."""
    weird = b"[" * 100_000 + b"\xff\x00NaN"
    env = sign_envelope(T, weird, alice)
    assert verify_envelope(env, [alice.public_key], ALLOWED) == (T, weird)


def test_tampered_payload_is_refused(alice: SiteIdentity, env: dict[str, Any]) -> None:
    env["payload"] = _b64(PAYLOAD.replace(b"world", b"WORLD"))
    with pytest.raises(VerificationError, match="signature"):
        verify_envelope(env, [alice.public_key], ALLOWED)


def test_tampered_type_is_refused_even_if_allowed(alice: SiteIdentity,
                                                  env: dict[str, Any]) -> None:
    env["payloadType"] = OTHER_T
    with pytest.raises(VerificationError, match="signature"):
        verify_envelope(env, [alice.public_key], ALLOWED)


def test_tampered_signature_is_refused(alice: SiteIdentity, env: dict[str, Any]) -> None:
    sig = bytearray(base64.b64decode(env["signatures"][0]["sig"]))
    for i in (0, 31, 32, 63):
        bad = copy.deepcopy(env)
        flipped = bytearray(sig)
        flipped[i] ^= 0x01
        bad["signatures"][0]["sig"] = _b64(bytes(flipped))
        with pytest.raises(VerificationError):
            verify_envelope(bad, [alice.public_key], ALLOWED)


def test_wrong_key_is_refused(bob: SiteIdentity, env: dict[str, Any]) -> None:
    with pytest.raises(VerificationError, match="0 of 1"):
        verify_envelope(env, [bob.public_key], ALLOWED)


def test_no_trusted_keys_is_refused(env: dict[str, Any]) -> None:
    with pytest.raises(VerificationError):
        verify_envelope(env, [], ALLOWED)


def test_keyid_is_only_a_hint(alice: SiteIdentity, bob: SiteIdentity,
                              env: dict[str, Any]) -> None:
    # A lying keyid on a good signature changes nothing...
    env["signatures"][0]["keyid"] = bob.keyid
    assert verify_envelope(env, [alice.public_key], ALLOWED) == (T, PAYLOAD)
    del env["signatures"][0]["keyid"]
    assert verify_envelope(env, [alice.public_key], ALLOWED) == (T, PAYLOAD)
    # ...and a trusted keyid on a signature by an untrusted key does not make it trusted.
    forged = sign_envelope(T, PAYLOAD, bob)
    forged["signatures"][0]["keyid"] = alice.keyid
    with pytest.raises(VerificationError):
        verify_envelope(forged, [alice.public_key], ALLOWED)


def test_unlisted_type_is_refused_even_when_signed(alice: SiteIdentity) -> None:
    env = sign_envelope("application/json", PAYLOAD, alice)
    with pytest.raises(VerificationError, match="not accepted"):
        verify_envelope(env, [alice.public_key], ALLOWED)


def test_non_ascii_type_is_refused_even_when_signed_and_listed(alice: SiteIdentity) -> None:
    t = "application/vnd.hansa.t\u00e9st+json"
    env = {"payloadType": t, "payload": _b64(PAYLOAD),
           "signatures": [{"keyid": alice.keyid, "sig": _b64(alice.sign(pae(t, PAYLOAD)))}]}
    with pytest.raises(VerificationError, match="ASCII"):
        verify_envelope(env, [alice.public_key], ALLOWED | {t})
    with pytest.raises(VerificationError, match="ASCII"):
        sign_envelope(t, PAYLOAD, alice)


def test_duplicate_signatures_and_keys_count_once(alice: SiteIdentity, bob: SiteIdentity,
                                                  env: dict[str, Any]) -> None:
    env["signatures"] = env["signatures"] * 3
    assert verify_envelope(env, [alice.public_key], ALLOWED) == (T, PAYLOAD)
    with pytest.raises(VerificationError, match="1 of 2"):
        verify_envelope(env, [alice.public_key, bob.public_key], ALLOWED, threshold=2)
    with pytest.raises(VerificationError):
        verify_envelope(env, [alice.public_key, alice.public_key], ALLOWED, threshold=2)
    env["signatures"].append(sign_envelope(T, PAYLOAD, bob)["signatures"][0])
    assert verify_envelope(env, [alice.public_key, bob.public_key], ALLOWED, threshold=2) == (
        T, PAYLOAD)


def test_many_bad_signatures_do_not_help(alice: SiteIdentity, bob: SiteIdentity) -> None:
    forged = sign_envelope(T, PAYLOAD, bob)
    forged["signatures"] = forged["signatures"] * MAX_SIGNATURES
    with pytest.raises(VerificationError):
        verify_envelope(forged, [alice.public_key], ALLOWED)
    forged["signatures"].append(forged["signatures"][0])
    with pytest.raises(VerificationError, match="more than"):
        verify_envelope(forged, [alice.public_key], ALLOWED)


@pytest.mark.parametrize("mutate", [
    lambda e: e.pop("payload"),
    lambda e: e.pop("signatures"),
    lambda e: e.pop("payloadType"),
    lambda e: e.update(extra=1),
    lambda e: e.update(signatures=[]),
    lambda e: e.update(signatures={}),
    lambda e: e.update(signatures=["sig"]),
    lambda e: e["signatures"][0].pop("sig"),
    lambda e: e["signatures"][0].update(sig=5),
    lambda e: e["signatures"][0].update(keyid=5),
    lambda e: e["signatures"][0].update(other="x"),
    lambda e: e.update(payload=e["payload"].rstrip("=")),
    lambda e: e.update(payload=" " + e["payload"]),
    lambda e: e.update(payload=e["payload"].replace("+", "-").replace("/", "_") + "-"),
    lambda e: e.update(payload=None),
    lambda e: e.update(payloadType=""),
    lambda e: e.update(payloadType=["x"]),
    lambda e: e["signatures"][0].update(sig=e["signatures"][0]["sig"] + "\n"),
])
def test_malformed_envelopes_are_verification_errors(alice: SiteIdentity, env: dict[str, Any],
                                                     mutate: Callable[[Any], Any]) -> None:
    mutate(env)
    with pytest.raises(VerificationError):
        verify_envelope(env, [alice.public_key], ALLOWED)


@pytest.mark.parametrize("raw", [
    b"", b"not json", b"[]", b'"str"', b"\xff\xfe{}", b"[" * 100_000,
    b'{"payloadType": "a", "payloadType": "b", "payload": "", "signatures": []}',
    b'{"payloadType": NaN}', b"{" + b'"a":' * 50_000,
])
def test_malformed_bytes_are_verification_errors(alice: SiteIdentity, raw: bytes) -> None:
    with pytest.raises(VerificationError):
        verify_envelope(raw, [alice.public_key], ALLOWED)


def test_duplicate_key_in_envelope_json_is_refused(alice: SiteIdentity,
                                                   env: dict[str, Any]) -> None:
    """Parsers keeping the first or the last duplicate would see different payloads."""
    text = json.dumps(env)
    decoy = _b64(b"decoy")
    doubled = text.replace('"payload":', f'"payload": "{decoy}", "payload":', 1)
    with pytest.raises(VerificationError, match="duplicate"):
        verify_envelope(doubled.encode(), [alice.public_key], ALLOWED)
