"""Join requests, key rotations and multi-signature envelopes as sync.membership writes and reads them."""
from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta, timezone

import pytest

from hansa.core.errors import InputError, VerificationError
from hansa.sync.dsse import MAX_SIGNATURES, add_signature, sign_all, verify_envelope
from hansa.sync.keys import SiteIdentity
from hansa.sync.membership import (
    JOIN_REQUEST_TYPE,
    MAX_KEYS_PER_SITE,
    build_join_request,
    build_key_rotation,
    open_join_request,
    open_key_rotation,
    validate_public_keys,
)

GW = "https://gateway.example.org"
BOGUS = base64.b64encode(bytes(64)).decode()  # well-formed, verifies under no key


def test_a_join_request_round_trips_and_proves_every_key() -> None:
    keys = [SiteIdentity.generate(), SiteIdentity.generate()]
    envelope = build_join_request(keys, "site-a", "https://a.example.org/", GW)
    request = open_join_request(json.dumps(envelope).encode())
    assert (request.site_id, request.url, request.gateway_url) == ("site-a", "https://a.example.org", GW)
    assert request.public_keys == tuple(k.public_key_b64 for k in keys)
    one_missing = {**envelope, "signatures": envelope["signatures"][:1]}
    with pytest.raises(VerificationError, match="1 of 2 required"):
        open_join_request(one_missing)


def test_join_requests_expire() -> None:
    site = SiteIdentity.generate()
    issued = datetime(2026, 1, 1, tzinfo=timezone.utc)
    envelope = build_join_request([site], "site-a", "https://a.example.org", GW, issued)
    assert open_join_request(envelope, issued + timedelta(days=6)).site_id == "site-a"
    with pytest.raises(VerificationError, match="days ago"):
        open_join_request(envelope, issued + timedelta(days=8))
    with pytest.raises(VerificationError, match="future"):
        open_join_request(envelope, issued - timedelta(hours=1))


def test_a_rotation_is_verified_under_the_current_keys_before_it_is_read() -> None:
    old, new = SiteIdentity.generate(), SiteIdentity.generate()
    envelope = build_key_rotation(old, [old.public_key_b64], [new], "site-a")
    rotation = open_key_rotation(envelope, "site-a", [old.public_key_b64])
    assert rotation.public_keys == (new.public_key_b64,)
    with pytest.raises(VerificationError, match="0 of 1"):  # not signed by the keys the registry holds
        open_key_rotation(envelope, "site-a", [SiteIdentity.generate().public_key_b64])
    with pytest.raises(InputError, match="not one of the site's current keys"):
        build_key_rotation(new, [old.public_key_b64], [SiteIdentity.generate()], "site-a")
    with pytest.raises(InputError, match="nothing to rotate"):
        build_key_rotation(old, [old.public_key_b64], [old], "site-a")


def test_countersigning_adds_each_key_once() -> None:
    a, b = SiteIdentity.generate(), SiteIdentity.generate()
    envelope = sign_all(JOIN_REQUEST_TYPE, b"{}", [a, a])
    assert len(envelope["signatures"]) == 1
    envelope = add_signature(add_signature(envelope, b), b)
    envelope = add_signature({**envelope, "signatures": [{"keyid": a.keyid, "sig": BOGUS}, *envelope["signatures"]]}, a)
    assert len(envelope["signatures"]) == 3  # a bogus entry under a's keyid does not stop a's real signature
    assert verify_envelope(envelope, [a.public_key, b.public_key], {JOIN_REQUEST_TYPE}, threshold=2)[1] == b"{}"
    full = sign_all(JOIN_REQUEST_TYPE, b"{}", [SiteIdentity.generate() for _ in range(MAX_SIGNATURES)])
    with pytest.raises(InputError, match="at most"):
        add_signature(full, a)


def test_public_key_lists_are_deduplicated_and_bounded() -> None:
    key = SiteIdentity.generate().public_key_b64
    assert validate_public_keys([key, f" {key} "]) == (key,)
    with pytest.raises(InputError, match="at most"):
        validate_public_keys([SiteIdentity.generate().public_key_b64 for _ in range(MAX_KEYS_PER_SITE + 1)])
    with pytest.raises(InputError, match="list"):
        validate_public_keys({"k": key})
