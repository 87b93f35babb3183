"""`hansa query` against real gateways on loopback: the session federation's (two real sites), and
one whose sites cannot be reached and whose rate limit is one query (for 502 and 429).

Every case goes through the real root command, over real HTTP, to the real Flask adapter."""
from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Iterator

import pytest
from click.testing import CliRunner, Result

from hansa.cli import main
from hansa.core.serving import BackgroundServer
from hansa.federation.local import LocalFederation
from hansa.gateway.trust import admin
from hansa.gateway.trust.apikeys import open_api_keys

QUESTION = "What kinds of fish live in the West Branch of the Penobscot River?"


def hansa_query(tmp_path: Path, *args: str, **env: str) -> Result:
    environ = {"HANSA_CONFIG": None, "HANSA_CLIENT_API_KEY": None, "HANSA_CLIENT_GATEWAY_URL": None,
               "HANSA_SITE_GATEWAY_URL": None, **env}
    return CliRunner().invoke(main, ["--home", str(tmp_path / "client"), "query", *args], env=environ)


def test_the_answer_comes_with_numbered_readable_citations_and_the_site_summary(federation: LocalFederation, tmp_path: Path) -> None:
    raw = hansa_query(tmp_path, QUESTION, "--gateway", federation.gateway_url, "--api-key", federation.api_key, "--json")
    assert raw.exit_code == 0, raw.output
    body = json.loads(raw.stdout)
    used = [c for c in body["citations"] if c["used"]]
    assert used and {c["site_id"] for c in used} == {"clapnq"}

    # the key from the environment ([client] api_key), the URL from [client] gateway_url
    res = hansa_query(tmp_path, QUESTION, HANSA_CLIENT_API_KEY=federation.api_key,
                      HANSA_CLIENT_GATEWAY_URL=federation.gateway_url)
    assert res.exit_code == 0, res.output
    text = res.stdout
    assert text.splitlines()[0].strip() == body["answer"].strip().splitlines()[0].strip()
    for c in used:
        line = next(l for l in text.splitlines() if l.startswith(f"[{c['n']}] "))
        assert c["title"] in line and "(site clapnq)" in line and c["source"] in line
    sites = body["sites"]
    assert f"sites: {sites['successful']} of {sites['total']} answered, {sites['failed']} failed" in text
    for detail in sites["details"]:
        assert re.search(rf"^  {detail['site_id']}: ok in [0-9.]+ ms$", text, re.M)


def test_request_options_reach_the_gateway_as_the_request_schema(federation: LocalFederation, tmp_path: Path) -> None:
    res = hansa_query(tmp_path, QUESTION, "--gateway", federation.gateway_url, "--api-key", federation.api_key,
                      "--site", "govt", "--top-k", "2", "--budget-sites", "1", "--budget-time-ms", "60000", "--json")
    assert res.exit_code == 0, res.output
    body = json.loads(res.stdout)
    assert [d["site_id"] for d in body["sites"]["details"]] == ["govt"]  # --site replaced routing
    assert body["trace"]["budget"]["given"] == {"time_ms": 60000, "sites": 1}

    bad = hansa_query(tmp_path, QUESTION, "--gateway", federation.gateway_url, "--api-key", "k", "--budget-sites", "0")
    assert bad.exit_code == 2 and "budget.sites must be an integer in 1..64" in bad.output
    unknown = hansa_query(tmp_path, QUESTION, "--gateway", federation.gateway_url, "--api-key", federation.api_key,
                          "--origin", "nowhere")
    assert unknown.exit_code == 1 and "404" in unknown.output and "hansa gateway sites" in unknown.output


def test_refusals_say_what_to_do(federation: LocalFederation, tmp_path: Path) -> None:
    url = federation.gateway_url
    nokey = hansa_query(tmp_path, QUESTION, "--gateway", url)
    assert nokey.exit_code == 2 and "HANSA_CLIENT_API_KEY" in nokey.output

    wrong = hansa_query(tmp_path, QUESTION, "--gateway", url, "--api-key", "not-a-key")
    assert wrong.exit_code == 1 and "401" in wrong.output and "hansa gateway api-key create" in wrong.output

    keys = open_api_keys(federation.registry.path.parent)
    revoked = keys.create("cli-revoked")
    keys.revoke("cli-revoked")
    refused = hansa_query(tmp_path, QUESTION, "--gateway", url, "--api-key", revoked)
    assert refused.exit_code == 1 and "403" in refused.output and "revoked" in refused.output

    limited = keys.create("cli-origin-limited", origins=["govt"])
    other = hansa_query(tmp_path, QUESTION, "--gateway", url, "--api-key", limited, "--origin", "clapnq")
    assert other.exit_code == 1 and "403" in other.output and "--origin" in other.output

    dead = dead_url()
    down = hansa_query(tmp_path, QUESTION, "--gateway", dead, "--api-key", federation.api_key)
    assert down.exit_code == 1 and f"cannot reach the gateway at {dead}" in down.output


@pytest.fixture
def stranded_gateway(federation: LocalFederation, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(URL, API key) of a real gateway of its own (registry, Milvus Lite, keys) whose one enrolled
    site listens nowhere (every call is refused) and whose rate limit allows one site call."""
    from hansa.adapters.vector.milvus import MilvusVectorStore
    from hansa.core.config import GatewayConfig
    from hansa.gateway.http.app import create_gateway_app
    from hansa.gateway.trust.registry import SiteRegistry
    from hansa.gateway.service import Gateway
    from hansa.sync.keys import SiteIdentity

    home = tmp_path / "stranded"
    registry = SiteRegistry(home / "registry.json")
    admin.enroll(registry, "govt", dead_url(), [SiteIdentity.generate().public_key_b64])
    api_keys = open_api_keys(home)
    key = api_keys.create("stranded")
    embedder = next(iter(federation.sites.values())).ctx.embedder
    cfg = GatewayConfig(query_burst=1, query_refill_per_s=0.0001, site_timeout_s=5.0, allow_private_addresses=True)
    with MilvusVectorStore(str(home / "milvus.db")) as vectors, \
            Gateway.open(cfg, embedder=embedder, vector_store=vectors, registry=registry, api_keys=api_keys) as gw, \
            BackgroundServer(create_gateway_app(gw)) as server:
        yield server.url, key


def dead_url() -> str:
    """http://127.0.0.1:<port> where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_502_lists_each_site_and_429_says_when_to_retry(stranded_gateway: tuple[str, str], tmp_path: Path) -> None:
    url, key = stranded_gateway
    failed = hansa_query(tmp_path, QUESTION, "--gateway", url, "--api-key", key, "--site", "govt")
    assert failed.exit_code == 1, failed.output
    assert "every site the gateway called failed (502" in failed.output
    assert re.search(r"^  govt: error in [0-9.]+ ms: .+$", failed.output, re.M), failed.output

    limited = hansa_query(tmp_path, QUESTION, "--gateway", url, "--api-key", key, "--site", "govt", "--json")
    assert limited.exit_code == 1
    assert "rate-limited this API key (429" in limited.output and "retry in" in limited.output
    assert json.loads(limited.stdout)["kind"] == "RateLimited"  # --json still prints the raw body
