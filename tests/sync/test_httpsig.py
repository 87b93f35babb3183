"""RFC 9421 message signatures (Ed25519) and RFC 9530 Content-Digest: the RFC's own known-answer
vectors, every way a signed request or response can be refused, and sign -> verify properties."""
from __future__ import annotations

import base64
from decimal import Decimal
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from freezegun import freeze_time
from hypothesis import given, settings
from hypothesis import strategies as st

from hansa.core.errors import InputError
from hansa.sync import httpsig
from hansa.sync.httpsig import (
    HttpMessage,
    NonceCache,
    ReplayCacheFull,
    SignatureRefused,
    check_content_digest,
    content_digest,
    keyring,
    sign_request,
    sign_response,
    signature_base,
    verify_request,
    verify_response,
)
from hansa.sync.keys import SiteIdentity, keyid_for, public_key_raw, verify_signature
from hansa.sync.sfv import (
    MAX_INTEGER,
    InnerList,
    Item,
    SFError,
    Token,
    parse_dictionary,
    serialize_dictionary,
)

# --- RFC 9421 known-answer vectors ----------------------------------------------------------------
# RFC 9421 (HTTP Message Signatures, February 2024), https://www.rfc-editor.org/rfc/rfc9421
#  * Appendix B.1.4 "Example Ed25519 Test Key" (keyid test-key-ed25519): PEM and JWK below.
#  * Appendix B.2 "Test Cases", the test-request message (the body is 18 bytes; its sha-512
#    Content-Digest is printed there and checked below).
#  * Appendix B.2.6 "Signing a Request Using ed25519": covered components, signature base,
#    Signature-Input and Signature (label sig-b26) as printed (RFC 8792 line folding undone).
RFC_PRIVATE_PEM = b"""-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF
-----END PRIVATE KEY-----
"""
RFC_PUBLIC_PEM = b"""-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEAJrQLj5P/89iXES9+vFgrIy29clF9CC/oPPsw3c5D0bs=
-----END PUBLIC KEY-----
"""
RFC_JWK = {"kty": "OKP", "crv": "Ed25519", "kid": "test-key-ed25519",
           "d": "n4Ni-HpISpVObnQMW0wOhCKROaIKqKtW_2ZYb2p9KcU",
           "x": "JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs"}
RFC_TARGET = "https://example.com/foo?param=Value&Pet=dog"  # POST /foo?param=Value&Pet=dog, Host: example.com
RFC_BODY = b'{"hello": "world"}'
RFC_HEADERS = [
    ("Host", "example.com"),
    ("Date", "Tue, 20 Apr 2021 02:07:55 GMT"),
    ("Content-Type", "application/json"),
    ("Content-Digest", "sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:"),
    ("Content-Length", "18"),
]
RFC_B26_SIGNATURE_INPUT = ('sig-b26=("date" "@method" "@path" "@authority" "content-type" "content-length")'
                           ';created=1618884473;keyid="test-key-ed25519"')
RFC_B26_SIGNATURE = ("sig-b26=:wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw==:")
RFC_B26_BASE = (
    '"date": Tue, 20 Apr 2021 02:07:55 GMT\n'
    '"@method": POST\n'
    '"@path": /foo\n'
    '"@authority": example.com\n'
    '"content-type": application/json\n'
    '"content-length": 18\n'
    '"@signature-params": ("date" "@method" "@path" "@authority" "content-type" "content-length")'
    ';created=1618884473;keyid="test-key-ed25519"'
).encode("ascii")
# RFC 9530 (Digest Fields), Section 2: the sha-256 Content-Digest of the same 18-byte body.
RFC9530_SHA256 = "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:"


def _b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _rfc_message() -> HttpMessage:
    return HttpMessage.request("POST", RFC_TARGET, RFC_HEADERS)


def test_rfc9421_b14_key_pem_and_jwk_agree() -> None:
    private = serialization.load_pem_private_key(RFC_PRIVATE_PEM, password=None)
    public = serialization.load_pem_public_key(RFC_PUBLIC_PEM)
    assert isinstance(private, Ed25519PrivateKey) and isinstance(public, Ed25519PublicKey)
    raw_private = private.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                        serialization.NoEncryption())
    assert raw_private == _b64url(RFC_JWK["d"])
    assert public_key_raw(private.public_key()) == public_key_raw(public) == _b64url(RFC_JWK["x"])


def test_rfc9421_b26_signature_base_is_reproduced_byte_for_byte() -> None:
    member = parse_dictionary(RFC_B26_SIGNATURE_INPUT)["sig-b26"]
    assert isinstance(member, InnerList)
    assert signature_base(member.items, member.params, _rfc_message()) == RFC_B26_BASE
    assert serialize_dictionary({"sig-b26": member}) == RFC_B26_SIGNATURE_INPUT  # re-serialized exactly


def test_rfc9421_b26_signature_is_reproduced_and_verifies() -> None:
    identity = SiteIdentity(serialization.load_pem_private_key(RFC_PRIVATE_PEM, password=None))
    expected = parse_dictionary(RFC_B26_SIGNATURE)["sig-b26"]
    assert isinstance(expected, Item) and isinstance(expected.value, bytes)
    assert identity.sign(RFC_B26_BASE) == expected.value  # Ed25519 is deterministic: same bytes as the RFC
    public = serialization.load_pem_public_key(RFC_PUBLIC_PEM)
    assert verify_signature(public, expected.value, RFC_B26_BASE)
    assert not verify_signature(public, expected.value, RFC_B26_BASE.replace(b"/foo", b"/fop"))


def test_rfc9421_b26_message_fails_our_policy_as_a_downgrade() -> None:
    """The RFC's signature is valid, but covers neither @target-uri nor content-digest, carries no
    expires and no nonce: our verifier refuses it rather than accept less than it requires."""
    public = serialization.load_pem_public_key(RFC_PUBLIC_PEM)
    headers = [*RFC_HEADERS, ("Signature-Input", RFC_B26_SIGNATURE_INPUT), ("Signature", RFC_B26_SIGNATURE)]
    with pytest.raises(SignatureRefused) as err:
        verify_request("POST", RFC_TARGET, headers, RFC_BODY, {"test-key-ed25519": public}, NonceCache(),
                       label="sig-b26", now=1618884473)
    assert err.value.reason == httpsig.COVERAGE and '"@target-uri"' in str(err.value)
    assert err.value.http_status == 401


def test_rfc9530_content_digest() -> None:
    assert content_digest(RFC_BODY) == RFC9530_SHA256
    rfc_sha512 = dict(RFC_HEADERS)["Content-Digest"]
    check_content_digest(f"{RFC9530_SHA256}, {rfc_sha512}", RFC_BODY)  # both members checked, both match
    with pytest.raises(SignatureRefused, match="sha-256"):
        check_content_digest(rfc_sha512, RFC_BODY)  # algorithm fixed: sha-256 must be there
    with pytest.raises(SignatureRefused, match="sha-512"):
        check_content_digest(f"{RFC9530_SHA256}, sha-512=:{base64.b64encode(bytes(64)).decode()}:", RFC_BODY)


# --- our profile: helpers -------------------------------------------------------------------------
GATEWAY = SiteIdentity.generate()
SITE = SiteIdentity.generate()
STRANGER = SiteIdentity.generate()
TARGET = "https://site-a.example.org/v1/retrieve"
BODY = b'{"question": "Which river flows through Lyon?"}'
CT = {"Content-Type": "application/json"}
NOW = 1_750_000_000


def signed_request(body: bytes = BODY, identity: SiteIdentity = GATEWAY, now: float = NOW, **kw: Any) -> dict[str, str]:
    return {**CT, **sign_request(identity, "POST", TARGET, CT, body, now=now, **kw)}


def verify(headers: Any, body: bytes = BODY, *, now: float = NOW, nonces: NonceCache | None = None,
           method: str = "POST", target: str = TARGET, **kw: Any) -> httpsig.VerifiedSignature:
    return verify_request(method, target, headers, body, keyring([GATEWAY.public_key]), NonceCache() if nonces is None else nonces,
                          now=now, **kw)


def refused(reason: str, headers: Any, body: bytes = BODY, **kw: Any) -> str:
    with pytest.raises(SignatureRefused) as err:
        verify(headers, body, **kw)
    assert err.value.reason == reason, str(err.value)
    return str(err.value)


def forge(params: dict[str, Any], components: tuple[str, ...] = httpsig.REQUEST_COMPONENTS,
          identity: SiteIdentity = GATEWAY, body: bytes = BODY) -> dict[str, str]:
    """A request signed with arbitrary parameters: what an attacker or a sloppy client can send."""
    digest = content_digest(body)
    msg = HttpMessage.request("POST", TARGET, {**CT, "Content-Digest": digest})
    covered = tuple(Item(c) for c in components)
    sig = identity.sign(signature_base(covered, params, msg))
    return {**CT, "Content-Digest": digest,
            "Signature-Input": serialize_dictionary({"hansa": InnerList(covered, params)}),
            "Signature": serialize_dictionary({"hansa": Item(sig)})}


def good_params(**changes: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"created": NOW, "expires": NOW + 30, "nonce": "n" * 24, "keyid": GATEWAY.keyid,
                              "alg": "ed25519"}
    params.update(changes)
    return {k: v for k, v in params.items() if v is not None}


# --- requests: accepted --------------------------------------------------------------------------
def test_a_signed_request_verifies_once() -> None:
    headers = signed_request()
    assert set(headers) == {"Content-Type", "Content-Digest", "Signature-Input", "Signature"}
    assert headers["Content-Digest"] == content_digest(BODY)
    params = parse_dictionary(headers["Signature-Input"])["hansa"].params
    assert params["expires"] - params["created"] == httpsig.DEFAULT_TTL_S and params["alg"] == "ed25519"
    assert params["keyid"] == keyid_for(GATEWAY.public_key) and len(params["nonce"]) >= 16
    nonces = NonceCache()
    verified = verify(headers, nonces=nonces)
    assert verified.keyid == GATEWAY.keyid and verified.created == NOW and verified.nonce == params["nonce"]
    assert verified.covered == ('"@method"', '"@target-uri"', '"content-digest"', '"content-type"')
    with pytest.raises(SignatureRefused) as err:
        verify(headers, nonces=nonces, now=NOW + 1)
    assert err.value.reason == httpsig.REPLAYED


def test_target_uri_is_compared_normalized() -> None:
    headers = {**CT, **sign_request(GATEWAY, "POST", "HTTPS://Site-A.example.org:443/v1/retrieve", CT, BODY, now=NOW)}
    assert verify(headers).keyid == GATEWAY.keyid  # the site rebuilds https://site-a.example.org/v1/retrieve


def test_default_clock_and_freezegun() -> None:
    with freeze_time("2026-03-01 12:00:00") as frozen:
        headers = {**CT, **sign_request(GATEWAY, "POST", TARGET, CT, BODY)}
        verify_request("POST", TARGET, headers, BODY, keyring([GATEWAY.public_key]), NonceCache())
        frozen.tick(httpsig.DEFAULT_TTL_S + httpsig.CLOCK_SKEW_S + 1)
        with pytest.raises(SignatureRefused) as err:
            verify_request("POST", TARGET, headers, BODY, keyring([GATEWAY.public_key]), NonceCache())
        assert err.value.reason == httpsig.EXPIRED


# --- requests: refused ---------------------------------------------------------------------------
def test_unsigned_and_unlabelled_requests_are_refused() -> None:
    assert "not signed" in refused(httpsig.UNSIGNED, CT)
    headers = signed_request()
    assert "no signature labelled 'other'" in refused(httpsig.UNSIGNED, headers, label="other")
    only_input = {k: v for k, v in headers.items() if k != "Signature"}
    refused(httpsig.UNSIGNED, only_input)


def test_a_stripped_covered_header_is_refused() -> None:
    headers = signed_request()
    stripped = {k: v for k, v in headers.items() if k != "Content-Type"}
    assert '"content-type"' in refused(httpsig.MISSING_COMPONENT, stripped)
    no_digest = {k: v for k, v in headers.items() if k != "Content-Digest"}
    refused(httpsig.MISSING_COMPONENT, no_digest)


@pytest.mark.parametrize("dropped", httpsig.REQUEST_COMPONENTS)
def test_a_signature_covering_less_is_a_downgrade(dropped: str) -> None:
    components = tuple(c for c in httpsig.REQUEST_COMPONENTS if c != dropped)
    assert f'"{dropped}"' in refused(httpsig.COVERAGE, forge(good_params(), components))


def test_editing_signature_input_to_cover_less_breaks_the_signature() -> None:
    headers = signed_request()
    edited = headers["Signature-Input"].replace(' "content-type"', "")
    refused(httpsig.COVERAGE, {**headers, "Signature-Input": edited})
    refused(httpsig.BAD_SIGNATURE, {**headers, "Signature-Input": edited},
            required=("@method", "@target-uri", "content-digest"))


@pytest.mark.parametrize("alg", ["hmac-sha256", "rsa-pss-sha512", "ecdsa-p256-sha256", "ED25519", "none"])
def test_any_other_algorithm_is_refused(alg: str) -> None:
    assert "only 'ed25519'" in refused(httpsig.ALGORITHM, forge(good_params(alg=alg)))


def test_alg_as_a_token_is_refused_and_a_missing_alg_means_ed25519() -> None:
    refused(httpsig.ALGORITHM, forge(good_params(alg=Token("ed25519"))))
    assert verify(forge(good_params(alg=None))).keyid == GATEWAY.keyid


def test_time_window() -> None:
    headers = signed_request()
    assert "stale" in refused(httpsig.STALE, headers, now=NOW + 600)
    assert "expired" in refused(httpsig.EXPIRED, headers, now=NOW + 40)
    assert "future" in refused(httpsig.FUTURE, signed_request(now=NOW + 60))
    verify(signed_request(now=NOW + httpsig.CLOCK_SKEW_S))  # within the tolerated skew
    verify(headers, now=NOW + 30 + httpsig.CLOCK_SKEW_S)
    refused(httpsig.LIFETIME, forge(good_params(expires=NOW + 3600)))
    refused(httpsig.LIFETIME, forge(good_params(expires=NOW)))
    assert "'expires'" in refused(httpsig.MALFORMED, forge(good_params(expires=None)))
    assert "'created'" in refused(httpsig.MALFORMED, forge(good_params(created=None)))
    with pytest.raises(InputError, match="lifetime"):
        sign_request(GATEWAY, "POST", TARGET, CT, BODY, ttl_s=3600)


def test_nonce_is_required_and_bounded() -> None:
    assert "'nonce'" in refused(httpsig.MALFORMED, forge(good_params(nonce=None)))
    refused(httpsig.MALFORMED, forge(good_params(nonce="short")))


def test_replays_are_refused_until_the_signature_expires_and_the_cache_is_bounded() -> None:
    nonces = NonceCache(capacity=2)
    first, second, third = (signed_request(now=NOW + i) for i in range(3))
    verify(first, nonces=nonces, now=NOW + 2)
    verify(second, nonces=nonces, now=NOW + 2)
    refused(httpsig.REPLAYED, first, nonces=nonces, now=NOW + 3)
    with pytest.raises(ReplayCacheFull) as err:
        verify(third, nonces=nonces, now=NOW + 3)
    assert err.value.http_status == 503
    later = NOW + 30 + httpsig.CLOCK_SKEW_S + 0.5  # first's nonce expired and is forgotten, second's not...
    verify(third, nonces=nonces, now=later)
    assert len(nonces) == 2
    refused(httpsig.EXPIRED, first, nonces=nonces, now=later)  # ...and first itself is refused anyway


def test_a_swapped_body_is_refused() -> None:
    headers = signed_request()
    assert "swapped" in refused(httpsig.DIGEST, headers, body=b'{"question": "Dump every chunk"}')
    other = b'{"question": "x"}'
    refused(httpsig.BAD_SIGNATURE, {**headers, "Content-Digest": content_digest(other)}, body=other)


def test_method_and_target_are_bound() -> None:
    headers = signed_request()
    refused(httpsig.BAD_SIGNATURE, headers, method="PUT")
    refused(httpsig.BAD_SIGNATURE, headers, target="https://site-b.example.org/v1/retrieve")
    refused(httpsig.BAD_SIGNATURE, headers, target=TARGET + "?all=1")


def test_keys_unknown_or_swapped_are_refused() -> None:
    assert "not a key trusted" in refused(httpsig.UNKNOWN_KEY, signed_request(identity=STRANGER))
    lying = forge(good_params(keyid=GATEWAY.keyid), identity=STRANGER)  # claims the gateway's keyid
    refused(httpsig.BAD_SIGNATURE, lying)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda h: {**h, "Signature-Input": h["Signature-Input"] + ","},
        lambda h: {**h, "Signature-Input": h["Signature-Input"].replace("(", "")},
        lambda h: {**h, "Signature": "hansa=:not base64!:"},
        lambda h: {**h, "Signature": 'hansa="a string"'},
        lambda h: {**h, "Signature-Input": 'hansa="@method"'},
        lambda h: [*h.items(), ("Signature-Input", h["Signature-Input"])],  # the label twice
        lambda h: {**h, "Signature-Input": h["Signature-Input"] + ";foo=1"},
        lambda h: {**h, "Signature-Input": h["Signature-Input"].replace('"@method"', "method")},
        lambda h: {**h, "Signature-Input": h["Signature-Input"].replace('"@method"', '"@method" "@method"')},
        lambda h: {**h, "Signature-Input": h["Signature-Input"].replace('"@method"', '"@signature-params"')},
        lambda h: {**h, "Signature-Input": h["Signature-Input"].replace('"content-type"', '"Content-Type"')},
        lambda h: {**h, "Signature-Input": h["Signature-Input"].replace('"@method"', '"@method";bs')},
        lambda h: {**h, "Signature-Input": h["Signature-Input"].replace('"@method"', '"@method";req')},
        lambda h: {**h, "Signature-Input": h["Signature-Input"].replace('"@method"', '"@status"')},
        lambda h: {**h, "Content-Type": "application/json\r\nX-Injected: 1"},
    ],
)
def test_malformed_signature_fields_are_refused(mutate: Any) -> None:
    with pytest.raises(SignatureRefused) as err:
        verify(mutate(signed_request()), required=())
    assert err.value.reason == httpsig.MALFORMED


# --- responses -----------------------------------------------------------------------------------
def _request_message(headers: dict[str, str]) -> HttpMessage:
    return HttpMessage.request("POST", TARGET, headers)


ANSWER = b'{"site_id": "site-a", "answer": "The Rhone."}'


def test_a_response_is_bound_to_its_request() -> None:
    req_headers = signed_request()
    resp = {**CT, **sign_response(SITE, 200, CT, ANSWER, _request_message(req_headers), now=NOW)}
    inputs = parse_dictionary(resp["Signature-Input"])["hansa"]
    assert [c.value for c in inputs.items] == ["@status", "content-digest", "content-type", "signature"]
    assert inputs.items[-1].params == {"req": True, "key": "hansa"}
    keys = keyring([SITE.public_key])
    ok = verify_response(200, resp, ANSWER, keys, _request_message(req_headers), now=NOW)
    assert ok.keyid == SITE.keyid and ok.nonce is None

    def response_refused(reason: str, headers: Any, body: bytes = ANSWER, status: int = 200,
                         request: HttpMessage | None = None, keys_: Any = keys) -> None:
        with pytest.raises(SignatureRefused) as err:
            verify_response(status, headers, body, keys_, request or _request_message(req_headers), now=NOW)
        assert err.value.reason == reason, str(err.value)

    response_refused(httpsig.UNSIGNED, CT)
    response_refused(httpsig.BAD_SIGNATURE, resp, request=_request_message(signed_request()))  # another request
    response_refused(httpsig.DIGEST, resp, body=b'{"site_id": "site-a", "answer": "Forged."}')
    response_refused(httpsig.BAD_SIGNATURE, resp, status=500)
    response_refused(httpsig.UNKNOWN_KEY, resp, keys_=keyring([STRANGER.public_key]))
    by_stranger = {**CT, **sign_response(STRANGER, 200, CT, ANSWER, _request_message(req_headers), now=NOW)}
    response_refused(httpsig.UNKNOWN_KEY, by_stranger)
    # a response signed without the binding is a downgrade
    digest = content_digest(ANSWER)
    msg = HttpMessage.response(200, {**CT, "Content-Digest": digest})
    covered = tuple(Item(c) for c in httpsig.RESPONSE_COMPONENTS)
    params = {"created": NOW, "expires": NOW + 30, "keyid": SITE.keyid, "alg": "ed25519"}
    unbound = {**CT, "Content-Digest": digest,
               "Signature-Input": serialize_dictionary({"hansa": InnerList(covered, params)}),
               "Signature": serialize_dictionary({"hansa": Item(SITE.sign(signature_base(covered, params, msg)))})}
    response_refused(httpsig.COVERAGE, unbound)
    # the request the response claims to answer must itself carry the signature it binds to
    response_refused(httpsig.MISSING_COMPONENT, resp, request=_request_message(dict(CT)))


# --- properties ----------------------------------------------------------------------------------
_token = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1, max_size=8)
_segment = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-._~", min_size=1, max_size=12)
_visible = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(method=_token, host=_segment, segments=st.lists(_segment, max_size=4), query=st.one_of(st.none(), _segment),
       content_type=_visible, body=st.binary(max_size=2048), ttl=st.integers(1, httpsig.MAX_TTL_S),
       https=st.booleans(), port=st.one_of(st.none(), st.integers(1, 65535)))
def test_sign_verify_round_trip(method: str, host: str, segments: list[str], query: str | None, content_type: str,
                                body: bytes, ttl: int, https: bool, port: int | None) -> None:
    target = f"{'https' if https else 'http'}://{host}.example{'' if port is None else f':{port}'}/" + "/".join(segments)
    if query is not None:
        target += f"?{query}"
    headers = {"Content-Type": content_type, "Hansa-Site": host}
    signed = {**headers, **sign_request(GATEWAY, method, target, headers, body, now=NOW, ttl_s=ttl,
                                        components=httpsig.RETRIEVE_COMPONENTS)}
    keys = keyring([GATEWAY.public_key])
    verified = verify_request(method, target, signed, body, keys, NonceCache(), now=NOW + ttl,
                              required=httpsig.RETRIEVE_COMPONENTS)
    assert verified.expires == NOW + ttl
    tampered = body + b"\x00"
    with pytest.raises(SignatureRefused) as err:
        verify_request(method, target, signed, tampered, keys, NonceCache(), now=NOW)
    assert err.value.reason == httpsig.DIGEST
    resp = {"Content-Type": content_type, **sign_response(SITE, 200, {"Content-Type": content_type}, body,
                                                          HttpMessage.request(method, target, signed), now=NOW)}
    verify_response(200, resp, body, keyring([SITE.public_key]), HttpMessage.request(method, target, signed), now=NOW)


_sf_key = st.from_regex(r"[a-z*][a-z0-9_\-.*]{0,6}", fullmatch=True)
_sf_bare = st.one_of(
    st.booleans(),
    st.integers(-MAX_INTEGER, MAX_INTEGER),
    st.decimals(min_value=Decimal("-999999999999.999"), max_value=Decimal("999999999999.999"), places=3,
                allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=20),
    st.from_regex(r"[A-Za-z*][A-Za-z0-9!#$%&'*+\-.^_`|~:/]{0,8}", fullmatch=True).map(Token),
    st.binary(max_size=40),
)
_sf_params = st.dictionaries(_sf_key, _sf_bare, max_size=3)
_sf_item = st.builds(Item, _sf_bare, _sf_params)
_sf_member = st.one_of(_sf_item, st.builds(InnerList, st.lists(_sf_item, max_size=4).map(tuple), _sf_params))


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(_sf_key, _sf_member, min_size=1, max_size=4))
def test_structured_field_dictionaries_round_trip(members: dict[str, Any]) -> None:
    text = serialize_dictionary(members)
    parsed = parse_dictionary(text)
    assert serialize_dictionary(parsed) == text


@pytest.mark.parametrize("text", ['a=1, a=2', 'a;x;x', 'a=(1 2', 'a=:AAA:', 'a="\\n"', "a=1,", "A=1", "a=?2",
                                  "a=1234567890123456", "a=1.2345", "a=\u00e9"])
def test_structured_field_parser_is_strict(text: str) -> None:
    with pytest.raises(SFError):
        parse_dictionary(text)
