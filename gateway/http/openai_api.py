"""The federation behind the API every client already speaks: OpenAI's chat completions.

Endpoints (a Flask blueprint registered by gateway.http.app):
  GET  /v1/models                 the federation as one model, MODEL_ID
  GET  /v1/models/<model>         that model (404 for any other)
  POST /v1/chat/completions       messages -> the federation's answer; `stream: true` sends it as
                                  server-sent events (`data: {chunk}` ... `data: [DONE]`)

Authentication is the gateway's own: an API key as a bearer token, checked before any body is read
(the same check as /v1/query). The last user message is the question; the user's earlier
messages become QueryRequest.conversation (system, developer and assistant messages are accepted and
not used: the federation answers from the sites' evidence only). Roles outside those (tool,
function) and content parts other than text are refused.

Citations and the per-site summary travel in the response twice over: as the message's
`annotations` (OpenAI's url_citation shape: `url` is `hansa://<site>/<doc>`, plus title, snippet,
page and source) and in the documented extension field `hansa: {citations, sites, trace,
abstained, confidence, short_answer}`. An abstaining answer says so in its content ("The federation
holds no answer to this question ...") and with `hansa.abstained: true`.
A streamed answer carries them on its last content chunk.

Every refusal is OpenAI's error object `{"error": {"message", "type", "param", "code"}}` with a
4xx status; when every called site failed it is a 502 with the per-site detail. The answer is
computed before the first byte is streamed, so a client that disconnects mid-stream leaves
nothing running (the generator is closed; the query already ended within its deadline).
"""
from __future__ import annotations

import re
import time
import uuid
from typing import Any, Iterator

from flask import Blueprint, Response, request
from werkzeug.exceptions import HTTPException

from hansa.core.errors import HansaError, InputError
from hansa.core.jsonsafe import dumps
from hansa.core.logs import get_logger
from hansa.gateway.query.call import all_failed
from hansa.gateway.query.engine import QueryTrace
from hansa.gateway.query.request import QueryRequest
from hansa.gateway.query.request import MAX_CONVERSATION_TURNS
from hansa.gateway.service import Gateway

log = get_logger(__name__)

MODEL_ID = "hansa-federation"
ROLES = frozenset({"system", "developer", "user", "assistant"})
# Parameters OpenAI clients commonly send that change nothing for an extractive federation: accepted
# when well-typed (as openapi.json documents them), then ignored.
IGNORED: dict[str, tuple[type, ...]] = {
    "temperature": (int, float), "top_p": (int, float), "max_tokens": (int,), "max_completion_tokens": (int,),
    "presence_penalty": (int, float), "frequency_penalty": (int, float), "seed": (int,), "user": (str,),
    "stream_options": (dict,)}
KNOWN = frozenset(IGNORED) | {"model", "messages", "stream", "n"}
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 409: "conflict_error", 413: "invalid_request_error",
                429: "rate_limit_error"}


class ChatError(InputError):
    """A refused chat request, naming the parameter at fault (OpenAI's `param`) and a `code`."""

    def __init__(self, message: str, param: str | None = None, code: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.param, self.code, self.http_status = param, code, status


class UpstreamError(HansaError):
    """Every site the query called failed: a 502 carrying the per-site summary."""

    http_status = 502

    def __init__(self, sites: dict[str, Any]) -> None:
        super().__init__(f"every called site failed ({sites['failed']} failed, {sites['timed_out']} timed out)")
        self.sites = sites


def error_body(exc: BaseException, status: int) -> dict[str, Any]:
    """OpenAI's error object for `exc`."""
    err = {"message": str(exc) if isinstance(exc, HansaError) else getattr(exc, "description", None) or str(exc),
           "type": _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error"),
           "param": getattr(exc, "param", None), "code": getattr(exc, "code", None)}
    if isinstance(exc, HTTPException):
        err["code"] = exc.name.lower().replace(" ", "_")
    if isinstance(exc, UpstreamError):
        err["code"] = "all_sites_failed"
        return {"error": err, "hansa": {"sites": exc.sites}}
    return {"error": err}


def _text(content: Any, i: int, role: str) -> str:
    """A message's text: a string, or a list of text parts (images, audio, files are refused). A
    user message holds one part, so each turn stays one bounded question (as openapi.json says)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content:
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or set(part) != {"type", "text"} \
                    or not isinstance(part.get("text"), str):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise ChatError(f"messages[{i}].content[{j}]: only text parts {{type: text, text}} are supported, "
                                f"got {kind!r}", f"messages[{i}].content", "unsupported_content")
        if role == "user" and len(content) > 1:
            raise ChatError(f"messages[{i}].content: a user message holds one text part", f"messages[{i}].content",
                            "unsupported_content")
        return "\n".join(part["text"] for part in content)
    raise ChatError(f"messages[{i}].content must be a string or a non-empty list of text parts",
                    f"messages[{i}].content", "invalid_content")


def parse_chat(body: Any) -> tuple[QueryRequest, bool]:
    """The QueryRequest a chat completion body asks, and whether to stream it."""
    if not isinstance(body, dict):
        raise ChatError('send a JSON object like {"model": "hansa-federation", "messages": [...]}')
    extra = sorted(set(body) - KNOWN)
    if extra:
        raise ChatError(f"unrecognized request argument(s): {extra}", extra[0], "unknown_parameter")
    for name, types in IGNORED.items():
        if name in body and (not isinstance(body[name], types) or isinstance(body[name], bool)):
            raise ChatError(f"{name} must be of type {'/'.join(t.__name__ for t in types)}", name, "invalid_type")
    if body.get("model") != MODEL_ID:
        raise ChatError(f"the model {body.get('model')!r} does not exist; this gateway serves {MODEL_ID!r}",
                        "model", "model_not_found", 404)
    n = body.get("n", 1)
    if n != 1 or isinstance(n, bool) or not isinstance(n, (int, float)):
        raise ChatError("n must be 1: the federation gives one answer", "n", "unsupported_value")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ChatError("stream must be true or false", "stream", "invalid_type")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ChatError("messages must be a non-empty list", "messages", "empty_messages")
    turns: list[str] = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            role = m.get("role") if isinstance(m, dict) else None
            raise ChatError(f"messages[{i}].role must be one of {sorted(ROLES)}, got {role!r}",
                            f"messages[{i}].role", "invalid_role")
        if not {"role", "content"} <= set(m) <= {"role", "content", "name"} or not isinstance(m.get("name", ""), str):
            raise ChatError(f"messages[{i}] must hold role, content and optionally name (a string)",
                            f"messages[{i}]", "invalid_message")
        text = _text(m["content"], i, m["role"])
        if m["role"] == "user":
            turns.append(text)
    if not turns:
        raise ChatError("messages must hold a user message: the last one is the question", "messages",
                        "no_user_message")
    if len(turns) > MAX_CONVERSATION_TURNS + 1:
        raise ChatError(f"too many user turns: at most {MAX_CONVERSATION_TURNS + 1}", "messages", "too_long")
    try:
        query = QueryRequest(question=turns[-1], conversation=tuple(turns[:-1]))
    except InputError as exc:
        raise ChatError(str(exc), "messages", "invalid_value") from exc
    return query, stream


def annotations(answer: str, citations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One url_citation per marker the answer carries, spanning the marker ([n])."""
    out = []
    for c in citations:
        marker = f"[{c['n']}]"
        start = answer.find(marker)
        if start < 0:
            continue
        cite = {"start_index": start, "end_index": start + len(marker), "title": c["title"],
                "url": f"hansa://{c['site_id']}/{c['doc_id']}", "snippet": c.get("snippet", "")}
        for key in ("page", "source", "site_id", "doc_id"):
            if c.get(key) is not None:
                cite[key] = c[key]
        out.append({"type": "url_citation", "url_citation": cite})
    return out


def usage(trace: QueryTrace) -> dict[str, Any]:
    """OpenAI's usage: the tokens answer synthesis spent (0 for an extractive answer); `estimated`
    is added when the LLM endpoint reported no counts and they were estimated from words."""
    reply = trace.synthesis.reply if trace.synthesis is not None else None
    prompt, completion = (reply.prompt_tokens, reply.completion_tokens) if reply is not None else (0, 0)
    out: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if reply is not None and reply.estimated:
        out["estimated"] = True
    return out


def _sse(obj: Any) -> str:
    return f"data: {dumps(obj).decode()}\n\n"


def create_openai_blueprint(gateway: Gateway) -> Blueprint:
    bp = Blueprint("openai", __name__)

    @bp.errorhandler(HansaError)
    def _hansa_error(exc: HansaError) -> Response:
        resp = _json(error_body(exc, exc.http_status), exc.http_status)
        resp.headers.update(getattr(exc, "http_headers", {}))
        return resp

    @bp.errorhandler(HTTPException)
    def _http_error(exc: HTTPException) -> Response:
        return _json(error_body(exc, exc.code or 500), exc.code or 500)

    @bp.get("/v1/models")
    def models() -> Response:
        gateway.api_keys.authenticate(request.headers.get("Authorization"))
        return _json({"object": "list", "data": [_model()]})

    @bp.get("/v1/models/<model>")
    def model(model: str) -> Response:
        gateway.api_keys.authenticate(request.headers.get("Authorization"))
        if model != MODEL_ID:
            raise ChatError(f"the model {model!r} does not exist", "model", "model_not_found", 404)
        return _json(_model())

    @bp.post("/v1/chat/completions")
    def chat() -> Response:
        from hansa.gateway.http.app import _body  # the strict, size-capped body reader

        client = gateway.api_keys.authenticate(request.headers.get("Authorization"))  # before any body
        query, stream = parse_chat(_body())
        result = gateway.query(query, client)
        if all_failed(result.sites, query.budget):
            raise UpstreamError(result.sites)
        message = {"role": "assistant", "content": result.answer, "refusal": None,
                   "annotations": annotations(result.answer, result.citations)}
        body = result.to_json()  # abstained, confidence, short_answer: what /v1/query says beside the answer
        extension = {"citations": result.citations, "sites": result.sites,
                     **{k: body[k] for k in ("trace", "abstained", "confidence", "short_answer") if k in body}}
        head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": MODEL_ID}
        if not stream:
            return _json({**head, "object": "chat.completion",
                          "choices": [{"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}],
                          "usage": usage(result.trace),
                          "hansa": extension})
        return Response(_stream(head, message, extension), mimetype="text/event-stream",
                        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    return bp


def _stream(head: dict[str, Any], message: dict[str, Any], extension: dict[str, Any]) -> Iterator[str]:
    """The answer as chunks: the role, the content a sentence at a time, then the last chunk with
    finish_reason, the annotations and the hansa extension, then [DONE]."""
    def chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> str:
        return _sse({**head, "object": "chat.completion.chunk",
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}], **more})

    try:
        yield chunk({"role": "assistant", "content": ""})
        content = message["content"]
        pieces = re.split(r"(?<=\]) ", content)  # a sentence and its [n] marker per chunk
        for i, piece in enumerate(pieces):
            yield chunk({"content": piece if i == len(pieces) - 1 else piece + " "})
        yield chunk({"annotations": message["annotations"]}, "stop", hansa=extension)
        yield "data: [DONE]\n\n"
    except GeneratorExit:
        log.info("chat.stream.disconnected", id=head["id"])
        raise


def _model() -> dict[str, Any]:
    return {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "hansa",
            "description": "the federation: questions routed to its sites, their cited answers fused"}


def _json(obj: Any, status: int = 200) -> Response:
    return Response(dumps(obj), status=status, mimetype="application/json")
