"""Fuzz both HTTP APIs from their own OpenAPI documents with schemathesis, in process (WSGI), against
a real federation: the gateway's summaries come from sites that really published, its queries fan
out to real sites over loopback, and the site app answers from its embedded graph and Milvus Lite.
The site only answers requests the gateway signed (RFC 9421), so its fuzz requests pass through a
signing proxy holding the federation gateway's key: the fuzzer reaches the body parser, not just
the signature check.

Every generated request, schema-valid or not, must get a documented status (never a 5xx), a body
that matches the documented schema, and the documented headers (Retry-After, WWW-Authenticate,
Allow); schema-valid requests must be accepted and schema-invalid ones refused. Examples are
derandomized (a fixed seed) and bounded per operation, so a run is reproducible and fits CI.

Hypothesis drives schemathesis' strategies directly (`as_strategy`) rather than through
schemathesis' pytest plugin, whose fixture-based loader needs pytest internals that pytest 9 no
longer has.
"""
from __future__ import annotations

import io
import json
from importlib import resources
from typing import Any, Callable, Iterable

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from werkzeug.wrappers import Request

from hansa.core.errors import HansaError
from hansa.gateway.client import gateway_identity
from hansa.plugin.api import create_site_app
from hansa.sync.httpsig import RETRIEVE_COMPONENTS, SITE_HEADER, sign_request
from hansa.sync.keys import SiteIdentity

EXAMPLES = {"POST /v1/query": 24, "POST /v1/retrieve": 24}
DEFAULT_EXAMPLES = 10


def _operations(package: str) -> list[str]:
    spec = json.loads(resources.files(package).joinpath("openapi.json").read_bytes())
    return [f"{method.upper()} {path}" for path, item in spec["paths"].items() for method in item]


def _fuzz(schema: Any, label: str, call: Callable[[Any], None]) -> None:
    operation = schema.find_operation_by_label(label)
    assert operation is not None, f"{label} is in the spec file but not in the served spec"
    cases = operation.as_strategy(schemathesis.GenerationMode.POSITIVE)
    if operation.body or operation.path_parameters:  # something a request can get wrong
        cases = st.one_of(cases, operation.as_strategy(schemathesis.GenerationMode.NEGATIVE))

    @settings(max_examples=EXAMPLES.get(label, DEFAULT_EXAMPLES), derandomize=True, deadline=None,
              database=None, suppress_health_check=list(HealthCheck))
    @given(case=cases)
    def run(case: Any) -> None:
        call(case)

    run()


class SigningProxy:
    """WSGI middleware that signs each request as the gateway does before the site sees it."""

    def __init__(self, app: Any, identity: SiteIdentity, site_id: str) -> None:
        self.app, self.identity, self.site_id = app, identity, site_id

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        body = environ["wsgi.input"].read()
        environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(body), str(len(body))
        request = Request(environ)
        headers = {"Content-Type": environ.get("CONTENT_TYPE", ""), SITE_HEADER: self.site_id}
        try:
            signed = sign_request(self.identity, request.method, request.url, headers, body,
                                  components=RETRIEVE_COMPONENTS)
        except HansaError:  # e.g. no Content-Type to cover: the site must refuse it unsigned
            signed = {}
        for name, value in {SITE_HEADER: self.site_id, **signed}.items():
            environ["HTTP_" + name.upper().replace("-", "_")] = value
        return self.app(environ, start_response)


@pytest.fixture(scope="module")
def gateway_schema(federation) -> Any:
    return schemathesis.openapi.from_wsgi("/v1/openapi.json", federation.gateway_app)


@pytest.fixture(scope="module")
def site_schema(federation) -> Any:
    site = create_site_app(federation.sites["govt"].ctx)
    return schemathesis.openapi.from_wsgi(
        "/v1/openapi.json", SigningProxy(site, gateway_identity(federation.workdir / "gateway"), "govt"))


@pytest.mark.parametrize("label", _operations("hansa.gateway.http"))
def test_gateway_api_conforms_to_its_spec(label: str, gateway_schema, federation) -> None:
    auth = {"Authorization": f"Bearer {federation.api_key}"}
    _fuzz(gateway_schema, label, lambda case: case.call_and_validate(headers=auth))


@pytest.mark.parametrize("label", _operations("hansa.plugin"))
def test_site_api_conforms_to_its_spec(label: str, site_schema) -> None:
    _fuzz(site_schema, label, lambda case: case.call_and_validate())


def test_site_accepts_a_whole_float_top_k(site_schema) -> None:
    case = site_schema.find_operation_by_label("POST /v1/retrieve").Case(body={"question": "What is FEMA?", "top_k": 5.0})
    response = case.call()
    assert response.status_code == 200, response.text


ADMIN_KEY = "fuzz-admin-key-0123456789abcdefghij"


@pytest.fixture(scope="module")
def admin_schema(in_process_gateway, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The spec served by a gateway that has an admin key (the federation's has none: 404s) and
    has answered a question, so the admin document holds a recent query with its trace."""
    from hansa.gateway.trust.apikeys import API_KEYS_FILE, ApiKeyStore
    from hansa.gateway.http.app import create_gateway_app
    from hansa.gateway.query.request import QueryRequest

    gateway = in_process_gateway(ApiKeyStore(tmp_path_factory.mktemp("admin-keys") / API_KEYS_FILE),
                                 admin_key=ADMIN_KEY)
    gateway.query(QueryRequest(question="What does FEMA do after a disaster?"), "fuzz")
    yield schemathesis.openapi.from_wsgi("/v1/openapi.json", create_gateway_app(gateway))
    gateway.close()


@pytest.mark.parametrize("label", [op for op in _operations("hansa.gateway.http") if " /admin" in op])
def test_admin_api_conforms_to_its_spec_with_the_admin_key(label: str, admin_schema) -> None:
    _fuzz(admin_schema, label, lambda case: case.call_and_validate(headers={"Authorization": f"Bearer {ADMIN_KEY}"}))
