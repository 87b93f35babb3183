"""hansa's RFC 9421 signatures (sync/httpsig.py) against `http-message-signatures`, the Python
library that implements the same RFC: what one signs, the other verifies, both ways, for requests
and for responses bound to their request (`"signature";req;key="hansa"`, RFC 9421 §2.4). And the
library reproduces RFC 9421 Appendix B.2.6 as hansa does (tests/sync/test_httpsig.py).

The decision record docs/decisions/0001-http-message-signatures.md explains why hansa keeps its
own code; these tests are the guard that it speaks the same RFC as an independent implementation.

One difference is hansa's on purpose: `@target-uri` is signed in normalized form (scheme and host
lowercase, default port dropped), because the gateway signs the URL from its registry while the
site rebuilds it from `Host`. The library signs the URL as spelled; given an already normalized URL
both agree, and a resolver subclass that normalizes as hansa does makes the library agree on any.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import http_message_signatures as hms
import pytest
from cryptography.hazmat.primitives import serialization
from freezegun import freeze_time
from http_message_signatures import algorithms

from hansa.sync import httpsig
from hansa.sync.httpsig import (
    RETRIEVE_COMPONENTS,
    HttpMessage,
    NonceCache,
    SignatureRefused,
    keyring,
    normalize_target_uri,
    sign_request,
    sign_response,
    verify_request,
    verify_response,
)
from hansa.sync.keys import SiteIdentity

from .test_httpsig import (
    RFC_B26_BASE,
    RFC_B26_SIGNATURE,
    RFC_B26_SIGNATURE_INPUT,
    RFC_HEADERS,
    RFC_PRIVATE_PEM,
    RFC_PUBLIC_PEM,
    RFC_TARGET,
)

NOW = 1_700_000_000
URL = "https://site-a.example/v1/retrieve"
BODY = b'{"question": "who wrote the report?", "k": 8}'
ANSWER = b'{"passages": [{"id": "p1", "text": "..."}]}'
REQUEST_HEADERS = {"Content-Type": "application/json", "Hansa-Site": "site-a"}
RESPONSE_HEADERS = {"Content-Type": "application/json"}


@dataclass
class Request:  # the message interface the library reads (method, url, headers)
    method: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Response:  # status_code, headers and the request it answers
    status_code: int
    headers: dict[str, str]
    request: Request


class Keys(hms.HTTPSignatureKeyResolver):
    def __init__(self, *identities: SiteIdentity) -> None:
        self.identities = {i.keyid: i for i in identities}

    def resolve_public_key(self, key_id: str) -> Any:
        identity = self.identities.get(key_id)
        return None if identity is None else identity.public_key

    def resolve_private_key(self, key_id: str) -> Any:
        return self.identities[key_id]._private_key


def _at(ts: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ts, tz=dt.timezone.utc)


def _verifier(*identities: SiteIdentity,
              resolver: type = hms.HTTPSignatureComponentResolver) -> hms.HTTPMessageVerifier:
    return hms.HTTPMessageVerifier(signature_algorithm=algorithms.ED25519, key_resolver=Keys(*identities),
                                   component_resolver_class=resolver)


def _signer(identity: SiteIdentity) -> hms.HTTPMessageSigner:
    return hms.HTTPMessageSigner(signature_algorithm=algorithms.ED25519, key_resolver=Keys(identity))


def _hansa_signed_request(gateway: SiteIdentity, url: str = URL) -> Request:
    signed = sign_request(gateway, "POST", url, REQUEST_HEADERS, BODY, components=RETRIEVE_COMPONENTS, now=NOW)
    return Request("POST", url, {**REQUEST_HEADERS, **signed})


@pytest.fixture()
def gateway() -> SiteIdentity:
    return SiteIdentity.generate()


@pytest.fixture()
def site() -> SiteIdentity:
    return SiteIdentity.generate()


@freeze_time(dt.datetime.fromtimestamp(NOW + 2, tz=dt.timezone.utc))  # the library reads the clock
def test_a_request_signed_by_hansa_verifies_with_the_library(gateway: SiteIdentity) -> None:
    request = _hansa_signed_request(gateway)
    [result] = _verifier(gateway).verify(request, max_age=None, require_components=RETRIEVE_COMPONENTS, body=BODY)
    assert result.label == "hansa" and result.parameters["keyid"] == gateway.keyid
    assert result.parameters["alg"] == "ed25519" and result.nonce and result.body == BODY
    assert result.parameters["expires"] == NOW + httpsig.DEFAULT_TTL_S


def test_a_request_signed_by_the_library_verifies_with_hansa(gateway: SiteIdentity) -> None:
    request = Request("POST", URL, dict(REQUEST_HEADERS))
    _signer(gateway).sign(request, key_id=gateway.keyid, created=_at(NOW), expires=_at(NOW + 30),
                          nonce="Zm9vYmFyYmF6cXV4cXV1eA", label="hansa", body=BODY,
                          covered_component_ids=("@method", "@target-uri", "content-type", "hansa-site"))
    verified = verify_request("POST", URL, request.headers, BODY, keyring([gateway.public_key]), NonceCache(),
                              required=RETRIEVE_COMPONENTS, now=NOW + 1)
    assert verified.keyid == gateway.keyid and verified.nonce == "Zm9vYmFyYmF6cXV4cXV1eA"
    # ... and hansa's policy still holds against the library's output: the body is pinned
    with pytest.raises(SignatureRefused) as err:
        verify_request("POST", URL, request.headers, BODY + b" ", keyring([gateway.public_key]), NonceCache(),
                       required=RETRIEVE_COMPONENTS, now=NOW + 1)
    assert err.value.reason == httpsig.DIGEST


@freeze_time(dt.datetime.fromtimestamp(NOW + 2, tz=dt.timezone.utc))  # the library reads the clock
def test_a_response_signed_by_hansa_verifies_with_the_library(gateway: SiteIdentity, site: SiteIdentity) -> None:
    request = _hansa_signed_request(gateway)
    signed = sign_response(site, 200, RESPONSE_HEADERS, ANSWER,
                           HttpMessage.request("POST", URL, request.headers), now=NOW + 1)
    assert 'signature";req;key="hansa"' in signed["Signature-Input"]
    response = Response(200, {**RESPONSE_HEADERS, **signed}, request)
    required = ("@status", "content-digest", "content-type", '"signature";req;key="hansa"')
    [result] = _verifier(site).verify(response, max_age=None, require_components=required, body=ANSWER)
    assert result.covered_components['"signature";req;key="hansa"'] == request.headers["Signature"].split("=", 1)[1]
    # bound to its request: the same response to another request does not verify
    other = _hansa_signed_request(gateway)
    with pytest.raises(hms.InvalidSignature):
        _verifier(site).verify(Response(200, response.headers, other), max_age=None, body=ANSWER)


def test_a_response_signed_by_the_library_verifies_with_hansa(gateway: SiteIdentity, site: SiteIdentity) -> None:
    request = _hansa_signed_request(gateway)
    response = Response(200, dict(RESPONSE_HEADERS), request)
    _signer(site).sign(response, key_id=site.keyid, created=_at(NOW + 1), expires=_at(NOW + 31), label="hansa",
                       body=ANSWER, covered_component_ids=("@status", "content-type", '"signature";req;key="hansa"'))
    original = HttpMessage.request("POST", URL, request.headers)
    verified = verify_response(200, response.headers, ANSWER, keyring([site.public_key]), original, now=NOW + 2)
    assert verified.keyid == site.keyid
    with pytest.raises(SignatureRefused) as err:  # bound: hansa refuses it as an answer to another question
        other = HttpMessage.request("POST", URL, _hansa_signed_request(gateway).headers)
        verify_response(200, response.headers, ANSWER, keyring([site.public_key]), other, now=NOW + 2)
    assert err.value.reason == httpsig.BAD_SIGNATURE


class NormalizingResolver(hms.HTTPSignatureComponentResolver):
    """hansa's `@target-uri` normalization, as the library's documented extension point."""

    def get_target_uri(self) -> str:
        return normalize_target_uri(self.message.url)


@freeze_time(dt.datetime.fromtimestamp(NOW + 2, tz=dt.timezone.utc))  # the library reads the clock
def test_target_uri_normalization_is_hansas_and_the_library_can_be_taught_it(gateway: SiteIdentity) -> None:
    spelled = "HTTPS://Site-A.example:443/v1/retrieve"
    request = _hansa_signed_request(gateway, spelled)  # hansa signs https://site-a.example/v1/retrieve
    with pytest.raises(hms.InvalidSignature):
        _verifier(gateway).verify(request, max_age=None)  # the library signs the URL as spelled
    [result] = _verifier(gateway, resolver=NormalizingResolver).verify(request, max_age=None, body=BODY)
    assert result.covered_components['"@target-uri"'] == URL


@freeze_time(dt.datetime.fromtimestamp(NOW + 2, tz=dt.timezone.utc))  # the library reads the clock
def test_the_library_verifies_with_one_fixed_algorithm(gateway: SiteIdentity) -> None:
    """Like hansa: the verifier is configured with Ed25519 and an `alg` naming anything else is refused."""
    request = _hansa_signed_request(gateway)
    request.headers["Signature-Input"] = request.headers["Signature-Input"].replace('"ed25519"', '"hmac-sha256"')
    with pytest.raises(hms.InvalidSignature, match="algorithm"):
        _verifier(gateway).verify(request, max_age=None)


def test_the_library_reproduces_rfc9421_b26() -> None:
    identity = SiteIdentity(serialization.load_pem_private_key(RFC_PRIVATE_PEM, password=None))
    request = Request("POST", RFC_TARGET, dict(RFC_HEADERS))
    signer = hms.HTTPMessageSigner(signature_algorithm=algorithms.ED25519,
                                   key_resolver=hms.MappingKeyResolver(public_keys={}, private_keys={
                                       "test-key-ed25519": identity._private_key}))
    covered = ("date", "@method", "@path", "@authority", "content-type", "content-length")
    prepared = signer.prepare(request, key_id="test-key-ed25519", created=_at(1618884473), include_alg=False,
                              label="sig-b26", covered_component_ids=covered, use_existing_digest=True)
    assert prepared.signature_base == RFC_B26_BASE
    signer.sign(request, key_id="test-key-ed25519", created=_at(1618884473), include_alg=False, label="sig-b26",
                covered_component_ids=covered, use_existing_digest=True)
    assert request.headers["Signature-Input"] == RFC_B26_SIGNATURE_INPUT
    assert request.headers["Signature"] == RFC_B26_SIGNATURE  # Ed25519 is deterministic: the RFC's bytes
    public = serialization.load_pem_public_key(RFC_PUBLIC_PEM)
    verifier = hms.HTTPMessageVerifier(signature_algorithm=algorithms.ED25519, key_resolver=hms.MappingKeyResolver(
        public_keys={"test-key-ed25519": public}, private_keys={}))
    [result] = verifier.verify(request, max_age=None)
    assert result.label == "sig-b26"
