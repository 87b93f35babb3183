"""Fuzz both HTTP APIs from their own OpenAPI documents with schemathesis, in process (WSGI), against
a real federation: the gateway's summaries come from sites that really published, its queries fan
out to real sites over loopback, and the site app answers from its embedded graph and Milvus Lite.

Every generated request, valid or hostile, must get a documented status (never a 5xx), a body that
matches the documented schema, and the documented headers (Retry-After, WWW-Authenticate, Allow).
Examples are derandomized (a fixed seed per test) and bounded, so a run is reproducible and fits CI.
"""
from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from hansa.plugin.api import create_site_app

MAX_EXAMPLES = 12

FUZZ_SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def gateway_schema(federation) -> Any:
    return schemathesis.openapi.from_wsgi("/v1/openapi.json", federation.gateway_app)


@pytest.fixture(scope="module")
def site_app(federation) -> Any:
    return create_site_app(federation.sites["govt"].ctx)


@pytest.fixture(scope="module")
def site_schema(site_app) -> Any:
    return schemathesis.openapi.from_wsgi("/v1/openapi.json", site_app)


gateway_api = schemathesis.pytest.from_fixture("gateway_schema")
site_api = schemathesis.pytest.from_fixture("site_schema")


@gateway_api.parametrize()
@FUZZ_SETTINGS
def test_gateway_api_conforms_to_its_spec(case, federation) -> None:
    case.call_and_validate(headers={"Authorization": f"Bearer {federation.api_key}"})


@site_api.parametrize()
@FUZZ_SETTINGS
def test_site_api_conforms_to_its_spec(case) -> None:
    case.call_and_validate()
