"""Signed gateway <-> site calls (trust model guarantees 11 and 13) over real loopback HTTP.

Site side: the real site API of the session's LocalFederation refuses every request that is not
signed by the federation gateway, fresh, unseen, addressed to it and carrying the body it was
signed over. Gateway side: the HTTP transport marks a site "invalid" when its answer is unsigned,
signed by a key the registry does not hold for it, bound to another request or altered after signing.
SSRF: registry URLs that resolve to private, loopback or metadata addresses are refused before
any connection is attempted, and the connection goes to the address that was checked.
"""
from __future__ import annotations

import json
import os
import socket
import stat
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import requests
from flask import Flask, Response, request
from werkzeug.serving import make_server

from hansa.federation.local import LocalFederation
from hansa.gateway.client import ERROR, INVALID, OK, SiteCall, gateway_identity
from hansa.gateway.transport import HttpSiteTransport
from hansa.sync.httpsig import (
    RETRIEVE_COMPONENTS,
    SITE_HEADER,
    HttpMessage,
    SignatureRefused,
    keyring,
    sign_request,
    sign_response,
    verify_response,
)
from hansa.sync.keys import PRIVATE_KEY_FILE, SiteIdentity, load_public_key
from hansa.sync.wire import PartialAnswer, RetrieveRequest

QUESTION = RetrieveRequest(question="What does the government say about taxes?", top_k=3)
BODY = json.dumps(QUESTION.to_json()).encode()
STRANGER = SiteIdentity.generate()


# --- the real site refuses what the gateway did not sign ---------------------------------------------
def call_sites(sites: Any, request: Any, timeout_s: float, *, identity: SiteIdentity,
               allow_private_addresses: bool = False, **kw: Any) -> list[SiteCall]:
    """The gateway's signed HTTP transport, called as the engine calls it."""
    return HttpSiteTransport(identity, allow_private_addresses).call(sites, request, timeout_s, **kw)


@pytest.fixture(scope="module")
def site(federation: LocalFederation) -> dict[str, Any]:
    handle = federation.sites["govt"]
    return {
        "id": "govt",
        "url": handle.server.url,
        "key": SiteIdentity.load(handle.ctx.identity_dir).public_key_b64,
        "gateway": gateway_identity(federation.workdir / "gateway"),
        "other_url": federation.sites["clapnq"].server.url,
    }


def post_signed(site: dict[str, Any], *, body: bytes = BODY, sent: bytes | None = None, identity: SiteIdentity | None = None,
                now: float | None = None, addressed_to: str | None = None, target: str | None = None,
                headers: dict[str, str] | None = None) -> tuple[requests.Response, dict[str, str], str]:
    target_uri = target or f"{site['url']}/v1/retrieve"
    if headers is None:
        headers = {"Content-Type": "application/json", SITE_HEADER: addressed_to or site["id"]}
        headers.update(sign_request(identity or site["gateway"], "POST", target_uri, headers, body,
                                    components=RETRIEVE_COMPONENTS, now=now))
    resp = requests.post(f"{site['url']}/v1/retrieve", data=body if sent is None else sent, headers=headers, timeout=60)
    return resp, headers, target_uri


def refused(resp: requests.Response, message: str) -> None:
    assert resp.status_code == 401, resp.text
    assert message in resp.json()["error"]
    assert "Signature" not in resp.headers  # nothing is signed for a request that was not accepted


def test_the_site_answers_a_signed_request_with_a_bound_signed_answer(site: dict[str, Any]) -> None:
    resp, headers, target = post_signed(site)
    assert resp.status_code == 200, resp.text
    keys = keyring([load_public_key(site["key"])])
    verified = verify_response(200, resp.headers, resp.content, keys, HttpMessage.request("POST", target, headers))
    assert verified.covered[-1] == '"signature";req;key="hansa"'
    assert PartialAnswer.from_json(resp.json()).site_id == "govt"
    other_resp, other_headers, _ = post_signed(site)  # the same answer cannot pass for another request's
    with pytest.raises(SignatureRefused) as err:
        verify_response(200, resp.headers, resp.content, keys, HttpMessage.request("POST", target, other_headers))
    assert err.value.reason == "bad-signature" and other_resp.status_code == 200


def test_an_unsigned_request_is_refused(site: dict[str, Any]) -> None:
    resp, _, _ = post_signed(site, headers={"Content-Type": "application/json"})
    refused(resp, "not signed")


def test_a_replayed_request_is_refused(site: dict[str, Any]) -> None:
    first, headers, _ = post_signed(site)
    assert first.status_code == 200
    again, _, _ = post_signed(site, headers=headers)
    refused(again, "replayed")


def test_a_swapped_body_is_refused(site: dict[str, Any]) -> None:
    swapped = json.dumps({"question": "List every document you hold", "top_k": 50}).encode()
    resp, _, _ = post_signed(site, sent=swapped)
    refused(resp, "Content-Digest")


def test_a_stale_request_is_refused(site: dict[str, Any]) -> None:
    resp, _, _ = post_signed(site, now=time.time() - 600)
    refused(resp, "stale")


def test_a_request_signed_by_another_key_is_refused(site: dict[str, Any]) -> None:
    resp, _, _ = post_signed(site, identity=STRANGER)
    refused(resp, "not a key trusted")


def test_a_request_for_another_site_is_refused(site: dict[str, Any]) -> None:
    resp, _, _ = post_signed(site, addressed_to="clapnq")
    refused(resp, "addressed to site 'clapnq'")
    resp, _, _ = post_signed(site, target=f"{site['other_url']}/v1/retrieve")  # signed for the other URL
    refused(resp, "does not verify")


def test_health_stays_unsigned_and_open(site: dict[str, Any]) -> None:
    resp = requests.get(f"{site['url']}/v1/health", timeout=30)
    assert resp.status_code == 200 and resp.json()["site_id"] == "govt"


def test_the_gateway_key_is_created_once_private_and_given_to_every_site(federation: LocalFederation, tmp_path: Path) -> None:
    gw = gateway_identity(federation.workdir / "gateway")
    for handle in federation.sites.values():
        assert handle.ctx.cfg.site.gateway_public_key == gw.public_key_b64
    fresh = gateway_identity(tmp_path)
    assert stat.S_IMODE(os.stat(tmp_path / "keys" / PRIVATE_KEY_FILE).st_mode) == 0o600
    assert gateway_identity(tmp_path).public_key_b64 == fresh.public_key_b64


def test_call_sites_gets_a_verified_answer_from_the_real_site(site: dict[str, Any]) -> None:
    (call,) = call_sites([(site["id"], site["url"], [site["key"]])], QUESTION, 60.0, identity=site["gateway"],
                         allow_private_addresses=True)
    assert call.status == OK, call.error
    assert call.answer is not None and call.answer.site_id == "govt"
    (call,) = call_sites([(site["id"], site["url"], [STRANGER.public_key_b64])], QUESTION, 60.0,
                         identity=site["gateway"], allow_private_addresses=True)
    assert call.status == INVALID and "unknown-key" in call.error  # the registry holds another key


# --- the gateway refuses what the site did not sign ----------------------------------------------------
GATEWAY = SiteIdentity.generate()
SITE = SiteIdentity.generate()


def answer(site_id: str, text: str = "Taxes are due in April.") -> bytes:
    return json.dumps({"site_id": site_id, "answer": text,
                       "citations": [{"site_id": site_id, "doc_id": "d1", "title": "Taxes", "score": 0.9}],
                       "confidence": 0.7, "sentences": [[text, "d1"]]}).encode()


class FakeSites:
    """One loopback server; the first path segment picks how the "site" signs its answer."""

    def __init__(self) -> None:
        self.hosts: list[str] = []
        self.kept: tuple[bytes, dict[str, str]] | None = None
        app = Flask("fake-signing-sites")

        @app.post("/<behaviour>/v1/retrieve")
        def retrieve(behaviour: str) -> Response:
            self.hosts.append(request.headers.get("Host", ""))
            req = HttpMessage.request(request.method, request.url, request.headers)
            body = answer(behaviour)
            ct = {"Content-Type": "application/json"}
            if behaviour == "unsigned":
                return Response(body, headers=ct)
            if behaviour == "otherkey":
                return Response(body, headers={**ct, **sign_response(STRANGER, 200, ct, body, req)})
            if behaviour == "tampered":
                signed = sign_response(SITE, 200, ct, body, req)
                return Response(answer(behaviour, "Taxes were abolished."), headers={**ct, **signed})
            if behaviour == "replay":
                if self.kept is None:  # the first answer is genuine; later ones replay it
                    self.kept = (body, {**ct, **sign_response(SITE, 200, ct, body, req)})
                return Response(self.kept[0], headers=self.kept[1])
            return Response(body, headers={**ct, **sign_response(SITE, 200, ct, body, req)})

        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.port = self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, behaviour: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}/{behaviour}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def fakes() -> Iterator[FakeSites]:
    f = FakeSites()
    yield f
    f.close()


def call(url: str, site_id: str = "site", allow_private: bool = True, timeout_s: float = 5.0) -> Any:
    (res,) = call_sites([(site_id, url, [SITE.public_key_b64])], QUESTION, timeout_s, identity=GATEWAY,
                        allow_private_addresses=allow_private)
    return res


def test_a_properly_signed_answer_is_accepted(fakes: FakeSites) -> None:
    res = call(fakes.url("good"), "good")
    assert res.status == OK and res.answer is not None and res.answer.answer == "Taxes are due in April."


@pytest.mark.parametrize("behaviour, reason", [("unsigned", "unsigned"), ("otherkey", "unknown-key"),
                                               ("tampered", "digest")])
def test_unsigned_foreign_or_altered_answers_are_invalid(fakes: FakeSites, behaviour: str, reason: str) -> None:
    res = call(fakes.url(behaviour), behaviour)
    assert res.status == INVALID and res.answer is None
    assert f"response signature refused ({reason})" in res.error


def test_an_answer_bound_to_another_request_is_invalid(fakes: FakeSites) -> None:
    first = call(fakes.url("replay"), "replay")
    assert first.status == OK
    second = call(fakes.url("replay"), "replay")  # same bytes, same signature: but for the first question
    assert second.status == INVALID and "(bad-signature)" in second.error


# --- SSRF: refused before any connection; the checked address is the one connected to -----------------
class ConnectSpy:
    """Records every outgoing TCP connect made through socket.socket while installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.attempts: list[Any] = []
        spy = self

        class SpySocket(socket.socket):
            def connect(self, address: Any) -> None:
                spy.attempts.append(address)
                super().connect(address)

        monkeypatch.setattr(socket, "socket", SpySocket)


class Listener:
    """A bare TCP listener on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2)
        self.sock.close()


@pytest.fixture()
def listener() -> Iterator[Listener]:
    li = Listener()
    yield li
    li.close()


@pytest.mark.parametrize("url", ["http://10.0.0.1", "http://169.254.169.254/latest", "http://[fd00:ec2::254]",
                                 "http://[::ffff:169.254.169.254]", "http://[::1]:1", "http://192.168.1.1:8701"])
def test_private_and_metadata_urls_are_refused_without_connecting(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = ConnectSpy(monkeypatch)
    res = call(url, allow_private=False, timeout_s=3.0)
    assert res.status == ERROR and "refused" in res.error and res.bytes_in == 0
    assert spy.attempts == []


def test_a_name_resolving_to_loopback_is_refused_without_connecting(listener: Listener,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    spy = ConnectSpy(monkeypatch)
    res = call(f"http://localhost:{listener.port}", allow_private=False)
    assert res.status == ERROR and "loopback" in res.error and "refused" in res.error
    assert spy.attempts == [] and listener.accepted == 0


@pytest.mark.parametrize("url", ["http://169.254.169.254", "http://[fd00:ec2::254]:80", "http://169.254.10.1"])
def test_metadata_and_link_local_stay_refused_in_a_test_federation(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = ConnectSpy(monkeypatch)
    res = call(url, allow_private=True, timeout_s=3.0)
    assert res.status == ERROR and "never allowed" in res.error
    assert spy.attempts == []


def fake_dns(monkeypatch: pytest.MonkeyPatch, answers: dict[str, list[list[str]]]) -> dict[str, int]:
    """Resolve the given names to successive answers (one list per lookup; the last repeats)."""
    real = socket.getaddrinfo
    lookups = {name: 0 for name in answers}

    def getaddrinfo(host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if host not in answers:
            return real(host, port, *args, **kwargs)
        seq = answers[host]
        addrs = seq[min(lookups[host], len(seq) - 1)]
        lookups[host] += 1
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (a, int(port))) for a in addrs]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return lookups


def test_the_checked_address_is_pinned_for_the_connection(fakes: FakeSites, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rebinding name answers 127.0.0.1 first and 127.0.0.2 (where nothing listens) afterwards:
    the call resolves once, connects to the address it checked, and still says the name in Host."""
    lookups = fake_dns(monkeypatch, {"rebind.hansa.test": [["127.0.0.1"], ["127.0.0.2"]]})
    spy = ConnectSpy(monkeypatch)
    res = call(fakes.url("good", host="rebind.hansa.test"), "good")
    assert res.status == OK, res.error
    assert lookups["rebind.hansa.test"] == 1
    assert spy.attempts == [("127.0.0.1", fakes.port)]
    assert fakes.hosts[-1] == f"rebind.hansa.test:{fakes.port}"


def test_a_name_with_any_forbidden_address_is_refused(fakes: FakeSites, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_dns(monkeypatch, {"mixed.hansa.test": [["93.184.215.14", "10.1.2.3"]]})
    spy = ConnectSpy(monkeypatch)
    res = call("http://mixed.hansa.test", allow_private=False)
    assert res.status == ERROR and "10.1.2.3" in res.error and "refused" in res.error
    assert spy.attempts == []
