"""Join requests and key rotations as models of core/model.py: what the code before them signed still
opens and re-serializes to the signed bytes, and bad input is refused naming the field.

data/join-request.json and data/key-rotation.json were signed by the hand-written writers (commit
57aa0ab, before this conversion) at 2030-06-01T12:00Z: site-a at https://a.example.org/base asking
https://gw.example.org with keys a1 and a2, then rotating both to one new key (signed by a1);
data/keys.json holds a1's and a2's public keys."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from hansa.core.errors import InputError
from hansa.sync.dsse import unverified_payload
from hansa.sync.membership import (
    JOIN_REQUEST_TYPE,
    KEY_ROTATION_TYPE,
    JoinRequest,
    KeyRotation,
    open_join_request,
    open_key_rotation,
)
from hansa.sync.wire import canonical_json

DATA = Path(__file__).parent / "data"
T0 = datetime(2030, 6, 1, 12, tzinfo=timezone.utc)


def envelope(name: str) -> dict:
    return json.loads((DATA / name).read_bytes())


def test_a_join_request_signed_before_the_models_opens_and_keeps_its_bytes() -> None:
    env = envelope("join-request.json")
    request = open_join_request(env, now=T0)
    keys = json.loads((DATA / "keys.json").read_text())
    assert (request.site_id, request.url, request.gateway_url) == ("site-a", "https://a.example.org/base",
                                                                  "https://gw.example.org")
    assert request.public_keys == (keys["a1"], keys["a2"])
    assert canonical_json(request.to_json()) == unverified_payload(env, JOIN_REQUEST_TYPE)


def test_a_key_rotation_signed_before_the_models_opens_and_keeps_its_bytes() -> None:
    env = envelope("key-rotation.json")
    keys = json.loads((DATA / "keys.json").read_text())
    rotation = open_key_rotation(env, "site-a", [keys["a1"], keys["a2"]], now=T0)
    assert rotation.previous_keys == (keys["a1"], keys["a2"]) and len(rotation.public_keys) == 1
    assert canonical_json(rotation.to_json()) == unverified_payload(env, KEY_ROTATION_TYPE)


def request(**changes: object) -> dict:
    payload = json.loads(unverified_payload(envelope("join-request.json"), JOIN_REQUEST_TYPE))
    return {**payload, **changes}


@pytest.mark.parametrize("changes, message", [
    ({"nonce": "ABC"}, "join request: 'nonce': string should match pattern"),
    ({"public_keys": "k"}, "join request: 'public_keys' has the wrong type"),
    ({"issued_at": "2030-06-01 12:00"}, "join request: 'issued_at': timestamp '2030-06-01 12:00' must be RFC 3339"),
    ({"site_id": "a_b"}, "join request: 'site_id': invalid site id"),
    ({"url": 5}, "join request: 'url' has the wrong type"),
    ({"url": "https://a.example.org/base/"}, "site URL must be written as 'https://a.example.org/base'"),
    ({"role": "admin"}, "join request: unknown keys ['role']"),
])
def test_a_bad_join_request_is_refused_naming_the_field(changes: dict, message: str) -> None:
    with pytest.raises(InputError) as refused:
        JoinRequest.from_json(request(**changes))
    assert message in str(refused.value)


def test_a_join_request_missing_a_key_is_refused() -> None:
    payload = request()
    del payload["gateway_url"]
    with pytest.raises(InputError, match="join request: missing 'gateway_url'"):
        JoinRequest.from_json(payload)


def test_a_bad_key_rotation_is_refused_naming_the_field() -> None:
    payload = json.loads(unverified_payload(envelope("key-rotation.json"), KEY_ROTATION_TYPE))
    with pytest.raises(InputError, match=r"key rotation: 'previous_keys\[0\]' has the wrong type"):
        KeyRotation.from_json({**payload, "previous_keys": [1]})
    with pytest.raises(InputError, match="the new key set equals the current one"):
        KeyRotation.from_json({**payload, "public_keys": payload["previous_keys"]})
