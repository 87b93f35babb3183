"""The learned router inside the Gateway service, on the real sites of the `federation` fixture
through InProcessSiteTransport: the trace names the router and its model, the gateway logs what
contributed, and a broken model file never breaks a query."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from hansa.core.config import GatewayConfig
from hansa.gateway.trust.apikeys import API_KEYS_FILE, ApiKeyStore
from hansa.gateway.query.policy import QueryPolicy
from hansa.gateway.query.request import QueryRequest
from hansa.gateway.query.learned.features import FEATURE_NAMES
from hansa.gateway.query.learned.outcomes import OutcomeLog
from hansa.gateway.query.learned.model import fit
from hansa.gateway.query.learned.router import MODEL_FILE, learned_policy, open_router
from hansa.gateway.service import Gateway
from hansa.gateway.transport import InProcessSiteTransport
from hansa.plugin.api import create_site_app

GOVT_Q = "What does FEMA do after a disaster?"


@pytest.fixture(scope="module")
def gw(federation, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """A gateway configured with router = "learned"; its router's model and log live in this
    module's own directory (the session federation's gateway directory stays untouched)."""
    assert federation.gateway_service.index.flush(60)
    home = tmp_path_factory.mktemp("learned-gw")
    apps = {site_id: create_site_app(h.ctx) for site_id, h in federation.sites.items()}
    embedder = next(iter(federation.sites.values())).ctx.embedder
    cfg = GatewayConfig(top_k_sites=2, site_timeout_s=60.0, router="learned", router_explore_share=0.0)
    service = Gateway.open(cfg, embedder=embedder, vector_store=federation.gateway_vectors, registry=federation.registry,
                           api_keys=ApiKeyStore(home / API_KEYS_FILE),
                           transport=lambda identity, c: InProcessSiteTransport(identity, apps))
    service.router = open_router(cfg, service.index, home)  # this module's own model and log
    yield service
    service.close()


def router_home(gw: Gateway) -> Path:
    assert gw.router is not None and gw.router.model_path is not None
    return gw.router.model_path.parent


def test_cold_start_routes_by_summaries_traces_the_router_and_logs_the_outcome(gw: Gateway) -> None:
    result = gw.query(QueryRequest(question=GOVT_Q), client="learned")
    trace = result.trace
    assert trace.router["name"] == "learned" and trace.router["model_version"] is None
    assert trace.router["fallback"].startswith("summary matching") and trace.sites_called[0] == "govt"
    records = list(OutcomeLog(router_home(gw)).records())
    assert records and GOVT_Q not in json.dumps(records[-1])
    sites = records[-1]["sites"]
    assert all(len(s["x"]) == len(FEATURE_NAMES) for s in sites)
    contributed = {c["site_id"] for c in result.citations} & set(trace.sites_called)
    assert any(s["called"] and s["contributed"] for s in sites) and contributed


def test_a_trained_model_is_used_and_a_corrupt_one_falls_back(gw: Gateway) -> None:
    home = router_home(gw)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, len(FEATURE_NAMES)))
    y = (x[:, 0] > 0).astype(int)  # relevance follows the best summary similarity
    model = fit(x, y, [str(i // 4) for i in range(200)])
    model.save(home / MODEL_FILE)
    trace = gw.query(QueryRequest(question=GOVT_Q), client="learned").trace
    assert trace.router["model_version"] == model.version and trace.router["fallback"] is None
    assert all("probability" in s.to_json() for s in trace.sites_considered) and trace.sites_called
    (home / MODEL_FILE).write_text('{"format": "hansa-router-logreg/1", "weights": [1e999]}')
    broken = gw.query(QueryRequest(question=GOVT_Q), client="learned")
    assert broken.trace.router["model_version"] is None and broken.trace.sites_called[0] == "govt"
    assert broken.citations


def test_the_eval_policy_and_an_explicit_router_choice(gw: Gateway) -> None:
    policy = learned_policy(gw)
    assert isinstance(policy, QueryPolicy) and policy.name == "learned" and policy.router.explore_share == 0.0
    assert policy.router.model_path == gw.router.model_path  # the gateway's own model and log
    trace = gw.query(QueryRequest(question=GOVT_Q), client="learned", policy=policy).trace
    assert trace.policy["name"] == "learned" and trace.router["name"] == "learned"
    from hansa.gateway.query.route import SummaryRouter

    plain = gw.query(QueryRequest(question=GOVT_Q), client="learned", policy=QueryPolicy(router=SummaryRouter())).trace
    assert plain.router == {"name": "SummaryRouter", "model_version": None}


def test_router_rows_describe_every_ranked_site_and_an_evals_model_file_is_used(gw: Gateway, tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows `hansa eval --split fit --calibration-rows` writes for the learned router: each
    site the router ranks, its features by name (the sites' term scores included), labelled by
    the gold sites, collected without a site call; and `learned_policy(model_path=...)` routes by
    that model, not the gateway's own, and logs nothing."""
    from hansa.gateway.query.calibrate import LabelledQuestion
    from hansa.gateway.query.learned.router import LearnedRouter
    from hansa.gateway.query.learned.train import router_rows

    def no_call(*args: object, **kwargs: object) -> None:
        raise AssertionError("collecting router rows called a site")

    with monkeypatch.context() as m:
        m.setattr(gw.engine.transport, "call", no_call)
        # "river" is among the words clapnq's documents share (its term statistics), not govt's
        rows = router_rows(gw, [LabelledQuestion("q1", "Where does the Penobscot River flow?", ("clapnq",)),
                                LabelledQuestion("q2", "hi", (), False)])
    assert {r.example.question_id for r in rows} == {"q1"} and {r.site for r in rows} == {"govt", "clapnq"}
    by_site = {r.site: r.example for r in rows}
    assert by_site["clapnq"].label and not by_site["govt"].label
    assert all(set(e.features) == set(FEATURE_NAMES) for e in by_site.values())
    assert by_site["clapnq"].features["terms_share"] == 1.0 and by_site["govt"].features["terms_share"] == 0.0

    rng = np.random.default_rng(1)
    x = rng.normal(size=(120, len(FEATURE_NAMES)))
    model = fit(x, (x[:, 0] > 0).astype(int), [str(i // 4) for i in range(120)])
    path = model.save(tmp_path / "eval-model" / MODEL_FILE)
    policy = learned_policy(gw, model_path=path)
    assert isinstance(policy.router, LearnedRouter) and policy.router.outcomes is None
    trace = gw.query(QueryRequest(question=GOVT_Q), client="learned", policy=policy).trace
    assert trace.router["model_version"] == model.version
