"""A site's publication: its whole current set of summary embeddings, signed as one DSSE envelope.

The site signs the exact payload bytes; the gateway verifies them against the keys enrolled for
the site it believes it is talking to, only then parses, and then insists that the site named
*inside* the signed bytes is that same site (guarantee 1). The manifest maps every summary id to
(version, sha256 of the record's canonical bytes); the records must match it exactly, so the
gateway can swap a site's set atomically and reject any piece that is not in it (guarantee 7).
Expiry (guarantee 6) is checked here; sequence/rollback needs stored state and is the gateway's.
"""
from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Mapping, Sequence

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from hansa.core.errors import InputError, VerificationError
from hansa.sync.dsse import sign_envelope, verify_envelope
from hansa.sync.keys import SiteIdentity
from hansa.sync.vectors import decode_vector
from hansa.sync.wire import (
    MAX_INT64,
    PUBLICATION_TYPE,
    EmbeddingSpace,
    PublicationPayload,
    SummaryRecord,
    canonical_json,
    format_utc,
    parse_utc,
    validate_site_id,
)

MAX_CLOCK_SKEW = timedelta(minutes=5)


def summary_record_bytes(rec: SummaryRecord) -> bytes:
    """Canonical bytes of one record: what the manifest's sha256 is taken over."""
    return canonical_json(rec.to_json())


def summary_sha256(rec: SummaryRecord) -> str:
    return hashlib.sha256(summary_record_bytes(rec)).hexdigest()


def _now(now: datetime | None) -> datetime:
    moment = now if now is not None else datetime.now(timezone.utc)
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("`now` must be timezone-aware")
    return moment.astimezone(timezone.utc)


def _check_contents(payload: PublicationPayload) -> None:
    """Vectors decode to the declared dimension, ids are unique, records equal the manifest."""
    seen: set[str] = set()
    for rec in payload.summaries:
        if rec.summary_id in seen:
            raise InputError(f"publication: summary id {rec.summary_id!r} appears twice")
        seen.add(rec.summary_id)
        try:
            decode_vector(rec.vector_b64, payload.embedding.dim)
        except InputError as exc:
            raise InputError(f"publication: summary {rec.summary_id!r}: {exc}") from exc
        entry = payload.manifest.get(rec.summary_id)
        if entry is None:
            raise InputError(f"publication: summary {rec.summary_id!r} is not in the manifest")
        version, digest = entry
        if version != rec.version:
            raise InputError(
                f"publication: summary {rec.summary_id!r} has version {rec.version} "
                f"but the manifest says {version}"
            )
        if digest != summary_sha256(rec):
            raise InputError(
                f"publication: summary {rec.summary_id!r} does not match its manifest sha256"
            )
    missing = sorted(set(payload.manifest) - seen)
    if missing:
        raise InputError(
            f"publication: manifest lists {len(missing)} summaries without a record "
            f"(first: {missing[0]!r}); a publication carries the site's whole set"
        )


def build_publication(
    identity: SiteIdentity,
    site_id: str,
    sequence: int,
    embedding: EmbeddingSpace,
    summaries: Iterable[SummaryRecord],
    ttl: timedelta,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Sign the site's whole current summary set; refuses anything the gateway would refuse."""
    validate_site_id(site_id)
    valid_int = isinstance(sequence, int) and not isinstance(sequence, bool)
    if not valid_int or not 0 <= sequence <= MAX_INT64:
        raise InputError(f"publication sequence must be an integer in 0..{MAX_INT64}")
    if ttl <= timedelta(0):
        raise InputError("publication ttl must be positive: every signed object expires")
    issued = _now(now).replace(microsecond=0)
    records = tuple(summaries)
    payload = PublicationPayload(
        site_id=site_id,
        sequence=sequence,
        issued_at=format_utc(issued),
        expires=format_utc(issued + ttl),
        embedding=embedding,
        summaries=records,
        manifest={r.summary_id: (r.version, summary_sha256(r)) for r in records},
    )
    data = payload.to_bytes()
    # Re-read our own bytes exactly as a gateway will, so a site never signs what gets refused.
    _check_contents(PublicationPayload.from_bytes(data))
    return sign_envelope(PUBLICATION_TYPE, data, identity)


def open_publication(
    envelope: bytes | str | Mapping[str, Any],
    claimed_site_id: str,
    keys_for_site: Sequence[Ed25519PublicKey],
    expected_space: EmbeddingSpace,
    now: datetime | None = None,
) -> PublicationPayload:
    """Verify, then parse, then check a publication from the site the caller believes sent it.

    `keys_for_site` are the keys enrolled for `claimed_site_id` (from the URL path or the
    registry), never keys picked by the envelope's keyid. VerificationError: signature, origin,
    expiry or clock. InputError: a signed but malformed or mismatched payload."""
    validate_site_id(claimed_site_id)
    if not keys_for_site:
        raise VerificationError(f"site {claimed_site_id!r} has no enrolled keys")
    _, data = verify_envelope(envelope, keys_for_site, {PUBLICATION_TYPE})
    payload = PublicationPayload.from_bytes(data)
    if payload.site_id != claimed_site_id:
        raise VerificationError(
            f"publication names site {payload.site_id!r} but was sent as {claimed_site_id!r}: "
            "a site may only publish into its own namespace"
        )
    moment = _now(now)
    if parse_utc(payload.issued_at, "publication") > moment + MAX_CLOCK_SKEW:
        raise VerificationError(
            f"publication was issued at {payload.issued_at}, in the future by more than "
            f"{MAX_CLOCK_SKEW}: fix the site's clock (NTP) and publish again"
        )
    if parse_utc(payload.expires, "publication") <= moment:
        raise VerificationError(
            f"publication from {payload.site_id!r} expired at {payload.expires}: "
            "publish a fresh one"
        )
    got = payload.embedding
    if (got.model_id, got.dim, got.encoding) != (
        expected_space.model_id, expected_space.dim, expected_space.encoding
    ):
        raise InputError(
            f"publication uses embedding {got.model_id!r} (dim {got.dim}, {got.encoding}) but this "
            f"federation uses {expected_space.model_id!r} (dim {expected_space.dim}, "
            f"{expected_space.encoding}): re-embed the summaries with the federation's model"
        )
    _check_contents(payload)
    return payload
