"""The two SiteTransports against the real sites of the `federation` fixture: the in-process one
must accept exactly what the HTTP one accepts — a signed, bound, capped, on-time answer from the
site that was asked — and refuse the rest just as HTTP does, without a socket."""
from __future__ import annotations

import time
from typing import Any, Callable, Iterable

import pytest

from hansa.gateway.client import ERROR, INVALID, OK, TIMEOUT, SiteTarget, gateway_identity
from hansa.gateway.transport import HttpSiteTransport, InProcessSiteTransport
from hansa.plugin.api import create_site_app
from hansa.sync.keys import SiteIdentity
from hansa.sync.wire import RetrieveRequest

REQUEST = RetrieveRequest(question="What does FEMA do after a disaster?", top_k=3)


@pytest.fixture(scope="module")
def apps(federation) -> dict[str, Any]:
    return {site_id: create_site_app(handle.ctx) for site_id, handle in federation.sites.items()}


@pytest.fixture(scope="module")
def identity(federation) -> SiteIdentity:
    return gateway_identity(federation.workdir / "gateway")  # the key every site trusts


def target(federation, site_id: str, keys_of: str | None = None) -> SiteTarget:
    rec = federation.registry.get(site_id)
    return SiteTarget(site_id, rec.url, federation.registry.get(keys_of or site_id).public_keys)


def wrap(app: Any, edit: Callable[[bytes], bytes] = lambda b: b, delay_s: float = 0.0) -> Callable[..., Iterable[bytes]]:
    """WSGI middleware between gateway and site: edits the response body, or answers late."""

    def middleware(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        time.sleep(delay_s)
        return [edit(b"".join(app(environ, start_response)))]

    return middleware


def test_in_process_and_http_get_the_same_verified_answer(federation, apps, identity) -> None:
    inproc = InProcessSiteTransport(identity, apps).call([target(federation, "govt")], REQUEST, 60.0)
    http = HttpSiteTransport(identity, allow_private_addresses=True).call([target(federation, "govt")], REQUEST, 60.0)
    (a,), (b,) = inproc, http
    assert a.status == b.status == OK, (a.error, b.error)
    assert a.answer == b.answer and a.answer is not None and a.answer.site_id == "govt"
    assert (a.bytes_out, a.bytes_in) == (b.bytes_out, b.bytes_in) and a.bytes_in > 0


def test_a_tampered_answer_is_invalid_in_process(federation, apps, identity) -> None:
    tampered = {**apps, "govt": wrap(apps["govt"], lambda b: b.replace(b'"answer": "', b'"answer": "Not ', 1)
                                     if b'"answer": "' in b else b.replace(b'"answer":"', b'"answer":"Not ', 1))}
    (call,) = InProcessSiteTransport(identity, tampered).call([target(federation, "govt")], REQUEST, 60.0)
    assert call.status == INVALID and "signature refused" in (call.error or "") and call.answer is None


def test_an_answer_signed_by_another_sites_key_is_invalid(federation, apps, identity) -> None:
    (call,) = InProcessSiteTransport(identity, apps).call([target(federation, "govt", keys_of="clapnq")], REQUEST, 60.0)
    assert call.status == INVALID and "signature refused" in (call.error or "")


def test_a_site_refuses_a_call_meant_for_another_site_or_signed_by_a_stranger(federation, apps, identity) -> None:
    swapped = {"govt": apps["clapnq"]}  # clapnq's app behind govt's id: the request names govt
    (misdirected,) = InProcessSiteTransport(identity, swapped).call([target(federation, "govt")], REQUEST, 60.0)
    assert misdirected.status == ERROR and "HTTP 4" in (misdirected.error or "")
    (stranger,) = InProcessSiteTransport(SiteIdentity.generate(), apps).call([target(federation, "govt")], REQUEST, 60.0)
    assert stranger.status == ERROR and any(f"HTTP {code}" in (stranger.error or "") for code in (401, 403))


def test_byte_cap_deadline_and_unknown_site(federation, apps, identity) -> None:
    transport = InProcessSiteTransport(identity, {**apps, "clapnq": wrap(apps["clapnq"], delay_s=3.0)})
    (capped,) = transport.call([target(federation, "govt")], REQUEST, 60.0, max_response_bytes=64)
    assert capped.status == INVALID and "64" in (capped.error or "")
    t0 = time.monotonic()
    (late,) = transport.call([target(federation, "clapnq")], REQUEST, 0.5)
    assert late.status == TIMEOUT and time.monotonic() - t0 < 2.5  # returned at its deadline, not the site's
    (missing,) = InProcessSiteTransport(identity, {}).call([target(federation, "govt")], REQUEST, 5.0)
    assert missing.status == ERROR and "no in-process app" in (missing.error or "")
