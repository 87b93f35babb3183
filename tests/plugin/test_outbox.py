"""The site's outbox against a real gateway behind a real, flaky loopback HTTP server.

The gateway is the real Flask app (Milvus Lite, real registry); in front of it a loopback server
drops connections, answers 503/429, or lets the gateway process a publication and then drops the
answer. Each test checks both sides: what the gateway holds and what the site recorded."""
from __future__ import annotations

import base64
import json
import random
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest
from click.testing import CliRunner

from hansa.adapters.vector.milvus import MilvusVectorStore
from hansa.cli import main
from hansa.core.config import GatewayConfig
from hansa.core.errors import BackendError
from hansa.gateway.http.app import create_gateway_app
from hansa.gateway.service import Gateway
from hansa.gateway.trust import admin
from hansa.gateway.trust.registry import SiteRegistry
from hansa.plugin import publish as publish_module
from hansa.plugin.install import load_identity
from hansa.plugin.outbox import Outbox, RetryPolicy
from hansa.plugin.publish import publish_summaries, read_state, resend_pending
from hansa.plugin.site import SiteContext

FAST = RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.05)


class FlakyGateway:
    """A loopback HTTP server in front of the gateway app; `modes` scripts the next requests:
    "drop" (close without answering), "503"/"429" (answer that), "lost" (the gateway processes
    the request, then the connection drops), anything else passes through."""

    def __init__(self, service: Gateway) -> None:
        self.service = service
        self.app = create_gateway_app(service)
        self.client = self.app.test_client()
        self.modes: list[str] = []
        self.log: list[tuple[str, bytes, int | None]] = []  # (mode, body, gateway status)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                mode = proxy.modes.pop(0) if proxy.modes else "pass"
                if mode == "drop":
                    proxy.log.append((mode, body, None))
                    self.close_connection = True
                    return
                if mode in ("503", "429"):
                    proxy.log.append((mode, body, None))
                    self._answer(int(mode), b'{"error": "busy", "kind": "Unavailable"}', {"Retry-After": "0"})
                    return
                resp = proxy.client.post(self.path, data=body, content_type="application/json")
                proxy.log.append((mode, body, resp.status_code))
                if mode == "lost":
                    self.close_connection = True
                    return
                self._answer(resp.status_code, resp.get_data(), {})

            def _answer(self, status: int, data: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def sequences(self) -> list[int]:
        return [payload(body)["sequence"] for _, body, _ in self.log]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def payload(body: bytes) -> dict[str, Any]:
    return json.loads(base64.b64decode(json.loads(body)["payload"]))


@pytest.fixture(scope="module")
def gateway(built_site: SiteContext, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FlakyGateway]:
    root = tmp_path_factory.mktemp("outbox-gateway")
    store = MilvusVectorStore(str(root / "gw.db"))
    registry = SiteRegistry(root / "gateway" / "registry.json")
    admin.enroll(registry, "acme", "http://127.0.0.1:9/none", [load_identity(built_site).public_key_b64])
    service = Gateway.open(GatewayConfig(publish_burst=1000, max_request_bytes=4 * 1024 * 1024),
                           embedder=built_site.embedder, vector_store=store, registry=registry)
    gw = FlakyGateway(service)
    yield gw
    gw.close()
    service.close()
    store.close()


@pytest.fixture(autouse=True)
def fresh(gateway: FlakyGateway, built_site: SiteContext) -> Iterator[None]:
    """Every test starts with an empty outbox, no scripted failures and an empty request log."""
    gateway.modes, gateway.log = [], []
    yield
    outbox = Outbox(built_site.cfg.home)
    for entry in outbox.pending():
        outbox.remove(entry)


def start_from(ctx: SiteContext, gateway: FlakyGateway) -> int:
    """Publish once so the gateway and the site agree; returns the sequence both hold."""
    publish_summaries(ctx, gateway_url=gateway.url, retry=FAST)
    gateway.log = []
    sequence = held(gateway)
    assert sequence is not None and sequence == accepted(ctx)
    return sequence


def held(gateway: FlakyGateway) -> int | None:
    current = gateway.service.index.current("acme")
    return None if current is None else current.sequence


def accepted(ctx: SiteContext) -> int | None:
    head = read_state(ctx).head()
    return None if head is None else head.sequence


def test_gateway_errors_are_retried_with_the_same_bytes(built_site: SiteContext, gateway: FlakyGateway) -> None:
    gateway.modes = ["503", "429"]
    result = publish_summaries(built_site, gateway_url=gateway.url, retry=FAST)
    assert [mode for mode, _, _ in gateway.log] == ["503", "429", "pass"]
    assert len({body for _, body, _ in gateway.log}) == 1  # one signature, sent three times
    assert held(gateway) == result.sequence == accepted(built_site) == read_state(built_site).sequence
    assert Outbox(built_site.cfg.home).pending() == []


def test_an_undelivered_publication_stays_in_the_outbox_until_resent(built_site: SiteContext,
                                                                      gateway: FlakyGateway) -> None:
    start_from(built_site, gateway)
    before_state, before_gateway = read_state(built_site).to_json(), held(gateway)
    gateway.modes = ["drop"] * FAST.attempts
    with pytest.raises(BackendError, match="stays in .*outbox"):
        publish_summaries(built_site, gateway_url=gateway.url, retry=FAST)
    (entry,) = Outbox(built_site.cfg.home).pending()
    assert held(gateway) == before_gateway and read_state(built_site).to_json() == before_state
    sent = {payload(body)["sequence"] for _, body, _ in gateway.log}
    assert sent == {entry.sequence} == {before_gateway + 1}

    gateway.log = []
    (result,) = resend_pending(built_site, gateway_url=gateway.url, retry=FAST)
    assert [payload(body) for _, body, _ in gateway.log] == [payload(entry.body())]  # not re-signed
    assert result.sequence == entry.sequence == held(gateway) == accepted(built_site)
    assert Outbox(built_site.cfg.home).pending() == []
    assert resend_pending(built_site, gateway_url=gateway.url, retry=FAST) == []


class _Crash(BaseException):
    """The site process dying: nothing after this point runs."""


def test_a_crash_between_writing_and_delivering_is_recovered(built_site: SiteContext, gateway: FlakyGateway,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    start = start_from(built_site, gateway)

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise _Crash()

    monkeypatch.setattr(publish_module, "deliver", crash)
    with pytest.raises(_Crash):
        publish_summaries(built_site, gateway_url=gateway.url, retry=FAST)
    monkeypatch.undo()
    (entry,) = Outbox(built_site.cfg.home).pending()
    assert entry.sequence == start + 1 and gateway.log == [] and held(gateway) == start

    result = publish_summaries(built_site, gateway_url=gateway.url, retry=FAST)
    first, second = (payload(body) for _, body, _ in gateway.log)
    assert first == payload(entry.body())  # the pending publication, exactly as signed before the crash
    assert second["sequence"] == start + 2 and second["base"]["sequence"] == start + 1  # then a delta on it
    assert result.sequence == held(gateway) == accepted(built_site) == start + 2
    assert not result.full and result.sent == 0  # nothing changed on the site: an expiry refresh


def test_a_lost_answer_is_settled_by_resending_the_same_bytes(built_site: SiteContext, gateway: FlakyGateway) -> None:
    start = start_from(built_site, gateway)
    gateway.modes = ["lost"]
    result = publish_summaries(built_site, gateway_url=gateway.url, retry=FAST)
    (m1, b1, s1), (m2, b2, s2) = gateway.log
    assert (m1, s1, m2, s2) == ("lost", 200, "pass", 200) and b1 == b2
    assert result.gateway_response["replay"] is True
    assert result.sequence == start + 1 == held(gateway) == accepted(built_site)


def test_when_the_gateway_lost_the_base_the_site_sends_its_whole_set(built_site: SiteContext,
                                                                      gateway: FlakyGateway) -> None:
    start = start_from(built_site, gateway)
    index = gateway.service.index
    index.remove_site("acme")  # e.g. its durable copy was lost: the floor stays, the set is gone
    result = publish_summaries(built_site, gateway_url=gateway.url, retry=FAST)
    (delta, d_status), (full, f_status) = ((payload(b), s) for _, b, s in gateway.log)
    assert (d_status, delta["sequence"], delta["base"]["sequence"]) == (409, start + 1, start)
    assert (f_status, full["sequence"], full["base"]) == (200, start + 2, None)
    assert result.full and result.sent == result.summaries == len(built_site.graph.communities())
    assert held(gateway) == accepted(built_site) == start + 2
    assert index.sites(["acme"]) == {"acme": result.summaries}


def test_an_expired_pending_publication_is_not_resent(built_site: SiteContext, gateway: FlakyGateway,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    start = start_from(built_site, gateway)
    long_ago = datetime.now(timezone.utc) - timedelta(hours=built_site.cfg.site.publication_ttl_hours + 1)
    monkeypatch.setattr(publish_module, "deliver", lambda *a, **k: (_ for _ in ()).throw(_Crash()))
    with pytest.raises(_Crash):
        publish_summaries(built_site, gateway_url=gateway.url, retry=FAST, now=long_ago)
    monkeypatch.undo()
    (entry,) = Outbox(built_site.cfg.home).pending()
    result = publish_summaries(built_site, gateway_url=gateway.url, retry=FAST)
    assert gateway.sequences() == [entry.sequence + 1]  # the stale one was dropped, not sent
    assert result.full and result.sequence == held(gateway) == entry.sequence + 1 == start + 2


def test_the_retry_command_resends_the_outbox(built_site: SiteContext, gateway: FlakyGateway) -> None:
    start_from(built_site, gateway)
    gateway.modes = ["drop"] * FAST.attempts
    with pytest.raises(BackendError):
        publish_summaries(built_site, gateway_url=gateway.url, retry=FAST)
    (entry,) = Outbox(built_site.cfg.home).pending()
    env: dict[str, str | None] = {"HANSA_SITE_SITE_ID": "acme", "HANSA_CONFIG": None}
    args = ["--home", str(built_site.cfg.home), "site", "publish", "--retry", "--gateway", gateway.url, "--attempts", "2"]
    result = CliRunner().invoke(main, args, env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "resent" in result.output and f"sequence: {entry.sequence}" in result.output
    assert held(gateway) == entry.sequence == accepted(built_site)
    again = CliRunner().invoke(main, args, env=env, catch_exceptions=False)
    assert again.exit_code == 0 and "nothing pending" in again.output


def test_backoff_is_bounded_full_jitter_and_honours_retry_after() -> None:
    policy = RetryPolicy(attempts=6, base_delay_s=0.5, max_delay_s=4.0)
    rng = random.Random(7)
    for attempt in range(8):
        ceiling = min(4.0, 0.5 * 2 ** attempt)
        waits = [policy.delay(attempt, rng) for _ in range(200)]
        assert all(0 <= w <= ceiling for w in waits) and max(waits) > 0.8 * ceiling
    assert policy.delay(0, rng, retry_after=3.0) >= 3.0
    assert policy.delay(0, rng, retry_after=3600) == 4.0  # never beyond the cap
    with pytest.raises(Exception, match="attempts"):
        RetryPolicy(attempts=0)


def test_a_damaged_outbox_entry_is_reported_not_lost(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path)
    outbox.folder.mkdir(parents=True)
    (outbox.folder / f"{5:020d}.json").write_text("{not json")
    with pytest.raises(Exception, match="damaged"):
        outbox.pending()
