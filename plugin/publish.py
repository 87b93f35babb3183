"""`hansa site publish`: sign the site's current community summaries and hand them to the gateway.

What leaves the site: per community an embedding, its richness (entity/chunk/document counts), its
level, and the summary text only if the site's policy (`[site] publish_text`) allows it.

Why local state (<home>/publish_state.json): the gateway refuses rollback and replay, so each
summary's `version` must only ever go up, and only when its content changed (an unchanged summary
keeps its version, so re-publishing is cheap to verify), and the publication `sequence` must
strictly increase. Versions of summaries that disappear are remembered, so a community that comes
back later continues above its old version. The new state is saved only once the publication is
delivered (the gateway accepted it, or it was written to a file): a refused attempt changes nothing.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import numpy as np
import requests

from hansa.adapters.records import Community
from hansa.core.errors import (
    BackendError,
    ConfigError,
    ConflictError,
    HansaError,
    InputError,
    NotFoundError,
    VerificationError,
)
from hansa.core.jsonsafe import dumps, loads_strict
from hansa.core.logs import get_logger
from hansa.plugin.install import check_site_file, load_identity, write_bytes_atomic, write_json_atomic
from hansa.plugin.site import SUMMARIES, SiteContext
from hansa.sync.publication import build_publication, summary_sha256
from hansa.sync.vectors import encode_vector
from hansa.sync.wire import EmbeddingSpace, Richness, SummaryRecord

log = get_logger(__name__)

STATE_FILENAME = "publish_state.json"
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 60.0  # the gateway verifies and indexes the whole set before it answers
MAX_RESPONSE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class PublishResult:
    site_id: str
    sequence: int
    summaries: int  # records in this publication (the site's whole current set)
    changed: int  # new records or records whose content changed (their version went up)
    retired: int  # records of the previous publication that are no longer published
    bytes: int  # size of the signed envelope
    destination: str  # the gateway endpoint or the file written
    gateway_response: dict[str, Any] | None = None


@dataclass
class _State:
    sequence: int  # of the last delivered publication (0: never published)
    versions: dict[str, dict[str, Any]]  # summary id -> {"version", "content_sha256"}, never forgotten
    current: list[str]  # ids in the last delivered publication

    def to_json(self) -> dict[str, Any]:
        return {"sequence": self.sequence, "summaries": self.versions, "current": self.current}


def state_file(ctx: SiteContext) -> Path:
    return ctx.cfg.home / STATE_FILENAME


def read_state(ctx: SiteContext) -> _State:
    path = state_file(ctx)
    if not path.is_file():
        return _State(sequence=0, versions={}, current=[])
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        state = _State(sequence=int(data["sequence"]), versions=dict(data["summaries"]), current=list(data["current"]))
        for entry in state.versions.values():
            int(entry["version"]), str(entry["content_sha256"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"{path} is damaged ({exc}): restore it from a backup; without it the gateway will refuse "
            "lower sequence numbers and versions"
        ) from exc
    return state


def _content_sha(record: SummaryRecord) -> str:
    """A record's hash without its version: what decides whether the version must go up."""
    return summary_sha256(dataclasses.replace(record, version=0))


def _records(ctx: SiteContext, communities: list[Community], state: _State) -> tuple[list[SummaryRecord], _State, int]:
    vectors = ctx.vectors.get(SUMMARIES, [c.id for c in communities])
    missing = [c.id for c in communities if c.id not in vectors]
    if missing:
        raise ConflictError(
            f"{len(missing)} communities have no summary vector (first: {missing[0]!r}): "
            "run `hansa site communities` again, then publish"
        )
    publish_text = ctx.cfg.site.publish_text
    records: list[SummaryRecord] = []
    versions = {k: dict(v) for k, v in state.versions.items()}
    changed = 0
    for community in communities:
        draft = SummaryRecord(
            summary_id=community.id,
            version=0,
            vector_b64=encode_vector(np.asarray(vectors[community.id], dtype=np.float32)),
            richness=Richness(
                entities=len(community.entity_ids),
                chunks=len(community.chunk_ids),
                documents=len(community.doc_ids),
            ),
            level=community.level,
            text=(community.summary or None) if publish_text else None,
        )
        sha = _content_sha(draft)
        previous = versions.get(community.id)
        if previous is None or previous["content_sha256"] != sha:
            version = int(previous["version"]) + 1 if previous else 1
            versions[community.id] = {"version": version, "content_sha256": sha}
            changed += 1
        records.append(dataclasses.replace(draft, version=int(versions[community.id]["version"])))
    new_state = _State(sequence=state.sequence + 1, versions=versions, current=sorted(c.id for c in communities))
    return records, new_state, changed


def publication_url(gateway_url: str, site_id: str) -> str:
    parts = urlsplit(gateway_url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ConfigError(f"gateway URL {gateway_url!r} must be http(s)://host[:port][/path] without query")
    return f"{gateway_url.strip().rstrip('/')}/v1/sites/{quote(site_id)}/publications"


def _deliver(url: str, body: bytes) -> dict[str, Any]:
    """POST the envelope; no redirects (a publication goes to the configured gateway or nowhere)."""
    try:
        with requests.post(
            url,
            data=body,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
            timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S),
            allow_redirects=False,
            stream=True,
        ) as resp:
            raw = resp.raw.read(MAX_RESPONSE_BYTES + 1, decode_content=True)
            status = resp.status_code
            location = resp.headers.get("Location", "")
    except requests.RequestException as exc:
        raise BackendError(f"could not reach the gateway at {url}: {exc}") from exc
    answer = _parse_answer(raw)
    if 200 <= status < 300:
        return answer
    if 300 <= status < 400:
        raise BackendError(
            f"the gateway answered {status} with a redirect to {location!r}; publications are never sent "
            "on to another address: configure the gateway's final URL"
        )
    message = answer.get("error") or f"HTTP {status}"
    error: type[HansaError] = {403: VerificationError, 404: NotFoundError, 409: ConflictError}.get(
        status, InputError if status < 500 else BackendError
    )
    hint = {
        403: " (is this site's public key enrolled at the gateway for this site id? `hansa site status` shows it)",
        404: " (is this site enrolled at the gateway?)",
        409: " (the gateway holds a newer publication; if this site's publish_state.json was lost, restore it)",
    }.get(status, "")
    raise error(f"the gateway refused the publication: {message}{hint}")


def _parse_answer(raw: bytes) -> dict[str, Any]:
    if len(raw) > MAX_RESPONSE_BYTES:
        return {"error": f"gateway response larger than {MAX_RESPONSE_BYTES} bytes (ignored)"}
    try:
        value = loads_strict(raw) if raw else {}
    except InputError:
        return {"error": raw[:200].decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {"response": value}


def publish_summaries(
    ctx: SiteContext,
    gateway_url: str | None = None,
    now: datetime | None = None,
    out: Path | None = None,
) -> PublishResult:
    """Sign the whole current summary set and deliver it to the gateway, or write it to `out`."""
    site_id = ctx.site_id
    check_site_file(ctx)
    identity = load_identity(ctx)
    gateway_url = gateway_url or (None if out is not None else ctx.cfg.site.gateway_url) or None
    if gateway_url is None and out is None:
        raise ConfigError("nowhere to publish: pass --gateway URL or --out FILE, or set [site] gateway_url")
    url = publication_url(gateway_url, site_id) if gateway_url else None

    communities = ctx.graph.communities()
    if not communities:
        raise NotFoundError("this site has no communities to publish: run `hansa site communities` first")
    state = read_state(ctx)
    records, new_state, changed = _records(ctx, communities, state)
    envelope = build_publication(
        identity,
        site_id,
        new_state.sequence,
        EmbeddingSpace(model_id=ctx.embedder.model_id, dim=ctx.embedder.dim),
        records,
        ttl=timedelta(hours=ctx.cfg.site.publication_ttl_hours),
        now=now,
    )
    body = dumps(envelope)

    answer: dict[str, Any] | None = None
    if url is not None:
        answer = _deliver(url, body)
    if out is not None:
        write_bytes_atomic(Path(out), body)
    write_json_atomic(state_file(ctx), new_state.to_json())
    result = PublishResult(
        site_id=site_id,
        sequence=new_state.sequence,
        summaries=len(records),
        changed=changed,
        retired=len(set(state.current) - set(new_state.current)),
        bytes=len(body),
        destination=url if url is not None else str(out),
        gateway_response=answer,
    )
    log.info(
        "publish.done",
        site_id=site_id,
        sequence=result.sequence,
        summaries=result.summaries,
        changed=changed,
        bytes=result.bytes,
        destination=result.destination,
    )
    return result
