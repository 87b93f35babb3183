"""The signed HTTP transport (run_calls over call_one) against real HTTP servers on loopback that
misbehave in every way a site can.

The fake sites sign their answers (bound to the gateway's request) like real ones, so what each
test breaks is the one thing it names; signature refusals have their own tests (test_signed_calls).
"""
from __future__ import annotations

import json
import threading
import time
from typing import Any, Iterator

import pytest
from flask import Flask, Response, redirect, request
from werkzeug.serving import make_server

from hansa.gateway.client import ERROR, INVALID, OK, TIMEOUT, SiteCall
from hansa.gateway.transport import HttpSiteTransport
from hansa.core.jsonsafe import dumps
from hansa.sync.httpsig import HttpMessage, sign_response
from hansa.sync.keys import SiteIdentity
from hansa.sync.wire import PartialAnswer, RetrieveRequest

REQUEST = RetrieveRequest(question="Which river flows through Lyon?", top_k=5)
GATEWAY = SiteIdentity.generate()
SITE = SiteIdentity.generate()  # every fake site answers with this key


def call_sites(sites: Any, request: Any, timeout_s: float, *, identity: SiteIdentity,
               allow_private_addresses: bool = False, **kw: Any) -> list[SiteCall]:
    """The gateway's signed HTTP transport, called as the engine calls it."""
    return HttpSiteTransport(identity, allow_private_addresses).call(sites, request, timeout_s, **kw)


def answer_json(site_id: str, cite_site: str | None = None) -> dict:
    return {
        "site_id": site_id,
        "answer": "The Rhone flows through Lyon.",
        "citations": [{"site_id": cite_site or site_id, "doc_id": "d1", "title": "Lyon", "score": 0.9}],
        "confidence": 0.8,
        "sentences": [["The Rhone flows through Lyon.", "d1"]],
    }


class FakeSites:
    """One loopback server; the first path segment picks the behaviour (site URLs carry it)."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.release = threading.Event()
        self.slow_finished = threading.Event()
        app = Flask("fake-sites")

        @app.post("/<behaviour>/v1/retrieve")
        def retrieve(behaviour: str):
            self.bodies.append(request.get_data())
            if behaviour == "good":
                return Response(json.dumps(answer_json("good")), mimetype="application/json")
            if behaviour == "slow":
                self.release.wait(10)
                self.slow_finished.set()
                return Response(json.dumps(answer_json("slow")), mimetype="application/json")
            if behaviour == "trickle":  # each byte well within a socket timeout, the whole far past the deadline

                def drip() -> Iterator[bytes]:
                    for _ in range(40):
                        time.sleep(0.1)
                        yield b" "

                return Response(drip(), mimetype="application/json")
            if behaviour == "big":
                return Response(b" " * (2 * 1024 * 1024) + b"{}", mimetype="application/json")
            if behaviour == "bigstream":  # no Content-Length: the cap must hold while streaming

                def flood() -> Iterator[bytes]:
                    for _ in range(64):
                        yield b" " * 65536

                return Response(flood(), mimetype="application/json")
            if behaviour == "notjson":
                return Response(b"<html>hello</html>", mimetype="text/html")
            if behaviour == "deep":
                return Response(b"[" * 10000 + b"]" * 10000, mimetype="application/json")
            if behaviour == "wrongshape":
                return Response(json.dumps({"site_id": "wrongshape", "answer": 1}), mimetype="application/json")
            if behaviour == "spoof":
                return Response(json.dumps(answer_json("good")), mimetype="application/json")
            if behaviour == "foreigncite":
                return Response(json.dumps(answer_json("foreigncite", cite_site="good")), mimetype="application/json")
            if behaviour == "redirect":
                return redirect("/good/v1/retrieve", code=307)
            if behaviour == "broken":
                return Response(b'{"error": "boom"}', status=500, mimetype="application/json")
            return Response(b"{}", status=404)

        @app.after_request
        def sign(response: Response) -> Response:
            if response.is_streamed:  # the trickling and flooding sites never finish a body to sign
                return response
            req = HttpMessage.request(request.method, request.url, request.headers)
            response.headers.update(sign_response(SITE, response.status_code, response.headers, response.get_data(), req))
            return response

        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.base = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, behaviour: str) -> str:
        return f"{self.base}/{behaviour}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def sites() -> Iterator[FakeSites]:
    fake = FakeSites()
    yield fake
    fake.close()


def call(sites: FakeSites, *behaviours: str, timeout_s: float = 5.0, **kw):
    return call_sites([(b, sites.url(b), [SITE.public_key_b64]) for b in behaviours], REQUEST, timeout_s,
                      identity=GATEWAY, allow_private_addresses=True, **kw)


def test_a_good_site_answers_and_bytes_are_counted(sites: FakeSites) -> None:
    (res,) = call(sites, "good")
    assert res.status == OK and res.error is None
    assert res.answer == PartialAnswer.from_json(answer_json("good"))
    assert res.bytes_out == len(sites.bodies[-1]) and json.loads(sites.bodies[-1]) == REQUEST.to_json()
    assert res.bytes_in == len(json.dumps(answer_json("good")))
    assert res.latency_ms > 0
    trace = res.trace_json()
    assert set(trace) == {"site_id", "status", "latency_ms", "bytes_out", "bytes_in"}


def test_each_target_may_get_its_own_request(sites: FakeSites) -> None:
    """SCOUT-RAG's tiers ask one site globally and another locally in the same round."""
    local, wide = RetrieveRequest(question="where?", mode="local"), RetrieveRequest(question="where?", mode="global")
    before = len(sites.bodies)
    res = call_sites([("good", sites.url("good"), [SITE.public_key_b64])] * 2, [local, wide], 5.0,
                     identity=GATEWAY, allow_private_addresses=True)
    assert [r.status for r in res] == [OK, OK] and [r.bytes_out for r in res] == [len(dumps(local.to_json())),
                                                                                 len(dumps(wide.to_json()))]
    assert sorted(json.loads(b)["mode"] for b in sites.bodies[before:]) == ["global", "local"]


def test_a_slow_site_times_out_without_holding_up_the_others(sites: FakeSites) -> None:
    sites.release.clear()
    sites.slow_finished.clear()
    results = call(sites, "slow", "good", timeout_s=0.5)
    slow_was_still_running = not sites.slow_finished.is_set()
    sites.release.set()
    assert slow_was_still_running  # call_sites returned at its deadline, not when the site did
    assert [r.site_id for r in results] == ["slow", "good"]
    assert results[0].status == TIMEOUT and results[0].answer is None
    assert results[1].status == OK


def test_an_answer_that_arrives_while_others_are_awaited_is_handed_to_the_hook_and_stands_whatever_it_does(
        sites: FakeSites) -> None:
    # The gateway measures an early answer's sentences while it waits on slower sites
    # (gateway.query.fusion.measure_early): a hook slower than the deadline, or one that fails, must
    # neither hold the round past its deadline nor turn the answer it was given into a timeout.
    for behaviour in ("slow", "fail"):
        sites.release.clear()
        seen: list[str] = []

        def hook(call) -> None:  # type: ignore[no-untyped-def]
            seen.append(call.site_id)
            if behaviour == "fail":
                raise RuntimeError("the hook broke")
            time.sleep(1.5)

        t0 = time.monotonic()
        results = call(sites, "good", "slow", timeout_s=0.6, on_answer=hook)
        took = time.monotonic() - t0
        sites.release.set()
        assert seen == ["good"]
        assert [r.status for r in results] == [OK, TIMEOUT]
        assert took < 1.4, took  # returned at the deadline, not when the hook was done


def test_the_last_answer_of_a_round_gets_no_hook(sites: FakeSites) -> None:
    seen: list[str] = []
    results = call(sites, "good", "good", on_answer=lambda c: seen.append(c.site_id))
    assert [r.status for r in results] == [OK, OK]
    assert seen == ["good"]  # the first of the two came while the other was awaited; nothing awaited the last


def test_a_trickling_site_hits_the_wall_clock_deadline(sites: FakeSites) -> None:
    (res,) = call(sites, "trickle", timeout_s=0.8)
    assert res.status == TIMEOUT


@pytest.mark.parametrize("behaviour", ["big", "bigstream"])
def test_oversized_responses_are_cut_at_the_cap(sites: FakeSites, behaviour: str) -> None:
    (res,) = call(sites, behaviour, max_response_bytes=256 * 1024)
    assert res.status == INVALID and ("cap" in res.error or "larger than" in res.error)
    assert res.bytes_in <= 256 * 1024 + 65536


@pytest.mark.parametrize(
    "behaviour, message",
    [
        ("notjson", "invalid JSON"),
        ("deep", "nested deeper"),
        ("wrongshape", "partial answer"),
        ("spoof", "claims to come from site 'good'"),
        ("foreigncite", "cites documents of other site"),
    ],
)
def test_invalid_answers_are_reported_not_trusted(sites: FakeSites, behaviour: str, message: str) -> None:
    (res,) = call(sites, behaviour)
    assert res.status == INVALID and res.answer is None
    assert message in res.error


def test_redirects_are_refused(sites: FakeSites) -> None:
    n = len(sites.bodies)
    (res,) = call(sites, "redirect")
    assert res.status == ERROR and "redirect" in res.error
    assert len(sites.bodies) == n + 1  # the redirect target was never requested


def test_http_errors_and_unreachable_sites(sites: FakeSites) -> None:
    broken, gone = call_sites(
        [("broken", sites.url("broken"), [SITE.public_key_b64]), ("gone", "http://127.0.0.1:9/nothing", [SITE.public_key_b64])],
        REQUEST,
        5.0,
        identity=GATEWAY,
        allow_private_addresses=True,
    )
    assert broken.status == ERROR and "HTTP 500" in broken.error
    assert gone.status == ERROR and gone.answer is None


@pytest.mark.parametrize("url", ["http://127.0.0.1:1", "http://localhost:1", "http://169.254.169.254", "http://[::1]:1", "http://10.0.0.1"])
def test_private_and_metadata_addresses_are_refused_unless_allowed(sites: FakeSites, url: str) -> None:
    n = len(sites.bodies)
    (res,) = call_sites([("x", url, [SITE.public_key_b64])], REQUEST, 2.0, identity=GATEWAY)
    assert res.status == ERROR and "refused" in res.error
    (res,) = call_sites([("good", sites.url("good"), [SITE.public_key_b64])], REQUEST, 2.0, identity=GATEWAY)
    assert res.status == ERROR and "loopback" in res.error
    assert len(sites.bodies) == n  # nothing was sent


def test_no_sites_means_no_calls() -> None:
    assert call_sites([], REQUEST, 1.0, identity=GATEWAY) == []
