"""`hansa site serve`'s background re-publisher against a real gateway on a loopback HTTP server.

The gateway is the real Flask app (Milvus Lite, real registry) served by werkzeug on a free port;
the site is the module's real small site. Publications get a TTL of seconds so that expiry comes
within the test, and the test watches the gateway's own record of the site's publication."""
from __future__ import annotations

import threading
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
from werkzeug.serving import make_server

from hansa.adapters.vector.milvus import MilvusVectorStore
from hansa.core.config import GatewayConfig
from hansa.core.errors import ConfigError
from hansa.gateway.http.app import create_gateway_app
from hansa.gateway.service import Gateway
from hansa.gateway.trust import admin
from hansa.gateway.trust.registry import SiteRegistry
from hansa.plugin.install import load_identity
from hansa.plugin.outbox import Outbox, RetryPolicy
from hansa.plugin.publish import accepted_expiry, publish_summaries, read_state, summaries_changed
from hansa.plugin.republish import Republisher, RepublishPolicy, due
from hansa.plugin.site import SUMMARIES, SiteContext
from hansa.sync.wire import parse_utc

FAST = RetryPolicy(attempts=2, base_delay_s=0.01, max_delay_s=0.05)
TTL = timedelta(seconds=20)


class LiveGateway:
    """The gateway app on a real loopback HTTP server, plus its registry to read back."""

    def __init__(self, root: Path, site: SiteContext) -> None:
        self.store = MilvusVectorStore(str(root / "gw.db"))
        self.registry = SiteRegistry(root / "gateway" / "registry.json")
        admin.enroll(self.registry, site.site_id, "http://127.0.0.1:9/none", [load_identity(site).public_key_b64])
        self.service = Gateway.open(GatewayConfig(publish_burst=1000, max_request_bytes=4 * 1024 * 1024),
                                    embedder=site.embedder, vector_store=self.store, registry=self.registry)
        self.app = create_gateway_app(self.service)
        self.server = make_server("127.0.0.1", 0, self.app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def expires(self, site_id: str) -> datetime | None:
        record = self.registry.get(site_id)
        return None if record.expires is None else parse_utc(record.expires, "expires")

    def close(self) -> None:
        self.server.shutdown()
        self.service.close()
        self.store.close()


@pytest.fixture(scope="module")
def gateway(built_site: SiteContext, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveGateway]:
    gw = LiveGateway(tmp_path_factory.mktemp("republish-gateway"), built_site)
    yield gw
    gw.close()


@pytest.fixture
def short_ttl(built_site: SiteContext) -> Iterator[SiteContext]:
    """The site with publications that live TTL seconds (restored afterwards)."""
    before = built_site.cfg.site.publication_ttl_hours
    built_site.cfg.site.publication_ttl_hours = TTL.total_seconds() / 3600
    yield built_site
    built_site.cfg.site.publication_ttl_hours = before


def wait_for(condition: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return bool(condition())


def test_serving_site_republishes_before_expiry_and_the_gateway_expiry_moves_forward(
    short_ttl: SiteContext, gateway: LiveGateway
) -> None:
    site = short_ttl
    # Due once less than 3/4 of the TTL remains (5 s after a publication): 15 s of margin for a
    # loaded machine before the gateway's copy would expire.
    policy = RepublishPolicy(ttl=TTL, remaining_share=0.75, check_s=0.2)
    with Republisher(site, gateway.url, policy, retry=FAST) as republisher:
        assert wait_for(lambda: gateway.expires(site.site_id) is not None, 60), republisher.last_error
        first = gateway.expires(site.site_id)
        first_sequence = gateway.registry.get(site.site_id).last_sequence
        # Nothing changed in the summaries: only the approaching expiry can trigger the next one,
        # before the first publication expires.
        assert wait_for(lambda: gateway.expires(site.site_id) != first, 60), republisher.last_error
        second = gateway.expires(site.site_id)
        assert second is not None and first is not None and second > first
        record = gateway.registry.get(site.site_id)
        assert record.last_sequence is not None and record.last_sequence > first_sequence
        assert record.is_routable(gateway.registry.clock()), "the site never dropped out of routing"
    assert republisher.last_error is None
    assert accepted_expiry(site) == gateway.expires(site.site_id)  # the site knows what the gateway holds
    assert all(r.changed == 0 for r in republisher.results[1:]), "re-publications carried no change"


def test_a_fresh_publication_is_not_due_until_the_summaries_change(
    built_site: SiteContext, gateway: LiveGateway
) -> None:
    site = built_site
    publish_summaries(site, gateway_url=gateway.url, retry=FAST)  # a week's TTL: far from expiry
    policy = RepublishPolicy.from_config(site)
    now = datetime.now(timezone.utc)
    assert due(site, policy, now) is None
    assert due(site, policy, now + policy.ttl * 0.6) == "expiring"

    # The communities were rebuilt and one summary vector changed: due at once, and the
    # re-publication carries exactly that change.
    community = site.graph.communities()[0]
    old = site.vectors.get(SUMMARIES, [community.id])[community.id]
    new = np.roll(np.asarray(old, dtype=np.float32), 1)
    site.vectors.upsert(SUMMARIES, [community.id], new[None, :], [{"level": community.level}])
    try:
        assert summaries_changed(site)
        assert due(site, policy, now) == "changed"
        sequence = read_state(site).sequence
        result = Republisher(site, gateway.url, policy, retry=FAST).check()
        assert result is not None and result.changed == 1 and result.sequence > sequence
        assert gateway.registry.get(site.site_id).last_sequence == result.sequence
        assert due(site, policy, datetime.now(timezone.utc)) is None
    finally:
        site.vectors.upsert(SUMMARIES, [community.id], np.asarray(old, dtype=np.float32)[None, :],
                            [{"level": community.level}])


def test_a_failed_republication_is_kept_as_an_error_and_retried_at_the_next_check(
    built_site: SiteContext, dead_llm_url: str
) -> None:
    policy = replace(RepublishPolicy.from_config(built_site), check_s=0.05)
    republisher = Republisher(built_site, dead_llm_url, policy, retry=FAST)  # nothing listens there
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("hansa.plugin.republish.due", lambda *args: "changed")
            assert republisher.check() is None
        assert republisher.last_error and dead_llm_url in republisher.last_error
    finally:
        outbox = Outbox(built_site.cfg.home)  # the undelivered publication: not for the next test
        for entry in outbox.pending():
            outbox.remove(entry)


def test_bad_policies_are_refused() -> None:
    for kwargs in ({"remaining_share": 0.0}, {"remaining_share": 1.0}, {"check_s": 0.0}):
        with pytest.raises(ConfigError):
            RepublishPolicy(ttl=TTL, **kwargs)
    with pytest.raises(ConfigError):
        RepublishPolicy(ttl=timedelta(0))
