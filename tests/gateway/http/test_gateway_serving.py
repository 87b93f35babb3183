"""`hansa gateway serve` as an operator runs it: gunicorn in its own process, HTTPS from the
configured certificate, two worker processes over one `milvus-lite server` and one shared-state
file. A publication POSTed to whichever worker takes it is routable from every worker; /metrics
sums both workers.

Slow (a Milvus server and two workers that each load the embedder)."""
from __future__ import annotations

import os
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator

import pytest
import requests

from hansa.adapters.vector.lite_server import LiteServer, free_port
from hansa.sync.keys import SiteIdentity
from hansa.sync.publication import build_publication
from hansa.sync.vectors import encode_vector
from hansa.sync.wire import EmbeddingSpace, Richness, SummaryRecord
from tests.served import hansa, start, stop, wait_healthy

pytestmark = pytest.mark.slow
SITE = "rivers"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, self_signed_tls: tuple[Path, Path]) -> Iterator[dict[str, Any]]:
    """`hansa gateway serve --workers 2` over HTTPS, a Milvus server, one enrolled site."""
    root = tmp_path_factory.mktemp("gateway-served")
    home = root / "home"
    home.mkdir()
    cert, key = self_signed_tls
    site = SiteIdentity.generate()
    port = free_port()
    with LiteServer(root / "milvus") as milvus_uri:
        (home / "hansa.toml").write_text(
            f'[gateway]\ntls_cert = "{cert}"\ntls_key = "{key}"\nworkers = 2\n[milvus]\nuri = "{milvus_uri}"\n',
            encoding="utf-8")
        env = {**os.environ, "HANSA_HOME": str(home), "HF_HUB_OFFLINE": "1"}
        subprocess.run(hansa("gateway", "enroll", "--site-id", SITE, "--url", "https://rivers.example.org",
                             "--public-key", site.public_key_b64), env=env, check=True, capture_output=True, timeout=120)
        log = root / "serve.log"
        proc = start(["gateway", "serve", "--port", str(port)], home, log)
        url = f"https://127.0.0.1:{port}"
        try:
            wait_healthy(proc, url, log, verify=str(cert))
            yield {"url": url, "cert": str(cert), "site": site, "log": log, "home": home}
        finally:
            stop(proc)


def test_a_publication_to_one_worker_is_routable_from_both(served: dict[str, Any], embedder) -> None:
    url, cert = served["url"], served["cert"]
    records = [SummaryRecord("c1", 1, encode_vector(embedder.embed(["Rivers of France and Lyon."])[0]),
                             Richness(5, 3, 2), level=0)]
    envelope = build_publication(served["site"], SITE, 1, EmbeddingSpace.of(embedder),
                                 records, timedelta(hours=1))
    resp = requests.post(f"{url}/v1/sites/{SITE}/publications", json=envelope, verify=cert, timeout=120)
    assert resp.status_code == 200, resp.text
    # each request lands on either worker (new connection each time): all must see the set
    for _ in range(12):
        health = requests.get(f"{url}/v1/health", verify=cert, timeout=60, headers={"Connection": "close"})
        assert health.status_code == 200 and health.json()["summaries"] == 1
    metrics = requests.get(f"{url}/metrics", verify=cert, timeout=60).text
    assert 'hansa_gateway_publications_total{reason="new",result="accepted"} 1.0' in metrics


def test_https_only(served: dict[str, Any]) -> None:
    with pytest.raises(requests.ConnectionError):
        requests.get(served["url"].replace("https", "http") + "/v1/health", timeout=10)


def test_several_workers_on_milvus_lite_is_a_clear_error(served: dict[str, Any], tmp_path: Path) -> None:
    env = {**os.environ, "HANSA_HOME": str(served["home"]), "HANSA_MILVUS_URI": str(tmp_path / "lite.db")}
    proc = subprocess.run(hansa("gateway", "serve", "--workers", "3"), env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1
    assert "3 gateway workers need a Milvus server" in proc.stderr and "HANSA_MILVUS_URI" in proc.stderr
    assert "Traceback" not in proc.stderr
