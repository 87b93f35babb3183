"""DSSE v1 envelopes (github.com/secure-systems-lab/dsse): sign exact bytes, verify before parse.

The signature covers PAE(payloadType, payload) — the type and the exact payload bytes, each
length-prefixed — so neither can be swapped or re-serialized. `verify_envelope` looks only at the
envelope's shape before the signature check; the payload is handed back as bytes, untouched, for
the caller to parse *after* it is known to come from a trusted key. `keyid` is a hint that we write
for humans and ignore on verification: every signature is tried against every trusted key, and
each trusted key counts at most once toward a threshold. Multi-signature documents (join
requests, key rotations, federation roots and registries) are signed with `sign_all` and
countersigned with `add_signature`.
"""
from __future__ import annotations

from typing import Any, Collection, Mapping, Sequence

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from hansa.core.errors import InputError, VerificationError
from hansa.core.jsonsafe import loads_strict
from hansa.sync.keys import SiteIdentity, public_key_raw, verify_signature
from hansa.sync.vectors import b64decode_strict, b64encode

MAX_SIGNATURES = 16
_ENVELOPE_KEYS = {"payloadType", "payload", "signatures"}
_SIGNATURE_KEYS = {"keyid", "sig"}


def pae(payload_type: str, payload: bytes) -> bytes:
    """Pre-Authentication Encoding: "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body.

    LEN is the byte length in ASCII decimal; the type is taken as UTF-8 bytes."""
    type_bytes = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(type_bytes), type_bytes, len(payload), payload)


def _check_type_text(payload_type: object) -> str:
    if not isinstance(payload_type, str) or not payload_type:
        raise VerificationError("envelope: payloadType must be a non-empty string")
    if not all(0x20 <= ord(ch) <= 0x7E for ch in payload_type):
        raise VerificationError("envelope: payloadType must be printable ASCII")
    return payload_type


def sign_envelope(payload_type: str, payload: bytes, identity: SiteIdentity) -> dict[str, Any]:
    _check_type_text(payload_type)
    if not isinstance(payload, (bytes, bytearray)):
        raise TypeError("payload must be bytes: DSSE signs exact bytes, never objects")
    return sign_all(payload_type, bytes(payload), [identity])


def sign_all(payload_type: str, payload: bytes, signers: Sequence[SiteIdentity]) -> dict[str, Any]:
    """A DSSE envelope signed by every distinct signer (multi-signature documents)."""
    if not signers:
        raise InputError("at least one key must sign")
    message = pae(payload_type, payload)
    seen: set[str] = set()
    signatures = []
    for identity in signers:
        if identity.keyid not in seen:
            seen.add(identity.keyid)
            signatures.append({"keyid": identity.keyid, "sig": b64encode(identity.sign(message))})
    if len(signatures) > MAX_SIGNATURES:
        raise InputError(f"at most {MAX_SIGNATURES} keys can sign one document")
    return {"payloadType": payload_type, "payload": b64encode(payload), "signatures": signatures}


def add_signature(envelope: Mapping[str, Any], identity: SiteIdentity) -> dict[str, Any]:
    """Countersign a multi-signature document (e.g. a registry draft passed from admin to admin).

    Signs the exact payload already in the envelope; a second signature by the same key is not
    added (and would count once anyway)."""
    if not isinstance(envelope, Mapping) or not isinstance(envelope.get("signatures"), list):
        raise InputError("expected a DSSE envelope with a signatures list")
    payload_type = envelope.get("payloadType")
    if not isinstance(payload_type, str):
        raise InputError("envelope: payloadType must be a string")
    payload = b64decode_strict(envelope.get("payload"), "payload")
    message = pae(payload_type, payload)
    signatures = list(envelope["signatures"])
    for entry in signatures:
        sig = entry.get("sig") if isinstance(entry, Mapping) else None
        try:
            sig_bytes = b64decode_strict(sig, "sig")
        except InputError:
            continue
        if verify_signature(identity.public_key, sig_bytes, message):  # already signed by this key
            return {"payloadType": payload_type, "payload": envelope["payload"], "signatures": signatures}
    if len(signatures) >= MAX_SIGNATURES:
        raise InputError(f"at most {MAX_SIGNATURES} keys can sign one document")
    signatures.append({"keyid": identity.keyid, "sig": b64encode(identity.sign(message))})
    return {"payloadType": payload_type, "payload": envelope["payload"], "signatures": signatures}


def _b64(text: object, what: str) -> bytes:
    try:
        return b64decode_strict(text, what)
    except InputError as exc:
        raise VerificationError(f"envelope: {exc}") from exc


def envelope_json(envelope: Any) -> Any:
    """An envelope given as JSON bytes or text, parsed strictly; any other value is handed back
    as is. Callers check the shape they need, with their own message."""
    if isinstance(envelope, (bytes, bytearray, str)):
        try:
            return loads_strict(bytes(envelope) if isinstance(envelope, bytearray) else envelope)
        except (InputError, ValueError, RecursionError) as exc:
            raise VerificationError(f"envelope is not valid JSON: {exc}") from exc
    return envelope


def _envelope_object(envelope: bytes | bytearray | str | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(envelope, Mapping):
        return envelope
    if isinstance(envelope, (bytes, bytearray, str)):
        obj = envelope_json(envelope)
        if not isinstance(obj, Mapping):
            raise VerificationError("envelope must be a JSON object")
        return obj
    raise VerificationError(
        f"envelope must be JSON bytes or an object, got {type(envelope).__name__}"
    )


def unverified_payload(envelope: Any, payload_type: str) -> bytes:
    """The payload bytes of a self-signed envelope, so the keys inside can be used to verify it.

    Only for documents that carry their own keys (join requests, a federation's first root); the
    caller must verify the envelope under those keys before trusting anything else in it."""
    envelope = envelope_json(envelope)
    if not isinstance(envelope, Mapping) or envelope.get("payloadType") != payload_type:
        raise VerificationError(f"expected a DSSE envelope of type {payload_type!r}")
    return _b64(envelope.get("payload"), "payload")


def _parse_shape(envelope: Any) -> tuple[str, bytes, list[bytes]]:
    obj = _envelope_object(envelope)
    keys = set(obj)
    if keys != _ENVELOPE_KEYS:
        raise VerificationError(
            f"envelope: expected exactly {sorted(_ENVELOPE_KEYS)}, got {sorted(map(str, keys))}"
        )
    payload_type = _check_type_text(obj["payloadType"])
    payload = _b64(obj["payload"], "payload")
    entries = obj["signatures"]
    if not isinstance(entries, list) or not entries:
        raise VerificationError("envelope: signatures must be a non-empty list")
    if len(entries) > MAX_SIGNATURES:
        raise VerificationError(f"envelope: more than {MAX_SIGNATURES} signatures")
    sigs: list[bytes] = []
    for entry in entries:
        shaped = isinstance(entry, Mapping) and "sig" in entry and set(entry) <= _SIGNATURE_KEYS
        if not shaped:
            raise VerificationError("envelope: each signature must be {'keyid'?: str, 'sig': str}")
        if "keyid" in entry and not isinstance(entry["keyid"], str):
            raise VerificationError("envelope: keyid must be a string")
        sigs.append(_b64(entry["sig"], "sig"))
    return payload_type, payload, sigs


def verify_envelope(
    envelope: bytes | str | Mapping[str, Any],
    trusted_keys: Sequence[Ed25519PublicKey],
    allowed_types: Collection[str],
    threshold: int = 1,
) -> tuple[str, bytes]:
    """Return (payloadType, payload bytes) once `threshold` distinct trusted keys signed them.

    Raises VerificationError for any malformed envelope, unlisted type or missing signature."""
    if not isinstance(threshold, int) or threshold < 1:
        raise ValueError("threshold must be a positive integer")
    payload_type, payload, sigs = _parse_shape(envelope)
    if payload_type not in allowed_types:
        raise VerificationError(f"envelope: payloadType {payload_type!r} is not accepted here")
    distinct: dict[bytes, Ed25519PublicKey] = {}
    for key in trusted_keys:
        distinct.setdefault(public_key_raw(key), key)
    if len(distinct) < threshold:
        raise VerificationError(
            f"envelope: {threshold} signature(s) required but only {len(distinct)} key(s) "
            "are trusted"
        )
    message = pae(payload_type, payload)
    signed_by: set[bytes] = set()
    for sig in sigs:
        for raw, key in distinct.items():
            if raw not in signed_by and verify_signature(key, sig, message):
                signed_by.add(raw)
                break
        if len(signed_by) >= threshold:
            return payload_type, payload
    raise VerificationError(
        f"envelope: {len(signed_by)} of {threshold} required signature(s) verify under a "
        "trusted key"
    )
