"""The OpenAI-compatible API: refusals as OpenAI error objects (fast, no server), then the real
`openai` client against the real two-site federation served on loopback, streaming included."""
from __future__ import annotations

import json

import openai
import pytest
import requests

from hansa.gateway.trust import admin
from hansa.gateway.http.openai_api import MODEL_ID, ChatError, parse_chat

USER = {"role": "user", "content": "What does the Federal Emergency Management Agency do?"}


def body(**over):
    return {"model": MODEL_ID, "messages": [USER], **over}


def test_messages_become_the_question_and_its_conversation() -> None:
    query, stream = parse_chat(body(messages=[
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "Tell me about FEMA."},
        {"role": "assistant", "content": "FEMA is an agency."},
        {"role": "user", "content": [{"type": "text", "text": "What does it fund?"}]}], stream=True))
    assert query.question == "What does it fund?"
    assert query.conversation == ("Tell me about FEMA.",)
    assert stream is True


@pytest.mark.parametrize("bad, param, status", [
    (body(messages=[]), "messages", 400),
    (body(messages=None), "messages", 400),
    (body(messages=[{"role": "tool", "content": "x"}]), "messages[0].role", 400),
    (body(messages=[{"role": "system", "content": "x"}]), "messages", 400),
    (body(temperature="hot"), "temperature", 400),
    (body(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]),
     "messages[0].content", 400),
    (body(messages=[{"role": "user", "content": "x" * 5000}]), "messages", 400),
    (body(messages=[USER] * 40), "messages", 400),
    (body(n=2), "n", 400),
    (body(model="gpt-4o"), "model", 404),
    (body(tools=[]), "tools", 400),
])
def test_bad_requests_are_refused_naming_the_parameter(bad, param, status) -> None:
    with pytest.raises(ChatError) as info:
        parse_chat(bad)
    assert info.value.param == param and info.value.http_status == status


# -- over HTTP, with the real openai client ------------------------------------------------------------
@pytest.fixture(scope="module")
def client(federation) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{federation.gateway_url}/v1", api_key=federation.api_key, max_retries=0,
                         timeout=120)


def test_models_lists_the_federation(client) -> None:
    assert [m.id for m in client.models.list()] == [MODEL_ID]
    assert client.models.retrieve(MODEL_ID).id == MODEL_ID


def test_a_chat_completion_carries_the_answer_its_citations_and_the_site_summary(client) -> None:
    resp = client.chat.completions.create(model=MODEL_ID, messages=[USER])
    message = resp.choices[0].message
    assert message.content and not message.content.startswith("No answer")
    assert message.annotations, "the answer's [n] markers come back as url_citation annotations"
    for ann in message.annotations:
        cite = ann.url_citation
        assert message.content[cite.start_index:cite.end_index].startswith("[")
        assert cite.title and cite.url.startswith("hansa://")
        assert cite.model_extra["snippet"] in message.content  # the cited sentence, as the answer says it
    ext = resp.model_extra["hansa"]
    assert ext["sites"]["successful"] >= 1 and ext["sites"]["partial"] is False
    assert ext["sites"]["total"] == len(ext["trace"]["sites_called"])
    used = [c for c in ext["citations"] if c["used"]]
    assert {f"[{c['n']}]" for c in used} <= set(__import__("re").findall(r"\[\d+\]", message.content))


def test_a_streamed_completion_adds_up_to_the_same_answer(client) -> None:
    chunks = list(client.chat.completions.create(model=MODEL_ID, messages=[USER], stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text and chunks[-1].choices[0].finish_reason == "stop"
    assert chunks[-1].model_extra["hansa"]["citations"]
    plain = client.chat.completions.create(model=MODEL_ID, messages=[USER]).choices[0].message.content
    assert text == plain


def test_refusals_reach_the_client_as_openai_errors(client, federation) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="gpt-4o", messages=[USER])
    assert info.value.body["param"] == "model"
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODEL_ID, messages=[])
    assert info.value.body["code"] == "empty_messages"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{federation.gateway_url}/v1", api_key="wrong", max_retries=0).models.list()
    raw = requests.post(f"{federation.gateway_url}/v1/chat/completions", data=b"{not json",
                        headers={"Authorization": f"Bearer {federation.api_key}", "Content-Type": "application/json"},
                        timeout=30)
    assert raw.status_code == 400 and set(raw.json()["error"]) == {"message", "type", "param", "code"}
    untyped = requests.post(f"{federation.gateway_url}/v1/chat/completions", data=b"{}",  # no Content-Type
                            headers={"Authorization": f"Bearer {federation.api_key}"}, timeout=30)
    assert untyped.status_code == 415 and "Content-Type: application/json" in untyped.json()["error"]["message"]


def test_a_client_that_leaves_mid_stream_leaves_the_gateway_serving(client, federation) -> None:
    with requests.post(f"{federation.gateway_url}/v1/chat/completions", json=body(stream=True), stream=True,
                       headers={"Authorization": f"Bearer {federation.api_key}"}, timeout=120) as resp:
        first = next(resp.iter_lines())
        assert first.startswith(b"data: ") and json.loads(first[6:])["object"] == "chat.completion.chunk"
    assert client.chat.completions.create(model=MODEL_ID, messages=[USER]).choices[0].message.content


def test_query_carries_the_site_summary_and_readable_citations(federation) -> None:
    out = federation.query({"question": USER["content"]}).json()
    assert out["sites"]["successful"] >= 1 and out["sites"]["partial"] is False
    assert all(c["title"] for c in out["citations"])
    assert all(c["snippet"] in out["answer"] for c in out["citations"] if c["used"])


# -- every called site failed: a 502 with the per-site detail, on both APIs ------------------------------
@pytest.fixture(scope="module")
def dead_gateway(federation, tmp_path_factory):
    from hansa.adapters.vector.milvus import MilvusVectorStore
    from hansa.core.config import GatewayConfig
    from hansa.gateway.http.app import create_gateway_app
    from hansa.gateway.trust.registry import SiteRegistry
    from hansa.gateway.service import Gateway
    from hansa.sync.keys import SiteIdentity

    root = tmp_path_factory.mktemp("dead")
    store = MilvusVectorStore(str(root / "x.db"))
    registry = SiteRegistry(root / "gateway" / "registry.json")
    admin.enroll(registry, "dead", "http://127.0.0.1:9/nobody", [SiteIdentity.generate().public_key_b64])  # port 9: discard, closed
    cfg = GatewayConfig(site_timeout_s=2.0, allow_private_addresses=True)
    gw = Gateway.open(cfg, embedder=next(iter(federation.sites.values())).ctx.embedder, vector_store=store,
                      registry=registry)
    yield create_gateway_app(gw).test_client(), {"Authorization": "Bearer " + gw.api_keys.create("dead-test")}
    gw.close()
    store.close()


def test_when_every_called_site_fails_the_answer_is_a_502_with_the_detail(dead_gateway) -> None:
    client, auth = dead_gateway
    resp = client.post("/v1/query", json={"question": USER["content"], "sites": ["dead"]}, headers=auth)
    assert resp.status_code == 502, resp.get_json()
    sites = resp.get_json()["sites"]
    assert sites["total"] == 1 and sites["successful"] == 0 and sites["failed"] + sites["timed_out"] == 1
    assert sites["partial"] is True and sites["details"][0]["site_id"] == "dead"
    chat = client.post("/v1/chat/completions", json=body(), headers=auth)  # routes to no one: a 200 "No answer"
    assert chat.status_code == 200 and chat.get_json()["hansa"]["sites"]["total"] == 0


class EchoFirstEvidence:
    """A stand-in for a hosted LLM (hansa's LLM port): restates the first evidence line, citing it."""

    def complete(self, messages, *, max_tokens: int = 512, temperature: float = 0.0) -> str:
        first = messages[-1]["content"].split("\n")[1]  # '<evidence id="n">sentence</evidence>' after "Evidence:"
        n, sentence = __import__("re").fullmatch(r'<evidence id="(\d+)">(.*)</evidence>', first).groups()
        return f"{sentence} [{n}] The moon is made of cheese [{n}]."


def test_with_an_llm_both_apis_answer_from_checked_synthesis(federation) -> None:
    from hansa.gateway.http.app import create_gateway_app

    service = federation.gateway_service
    service.llm = EchoFirstEvidence()  # the service writes the answer; the adapters only serialize it
    try:
        client = create_gateway_app(service).test_client()
        auth = {"Authorization": f"Bearer {federation.api_key}"}
        out = client.post("/v1/query", json={"question": USER["content"]}, headers=auth).get_json()
        chat = client.post("/v1/chat/completions", json=body(), headers=auth).get_json()
    finally:
        service.llm = None
    synthesis = out["trace"]["synthesis"]
    assert synthesis["answer"] == "llm" and [d["sentence"] for d in synthesis["dropped"]][0].startswith("The moon")
    assert "cheese" not in out["answer"] and __import__("re").search(r"\[\d+\]", out["answer"])
    assert synthesis["tokens"]["estimated"] is True  # the double reports no usage
    assert out["trace"]["budget"]["spent"]["tokens"] == synthesis["tokens"]["total"] > 0
    assert "synthesize" in out["trace"]["stages_ms"]
    used = [c for c in out["citations"] if c["used"]]
    assert used and all(f"[{c['n']}]" in out["answer"] for c in used)  # used: the markers the written answer carries
    assert chat["hansa"]["trace"]["synthesis"]["answer"] == "llm"
    assert chat["choices"][0]["message"]["content"] == out["answer"]
    assert chat["usage"]["total_tokens"] == synthesis["tokens"]["total"] and chat["usage"]["estimated"] is True
