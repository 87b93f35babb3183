"""Fixtures for the gateway tests: the real embedder, loaded once per session (it takes seconds),
and a small real federation (two sites built from the bundled sample, a gateway they published to)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from hansa.adapters.embedder.onnx import OnnxEmbedder
from hansa.cli.demo import bundled_sample
from hansa.federation.local import LocalFederation

FEDERATION_SITES = ("clapnq", "govt")
PASSAGES_PER_SITE = 6
# Passages each site holds first, then the sample's own order: the govt site must hold an answer to
# the tests' govt questions ("What does FEMA do after a disaster?", "What does the Federal Emergency
# Management Agency do?"), whose words the sample's first six govt passages do not hold (the gateway
# abstains on such filler: gateway/query/abstain.py). The sample's FEMA page and a FAQ that names
# the agency in full.
ANSWERING = ("88aca7ee734372ad-0-1462", "c8db6e06ff46669e-50302-52227")


@pytest.fixture(scope="session")
def embedder() -> OnnxEmbedder:
    return OnnxEmbedder("all-MiniLM-L6-v2")  # the sites' default: the same space, file hash included


@pytest.fixture(scope="session")
def federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalFederation]:
    """Two real sites (embedded graph, Milvus Lite, the packaged embedder, Leiden communities)
    serving over loopback, enrolled in a gateway they published signed summaries to. Tests may add
    API keys and read state; they must not revoke or republish its sites."""
    passages, _ = bundled_sample()
    docs: dict[str, list[dict[str, str]]] = {site: [] for site in FEDERATION_SITES}
    chosen = [p for p in passages if p["id"] in ANSWERING] + passages
    for p in chosen:
        if p["site"] in docs and len(docs[p["site"]]) < PASSAGES_PER_SITE and p["id"] not in {d["id"] for d in docs[p["site"]]}:
            docs[p["site"]].append({"id": p["id"], "title": p["title"], "text": p["text"]})
    root: Path = tmp_path_factory.mktemp("federation")
    with LocalFederation(root, docs) as fed:
        yield fed


@pytest.fixture(scope="session")
def in_process_gateway(federation: LocalFederation) -> Callable[..., Any]:
    """A factory of Gateway services over the federation's real sites through InProcessSiteTransport
    (signed and verified, no sockets): `in_process_gateway(api_keys, **GatewayConfig fields)`. The
    caller closes what it opens."""
    from hansa.core.config import GatewayConfig
    from hansa.gateway.service import Gateway
    from hansa.gateway.transport import InProcessSiteTransport
    from hansa.plugin.api import create_site_app

    assert federation.gateway_service.index.flush(60)  # the durable copy a new gateway restores from
    apps = {site_id: create_site_app(h.ctx) for site_id, h in federation.sites.items()}
    embedder = next(iter(federation.sites.values())).ctx.embedder

    def open_gateway(api_keys: Any, **cfg: Any) -> Gateway:
        return Gateway.open(GatewayConfig(**{"top_k_sites": 1, "site_timeout_s": 60.0, **cfg}), embedder=embedder,
                            vector_store=federation.gateway_vectors, registry=federation.registry, api_keys=api_keys,
                            transport=lambda identity, c: InProcessSiteTransport(identity, apps))

    return open_gateway
