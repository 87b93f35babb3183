"""`hansa site serve` as an operator runs it: gunicorn in its own process, HTTPS from the
configured certificate (self-signed, made here) checked by a verifying client, one and two worker
processes over a `milvus-lite server`, replay nonces and metrics shared between workers, and the
gateway's query id in the JSON logs.

Slow (a real site, a Milvus server, server processes that load the embedder): one site is built
per module and served several times."""
from __future__ import annotations

import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest
import requests

from hansa.adapters.vector.lite_server import LiteServer, free_port
from hansa.core.config import load_config
from hansa.plugin.site import SiteContext
from hansa.sync.httpsig import (
    QUERY_ID_HEADER,
    RETRIEVE_TRACED_COMPONENTS,
    SITE_HEADER,
    HttpMessage,
    keyring,
    sign_request,
    verify_response,
)
from hansa.sync.keys import SiteIdentity
from tests.served import hansa, start, stop, wait_healthy

pytestmark = pytest.mark.slow

GATEWAY = SiteIdentity.generate()
SITE_ID = "acme"



@pytest.fixture(scope="module")
def served_home(tmp_path_factory: pytest.TempPathFactory, corpus: dict[str, str],
                self_signed_tls: tuple[Path, Path]) -> Iterator[dict[str, Any]]:
    """An installed, ingested site whose vectors live in a running `milvus-lite server`, with a
    hansa.toml naming the gateway key and the TLS files. Nothing of it is open in this process."""
    root = tmp_path_factory.mktemp("served")
    home = root / "home"
    cert, key = self_signed_tls
    with LiteServer(root / "milvus") as milvus_uri:
        home.mkdir()
        (home / "hansa.toml").write_text(
            f'[site]\nsite_id = "{SITE_ID}"\ngateway_public_key = "{GATEWAY.public_key_b64}"\n'
            f'tls_cert = "{cert}"\ntls_key = "{key}"\n[milvus]\nuri = "{milvus_uri}"\n', encoding="utf-8")
        from hansa.plugin.communities import build_communities
        from hansa.plugin.ingest import ingest_paths
        from hansa.plugin.install import install_site

        with SiteContext.open(load_config(env={"HANSA_HOME": str(home)})) as ctx:
            install_site(ctx)
            docs = root / "docs"
            docs.mkdir()
            for name, text in corpus.items():
                (docs / Path(name).name).write_text(text, encoding="utf-8")
            ingest_paths(ctx, [docs], progress=False)
            build_communities(ctx, progress=False)
        site_key = SiteIdentity.load(home / "keys").public_key
        yield {"home": home, "cert": cert, "milvus_uri": milvus_uri, "site_keys": keyring([site_key]), "root": root}


@contextmanager
def serving(served: dict[str, Any], workers: int) -> Iterator[tuple[str, Path]]:
    """`hansa site serve --workers N` in its own process group; (https base URL, its stderr file)."""
    port = free_port()
    log = served["root"] / f"serve-{workers}-{port}.log"
    proc = start(["site", "serve", "--port", str(port), "--workers", str(workers)], served["home"], log)
    url = f"https://127.0.0.1:{port}"
    try:
        wait_healthy(proc, url, log, verify=str(served["cert"]))
        yield url, log
    finally:
        stop(proc)


def signed_retrieve(url: str, question: str, query_id: str) -> tuple[dict[str, str], bytes]:
    body = json.dumps({"question": question, "top_k": 3}).encode()
    headers = {"Content-Type": "application/json", SITE_HEADER: SITE_ID, QUERY_ID_HEADER: query_id}
    headers.update(sign_request(GATEWAY, "POST", f"{url}/v1/retrieve", headers, body,
                                components=RETRIEVE_TRACED_COMPONENTS))
    return headers, body


def json_events(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text(errors="replace").splitlines() if line.startswith("{")]


def metric(text: str, name: str, **labels: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


def test_https_with_the_configured_certificate(served_home: dict[str, Any]) -> None:
    cert = str(served_home["cert"])
    with serving(served_home, workers=1) as (url, log):
        with pytest.raises(requests.exceptions.SSLError):  # not a CA the system trusts: verification is real
            requests.get(f"{url}/v1/health", timeout=10)
        with pytest.raises(requests.ConnectionError):  # no plain HTTP on the TLS port
            requests.get(url.replace("https://", "http://") + "/v1/health", timeout=10)
        headers, body = signed_retrieve(url, "Who designed the Brightwater Lighthouse?", "q-tls-1")
        resp = requests.post(f"{url}/v1/retrieve", data=body, headers=headers, verify=cert, timeout=120)
        assert resp.status_code == 200, resp.text
        assert "Margaret Ellison" in resp.json()["answer"]
        verify_response(200, resp.headers, resp.content, served_home["site_keys"],
                        HttpMessage.request("POST", f"{url}/v1/retrieve", headers))
        time.sleep(0.5)
        traced = [e for e in json_events(log) if e.get("query_id") == "q-tls-1"]
        assert {"retrieve.done", "site_api.retrieve"} <= {e["event"] for e in traced}, json_events(log)


def test_two_workers_share_replay_nonces_and_metrics(served_home: dict[str, Any]) -> None:
    cert = str(served_home["cert"])
    questions = ["Who designed the Brightwater Lighthouse?", "Where does Kettle Ridge buy beans?",
                 "When did Mount Teravik erupt?", "Who founded the Lindenfeld Chamber Orchestra?"] * 2
    with serving(served_home, workers=2) as (url, log):
        signed = [signed_retrieve(url, q, f"q-{i}") for i, q in enumerate(questions)]

        def post(request: tuple[dict[str, str], bytes]) -> requests.Response:
            return requests.post(f"{url}/v1/retrieve", data=request[1], headers=request[0], verify=cert, timeout=180)

        with ThreadPoolExecutor(len(signed)) as pool:
            first = list(pool.map(post, signed))
            replayed = list(pool.map(post, signed))  # each was accepted once, by one of the two workers
        assert [r.status_code for r in first] == [200] * len(signed), [r.text for r in first]
        assert [r.status_code for r in replayed] == [401] * len(signed)
        assert all("replayed" in r.json()["error"] for r in replayed)
        time.sleep(0.5)
        pids = {e["pid"] for e in json_events(log) if e["event"] == "site_api.retrieve"}
        assert len(pids) == 2, "both workers answered (a sync worker takes one request at a time)"
        for _ in range(4):  # whichever worker answers the scrape, it reports every worker's counts
            text = requests.get(f"{url}/metrics", verify=cert, timeout=30).text
            assert metric(text, "hansa_site_retrieve_requests_total", status="200") == len(signed)
            assert metric(text, "hansa_site_retrieve_requests_total", status="401") == len(signed)
            assert metric(text, "hansa_site_signature_refusals_total", reason="replayed") == len(signed)
            assert metric(text, "hansa_site_retrieve_seconds_count") == 2 * len(signed)


def test_several_workers_on_milvus_lite_is_a_clear_error(served_home: dict[str, Any], tmp_path: Path) -> None:
    env = {**os.environ, "HANSA_HOME": str(served_home["home"]), "HANSA_MILVUS_URI": str(tmp_path / "lite.db")}
    proc = subprocess.run(hansa("site", "serve", "--workers", "3"), env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "3 workers need a Milvus server" in proc.stderr and "milvus-lite server --data-dir" in proc.stderr
    assert "HANSA_MILVUS_URI" in proc.stderr and "Traceback" not in proc.stderr
