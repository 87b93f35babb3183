"""`hansa site publish`: sign the site's current community summaries and hand them to the gateway.

What leaves the site: per community an embedding, its richness (entity/chunk/document counts), its
level, and the summary text only if the site's policy (`[site] publish_text`) allows it; and, unless
`[site] publish_terms` is off, the site's term statistics (sync.terms, built by plugin.vocabulary).

Incremental: every publication signs the manifest of the whole current set, but carries only the
summaries that changed since the last publication the gateway accepted (its *base*), plus
tombstones for withdrawn ones (sync.publication). When the gateway holds another set than that
base (its durable copy lagged a crash, another gateway, a lost answer) it refuses with 409 and its
current sequence, and the site resends its whole set once, above that sequence.

Why local state (<home>/publish_state.json): the gateway refuses rollback and replay, so each
summary's `version` must only ever go up, and only when its content changed (an unchanged summary
keeps its version and is not resent), and the publication `sequence` must strictly increase.
Versions of summaries that disappear are remembered, so a community that comes back later
continues above its old version. The state also keeps the manifest the gateway last accepted: the
base of the next delta. It changes only once a publication was accepted (or written to a file):
a refused attempt changes nothing.

Delivery goes through the durable outbox (plugin.outbox): the envelope is on disk before the first
attempt, transient failures are retried with backoff, and whatever is still pending (a crash, a
gateway that stayed down) is resent — the same bytes — before anything new is published.
"""
from __future__ import annotations

import base64
import dataclasses
import json
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import numpy as np

from hansa.adapters.records import Community
from hansa.core.crash_points import crash_point
from hansa.core.errors import (
    ConfigError,
    ConflictError,
    HansaError,
    InputError,
    NotFoundError,
    VerificationError,
)
from hansa.core.jsonsafe import dumps
from hansa.core.logs import get_logger
from hansa.core.files import write_bytes_atomic, write_json_atomic
from hansa.plugin.install import check_site_file, load_identity
from hansa.plugin.outbox import Answer, Outbox, OutboxEntry, RetryPolicy, deliver
from hansa.plugin.site import SUMMARIES, SiteContext
from hansa.plugin.vocabulary import read_terms
from hansa.sync.publication import PublicationHead, build_publication, manifest_sha256, summary_sha256
from hansa.sync.vectors import encode_vector
from hansa.sync.wire import EmbeddingSpace, Richness, SummaryRecord, parse_utc

log = get_logger(__name__)

STATE_FILENAME = "publish_state.json"
# summary_set: reads of the graph before missing summary vectors are an error, and the pause between
# them (a rebuild in another process commits its graph and then deletes stale vectors in moments).
SET_READS = 3
SET_REREAD_PAUSE_S = 0.5


@dataclass(frozen=True)
class PublishResult:
    site_id: str
    sequence: int
    summaries: int  # summaries the site publishes after this publication (its whole current set)
    changed: int  # new records or records whose content changed (their version went up)
    retired: int  # records of the previous publication that are no longer published
    bytes: int  # size of the signed envelope
    destination: str  # the gateway endpoint or the file written
    gateway_response: dict[str, Any] | None = None
    sent: int = 0  # records the envelope carries (all of them for a full set)
    full: bool = True  # a full set (no base) or a delta


@dataclass
class _State:
    sequence: int  # highest sequence delivered or written to a file (0: never published)
    versions: dict[str, dict[str, Any]]  # summary id -> {"version", "content_sha256"}, never forgotten
    current: list[str]  # ids in the last delivered publication
    accepted: dict[str, Any] | None = None  # {"sequence", "manifest", "expires", "url"} the gateway last accepted

    def to_json(self) -> dict[str, Any]:
        return {"sequence": self.sequence, "summaries": self.versions, "current": self.current,
                "accepted": self.accepted}

    def head(self) -> PublicationHead | None:
        """The base of the next delta: the set the gateway last accepted from this site."""
        if self.accepted is None:
            return None
        manifest = {k: (int(v[0]), str(v[1])) for k, v in self.accepted["manifest"].items()}
        return PublicationHead(int(self.accepted["sequence"]), manifest)


def state_file(ctx: SiteContext) -> Path:
    return ctx.cfg.home / STATE_FILENAME


def read_state(ctx: SiteContext) -> _State:
    return read_state_in(ctx.cfg.home)


def read_state_in(home: Path) -> _State:
    """The publish state of the site whose home is `home` (for checks that open no store)."""
    path = home / STATE_FILENAME
    if not path.is_file():
        return _State(sequence=0, versions={}, current=[])
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        state = _State(sequence=int(data["sequence"]), versions=dict(data["summaries"]), current=list(data["current"]),
                       accepted=data.get("accepted"))
        for entry in state.versions.values():
            int(entry["version"]), str(entry["content_sha256"])
        state.head()
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(
            f"{path} is damaged ({exc}): restore it from a backup; without it the gateway will refuse "
            "lower sequence numbers and versions"
        ) from exc
    return state


def _content_sha(record: SummaryRecord) -> str:
    """A record's hash without its version: what decides whether the version must go up."""
    return summary_sha256(dataclasses.replace(record, version=0))


def summary_set(ctx: SiteContext) -> tuple[list[Community], dict[str, np.ndarray]]:
    """The stored communities and their summary vectors, read as one consistent set.

    Why re-read: `hansa site communities` in another process (a served site on a Milvus server)
    replaces the set in steps: the new vectors, then the graph (the commit point), then the stale
    vectors go. A reader that read the graph just before the commit and the vectors just after the
    deletion sees communities "without a vector" that the graph no longer holds (issue 34: the
    background re-publisher logged this while every current community had its vector). The graph
    is read again until it is stable; only a stable graph with vectors missing is an error."""
    communities = ctx.graph.communities()
    for attempt in range(SET_READS):
        vectors = ctx.vectors.get(SUMMARIES, [c.id for c in communities])
        missing = [c.id for c in communities if c.id not in vectors]
        if not missing:
            return communities, vectors
        if attempt + 1 < SET_READS:
            time.sleep(SET_REREAD_PAUSE_S)
            communities = ctx.graph.communities()
    raise ConflictError(
        f"{len(missing)} communities have no summary vector (first: {missing[0]!r}): "
        "run `hansa site communities` again, then publish"
    )


def _records(ctx: SiteContext, communities: list[Community], vectors: dict[str, np.ndarray],
             state: _State) -> tuple[list[SummaryRecord], dict[str, dict[str, Any]], int]:
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
            parent=community.parent or None,
        )
        sha = _content_sha(draft)
        previous = versions.get(community.id)
        if previous is None or previous["content_sha256"] != sha:
            version = int(previous["version"]) + 1 if previous else 1
            versions[community.id] = {"version": version, "content_sha256": sha}
            changed += 1
        records.append(dataclasses.replace(draft, version=int(versions[community.id]["version"])))
    return records, versions, changed


def publication_url(gateway_url: str, site_id: str) -> str:
    parts = urlsplit(gateway_url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ConfigError(f"gateway URL {gateway_url!r} must be http(s)://host[:port][/path] without query")
    return f"{gateway_url.strip().rstrip('/')}/v1/sites/{quote(site_id)}/publications"


def _refusal(answer: Answer) -> HansaError:
    """The error a final refusal becomes, with what the operator can do about it."""
    status = answer.status
    message = answer.body.get("error") or f"HTTP {status}"
    error: type[HansaError] = {403: VerificationError, 404: NotFoundError, 409: ConflictError}.get(status, InputError)
    hint = {
        403: " (is this site's public key enrolled at the gateway for this site id? `hansa site status` shows it)",
        404: " (is this site enrolled at the gateway?)",
        409: " (the gateway holds a newer publication; if this site's publish_state.json was lost, restore it)",
    }.get(status, "")
    return error(f"the gateway refused the publication: {message}{hint}")


def _holds(answer: Answer, entry: OutboxEntry) -> bool:
    """A 409 that names this very publication as the one in force: it was accepted before
    (its answer was lost) — same sequence, same manifest."""
    body = answer.body
    return (answer.status == 409 and body.get("current_sequence") == entry.sequence
            and body.get("current_manifest_sha256") == entry.manifest_sha256)


def _gateway_sequence(answer: Answer) -> int:
    value = answer.body.get("current_sequence")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _commit(ctx: SiteContext, entry: OutboxEntry, outbox: Outbox) -> None:
    """The gateway accepted `entry`: its state becomes the site's, then the entry goes."""
    state = read_state(ctx)
    new = dict(entry.commit["state"])
    new["sequence"] = max(int(new["sequence"]), state.sequence)
    write_json_atomic(state_file(ctx), new)
    outbox.remove(entry)


def _reserve(ctx: SiteContext, entry: OutboxEntry) -> None:
    """An entry whose fate is unknown is dropped: keep its sequence and versions reserved (the
    gateway may hold it), but not its manifest as a base."""
    state = read_state(ctx)
    versions = {k: dict(v) for k, v in state.versions.items()}
    for sid, v in dict(entry.commit["state"]["summaries"]).items():
        if sid not in versions or int(v["version"]) >= int(versions[sid]["version"]):
            versions[sid] = dict(v)
    write_json_atomic(state_file(ctx), _State(max(state.sequence, entry.sequence), versions, state.current,
                                              None).to_json())


@dataclass
class _Drain:
    """What resending the outbox taught: results, and what the next publication must respect."""

    results: list[PublishResult] = dataclasses.field(default_factory=list)
    floor: int = 0  # a new publication's sequence must be above this
    full: bool = False  # the gateway's set is unknown or differs from our base: send a full set


def _drain(ctx: SiteContext, outbox: Outbox, url: str | None, policy: RetryPolicy, now: datetime) -> _Drain:
    """Resend every pending publication, oldest first (its exact bytes, never re-signed)."""
    out = _Drain()
    for entry in outbox.pending():
        target = url or entry.url
        if parse_utc(entry.expires, "outbox entry") <= now:
            log.info("outbox.expired", sequence=entry.sequence, path=str(entry.path))
            _reserve(ctx, entry)
            outbox.remove(entry)
            out.floor, out.full = max(out.floor, entry.sequence), True
            continue
        answer = deliver(target, entry.body(), policy)  # BackendError: it stays for the next run
        if answer.accepted or _holds(answer, entry):
            _commit(ctx, entry, outbox)
            out.results.append(_result(ctx, entry.commit, len(entry.body()), target, answer.body))
            log.info("outbox.delivered", sequence=entry.sequence, status=answer.status)
            continue
        outbox.remove(entry)  # refused for good: resending the same bytes cannot help
        if answer.status == 409:  # the gateway holds another set: the next one goes in full, above it
            out.floor, out.full = max(out.floor, entry.sequence, _gateway_sequence(answer)), True
            log.info("outbox.superseded", sequence=entry.sequence, gateway_sequence=_gateway_sequence(answer))
            continue
        raise _refusal(answer)
    return out


def resend_pending(
    ctx: SiteContext, gateway_url: str | None = None, now: datetime | None = None, retry: RetryPolicy | None = None,
) -> list[PublishResult]:
    """`hansa site publish --retry`: deliver what the outbox holds; build nothing new."""
    configured = gateway_url or ctx.cfg.site.gateway_url
    url = publication_url(configured, ctx.site_id) if configured else None
    return _drain(ctx, Outbox(ctx.cfg.home), url, retry or RetryPolicy(), now or datetime.now(timezone.utc)).results


def publish_summaries(
    ctx: SiteContext,
    gateway_url: str | None = None,
    now: datetime | None = None,
    out: Path | None = None,
    retry: RetryPolicy | None = None,
) -> PublishResult:
    """Sign the current summary set and deliver it to the gateway (as a delta on what it last
    accepted), or write it to `out` (a full set). Pending outbox entries are delivered first."""
    site_id = ctx.site_id
    check_site_file(ctx)
    load_identity(ctx)  # a missing key fails before the outbox is touched
    gateway_url = gateway_url or (None if out is not None else ctx.cfg.site.gateway_url) or None
    if gateway_url is None and out is None:
        raise ConfigError("nowhere to publish: pass --gateway URL or --out FILE, or set [site] gateway_url")
    url = publication_url(gateway_url, site_id) if gateway_url else None
    moment = now or datetime.now(timezone.utc)
    policy = retry or RetryPolicy()

    if not ctx.graph.communities():
        raise NotFoundError("this site has no communities to publish: run `hansa site communities` first")
    outbox = Outbox(ctx.cfg.home)
    drained = _drain(ctx, outbox, url, policy, moment) if url is not None else _Drain()
    state = read_state(ctx)
    communities, vectors = summary_set(ctx)  # read after the drain's round trips, as one set
    records, versions, changed = _records(ctx, communities, vectors, state)
    ids = sorted(c.id for c in communities)
    retired = len(set(state.current) - set(ids))
    return _send_set(ctx, _Set(records, versions, ids, read_terms(ctx), changed, retired), url, out, outbox, drained,
                     state, policy, now)


def publish_withdrawal(
    ctx: SiteContext, gateway_url: str | None = None, now: datetime | None = None, retry: RetryPolicy | None = None,
) -> PublishResult:
    """Sign and deliver a publication that holds no summary and no term statistics: the site's
    withdrawal. The gateway then routes nothing to it (gateway.trust.registry `is_withdrawn`) without an
    admin revoking it, and a later publication brings it back. `hansa site uninstall` sends it
    first, while the site still has its key; it goes through the outbox like any publication."""
    configured = gateway_url or ctx.cfg.site.gateway_url
    accepted = read_state(ctx).accepted or {}
    url = publication_url(configured, ctx.site_id) if configured else accepted.get("url")
    if not url:
        raise ConfigError("nowhere to send the withdrawal: pass --gateway URL or set [site] gateway_url")
    policy = retry or RetryPolicy()
    outbox = Outbox(ctx.cfg.home)
    drained = _drain(ctx, outbox, url, policy, now or datetime.now(timezone.utc))  # nothing older may land after it
    state = read_state(ctx)
    withdrawal = _Set([], {k: dict(v) for k, v in state.versions.items()}, [], None, 0, len(state.current))
    result = _send_set(ctx, withdrawal, url, None, outbox, drained, state, policy, now)
    log.info("publish.withdrawn", site_id=ctx.site_id, sequence=result.sequence)
    return result


@dataclass(frozen=True)
class _Set:
    """What one publication signs: the whole current set and what changed since the last."""

    records: list[SummaryRecord]
    versions: dict[str, dict[str, Any]]
    ids: list[str]
    terms: Any  # TermSketch | None
    changed: int
    retired: int


def _send_set(ctx: SiteContext, new: _Set, url: str | None, out: Path | None, outbox: Outbox, drained: _Drain,
              state: _State, policy: RetryPolicy, now: datetime | None) -> PublishResult:
    """Sign `new` (a delta on what the gateway last accepted, or a full set) and deliver it, or
    write it to `out` when there is no gateway."""
    site_id = ctx.site_id
    identity = load_identity(ctx)
    records, versions, ids, terms, changed, retired = (new.records, new.versions, new.ids, new.terms, new.changed,
                                                        new.retired)
    space = EmbeddingSpace.of(ctx.embedder)
    ttl = timedelta(hours=ctx.cfg.site.publication_ttl_hours)

    def sign(sequence: int, base: PublicationHead | None) -> tuple[dict[str, Any], dict[str, Any]]:
        envelope = build_publication(identity, site_id, sequence, space, records, ttl, now=now, base=base, terms=terms)
        manifest = {r.summary_id: [r.version, summary_sha256(r)] for r in records}
        sent = len(records) if base is None else sum(
            1 for r in records if base.manifest.get(r.summary_id) != (manifest[r.summary_id][0], manifest[r.summary_id][1]))
        accepted = {"sequence": sequence, "manifest": manifest, "expires": _expiry(envelope)}
        if url is not None:  # where it went: where a withdrawal goes when no gateway is configured
            accepted["url"] = url
        commit = {"state": _State(sequence, versions, ids, accepted).to_json(),
                  "result": {"changed": changed, "retired": retired, "sent": sent, "full": base is None}}
        return envelope, commit

    if url is None:  # to a file: a full set, which any gateway can take
        assert out is not None
        envelope, commit = sign(state.sequence + 1, None)
        body = dumps(envelope)
        write_bytes_atomic(Path(out), body)
        write_json_atomic(state_file(ctx), _State(state.sequence + 1, versions, ids, state.accepted).to_json())
        return _result(ctx, commit, len(body), str(out), None)

    base = None if drained.full else state.head()
    sequence = max(state.sequence, drained.floor) + 1
    for attempt in range(2):  # as planned; once more in full if the gateway holds another set
        envelope, commit = sign(sequence, base)
        manifest = {k: tuple(v) for k, v in commit["state"]["accepted"]["manifest"].items()}
        entry = outbox.put(sequence, url, envelope, _expiry(envelope), manifest_sha256(manifest), commit)
        crash_point("publish.after_outbox")
        try:
            answer = deliver(url, entry.body(), policy)
        except HansaError as exc:
            raise type(exc)(f"{exc}; the publication stays in {entry.path} and is resent by the next "
                            "`hansa site publish` (or `hansa site publish --retry`)") from exc
        if answer.accepted or _holds(answer, entry):
            crash_point("publish.after_delivery")
            _commit(ctx, entry, outbox)
            if out is not None:
                write_bytes_atomic(Path(out), entry.body())
            return _result(ctx, commit, len(entry.body()), url, answer.body)
        outbox.remove(entry)
        gateway_sequence = _gateway_sequence(answer)
        # A delta on a set the gateway does not hold, or a sequence not above its floor (a lost
        # publish state): the whole set, above what the gateway holds. Anything else is final.
        if attempt or answer.status != 409 or (base is None and gateway_sequence < sequence):
            raise _refusal(answer)
        log.info("publish.resend_full", site_id=site_id, refused_sequence=sequence, gateway_sequence=gateway_sequence)
        base, sequence = None, max(sequence, gateway_sequence) + 1
    raise AssertionError("unreachable: the second attempt returns or raises")


def _expiry(envelope: dict[str, Any]) -> str:
    """The `expires` of a publication this site just signed (read back from its own payload)."""
    return str(json.loads(base64.b64decode(envelope["payload"]))["expires"])


def _result(ctx: SiteContext, commit: dict[str, Any], size: int, destination: str, answer: dict[str, Any] | None) -> PublishResult:
    state, info = commit["state"], commit["result"]
    result = PublishResult(
        site_id=ctx.site_id,
        sequence=int(state["sequence"]),
        summaries=len(state["current"]),
        changed=int(info["changed"]),
        retired=int(info["retired"]),
        bytes=size,
        destination=destination,
        gateway_response=answer,
        sent=int(info["sent"]),
        full=bool(info["full"]),
    )
    log.info("publish.done", site_id=result.site_id, sequence=result.sequence, summaries=result.summaries,
             changed=result.changed, sent=result.sent, full=result.full, bytes=result.bytes,
             destination=result.destination)
    return result


def accepted_expiry(ctx: SiteContext) -> datetime | None:
    """When the publication the gateway last accepted from this site expires; None when no
    accepted publication is known (never published there, or recorded before expiries were)."""
    accepted = read_state(ctx).accepted
    expires = accepted.get("expires") if accepted else None
    return parse_utc(str(expires), "publish state") if expires else None


def summaries_changed(ctx: SiteContext) -> bool:
    """Whether the site's current summaries differ from the set the gateway last accepted (new,
    changed or withdrawn ones), judged exactly as a publication would version them."""
    state = read_state(ctx)
    if state.accepted is None:
        return True
    records, _, _ = _records(ctx, *summary_set(ctx), state)
    current = {r.summary_id: [r.version, summary_sha256(r)] for r in records}
    return current != {k: list(v) for k, v in state.accepted["manifest"].items()}
