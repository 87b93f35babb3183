"""Gateway replicas as on two hosts: two `hansa gateway serve` processes with their own homes
(nothing shared on disk) over one `milvus-lite server`. The primary accepts a publication; the
follower routes it within a measured delay, refuses publications itself, and drops the site when
the primary revokes it; the signed registry reaches the follower by `federation submit`.

Slow (a Milvus server and two gateways that each load the embedder)."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import requests

from hansa.adapters.vector.lite_server import LiteServer, free_port
from hansa.sync.keys import SiteIdentity
from hansa.sync.publication import build_publication
from hansa.sync.vectors import encode_vector
from hansa.sync.wire import EmbeddingSpace, Richness, SummaryRecord
from tests.served import hansa, start, stop, wait_healthy

pytestmark = pytest.mark.slow
FOLLOW_INTERVAL_S = 0.5
SITE = "rivers"


def wait_for(what: str, check: Callable[[], bool], timeout_s: float = 60.0) -> float:
    """Seconds until `check()` held (polled every 50 ms)."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout_s, f"{what}: not within {timeout_s} s"
        time.sleep(0.05)
    return time.monotonic() - start


def summaries(url: str) -> int:
    return int(requests.get(f"{url}/v1/health", timeout=30).json()["summaries"])


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("replicas")
    primary, follower = root / "primary", root / "follower"
    site = SiteIdentity.generate()
    with LiteServer(root / "milvus") as milvus_uri:
        for home, role in ((primary, "primary"), (follower, "follower")):
            home.mkdir()
            (home / "hansa.toml").write_text(
                f'[gateway]\nrole = "{role}"\nfollow_interval_s = {FOLLOW_INTERVAL_S}\n[milvus]\nuri = "{milvus_uri}"\n',
                encoding="utf-8")
        env = {**os.environ, "HANSA_HOME": str(primary)}
        subprocess.run(hansa("gateway", "enroll", "--site-id", SITE, "--url", "https://rivers.example.org",
                             "--public-key", site.public_key_b64), env=env, check=True, capture_output=True, timeout=120)
        subprocess.run(hansa("gateway", "identity"), env=env, check=True, capture_output=True, timeout=120)
        # what docs/production.md tells an operator to copy to a replica: the signed registry and the gateway's key
        (follower / "gateway").mkdir()
        for name in ("registry.json", "registry.state.json", "registry.history", "keys"):
            src = primary / "gateway" / name
            (shutil.copytree if src.is_dir() else shutil.copy2)(src, follower / "gateway" / name)
        procs, urls = [], []
        try:
            for home in (primary, follower):
                port = free_port()
                procs.append(start(["gateway", "serve", "--port", str(port)], home, root / f"{home.name}.log"))
                urls.append(f"http://127.0.0.1:{port}")
            for proc, url, home in zip(procs, urls, (primary, follower)):
                wait_healthy(proc, url, root / f"{home.name}.log")
            yield {"primary": urls[0], "follower": urls[1], "homes": (primary, follower), "site": site}
        finally:
            for proc in procs:
                stop(proc)


def envelope(site: SiteIdentity, sequence: int, embedder: Any) -> dict[str, Any]:
    records = [SummaryRecord("c1", sequence, encode_vector(embedder.embed(["Rivers of France and Lyon."])[0]),
                             Richness(5, 3, 2), level=0)]
    return build_publication(site, SITE, sequence, EmbeddingSpace.of(embedder), records,
                             timedelta(hours=1))


def test_the_follower_routes_what_the_primary_accepts_and_refuses_publications(replicas: dict[str, Any],
                                                                             embedder: Any) -> None:
    primary, follower = replicas["primary"], replicas["follower"]
    assert summaries(follower) == 0
    assert requests.get(f"{follower}/v1/health", timeout=30).json()["role"] == "follower"
    resp = requests.post(f"{primary}/v1/sites/{SITE}/publications", json=envelope(replicas["site"], 1, embedder),
                         timeout=120)
    assert resp.status_code == 200, resp.text
    # the bound: the primary's write-behind, then at most one follow interval (docs/production.md says both)
    delay = wait_for("the follower routes the publication", lambda: summaries(follower) == 1)
    print(f"publication routable at the follower after {delay:.2f} s (follow_interval_s {FOLLOW_INTERVAL_S})")
    assert delay < 10.0
    refused = requests.post(f"{follower}/v1/sites/{SITE}/publications", json=envelope(replicas["site"], 2, embedder),
                            timeout=120)
    assert refused.status_code == 503 and refused.json()["kind"] == "FollowerRefusal", refused.text
    assert "primary" in refused.json()["error"]


def test_a_revocation_at_the_primary_reaches_the_follower(replicas: dict[str, Any], tmp_path: Path) -> None:
    primary_home, follower_home = replicas["homes"]
    key = next((primary_home / "gateway" / "federation-keys").iterdir())
    draft = tmp_path / "revoke.json"
    run = lambda home, *args: subprocess.run(hansa(*args), env={**os.environ, "HANSA_HOME": str(home)},  # noqa: E731
                                             check=True, capture_output=True, timeout=120)
    run(primary_home, "gateway", "revoke", SITE, "--key", str(key), "--out", str(draft))
    run(primary_home, "gateway", "federation", "submit", str(draft))
    wait_for("the primary drops the site", lambda: summaries(replicas["primary"]) == 0)
    # the follower's own registry still trusts the site: the primary's purge of the mirror removes it
    wait_for("the follower drops the site", lambda: summaries(replicas["follower"]) == 0)
    run(follower_home, "gateway", "federation", "submit", str(draft))  # the same signed registry, verified there
    sites = requests.get(f"{replicas['follower']}/v1/sites", timeout=30).json()["sites"]
    assert [s["status"] for s in sites if s["site_id"] == SITE] == ["revoked"]
