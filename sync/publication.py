"""A site's publication: a signed manifest of its whole summary set, carrying only what changed.

The site signs one DSSE envelope per publication. Its payload names the site, a sequence number,
an expiry, the embedding space, and a **manifest** of every summary the site currently publishes
(summary id -> version, sha256 of the record's canonical bytes). Beside the manifest travel only
the **pieces** (records) that are new or changed since the publication the site builds on (its
**base**: that publication's sequence and manifest digest), and **tombstones** for the summaries
the site withdraws. With no base, the publication is a full set and carries every piece. A
publication may also carry the site's term statistics (key "terms", sync.terms), always whole:
they are signed with the set they describe and replace the ones the gateway held.

Guarantees this module gives (the gateway adds the ones that need stored state):
- Origin (1): the signature must verify under a key enrolled for the site the caller believes it
  is talking to, and the site named *inside* the signed bytes must be that same site.
- Verify before parse (2): nothing but the envelope's shape is looked at before the signature
  check; the allow-listed, versioned payload type is part of what is signed.
- No freeze (6): every publication expires; an expired one, or one from the future, is refused.
- No mix-and-match (7): each piece must equal its manifest entry exactly (version and sha256);
  pieces not in the manifest, and a full set missing pieces, are refused. `carried_over` checks a
  delta against the set the gateway holds: it must build on exactly that set (else
  `StaleBaseError`, a 409 that tells the site to send a full set), every summary it does not
  resend must be in that set with the same version and hash, and its tombstones must be exactly
  what the new manifest drops. `check_versions`: a summary's version never goes back, and one
  version never names two different contents (5).

Why columns: the pieces travel as one column per field plus one base64 string holding every
vector's little-endian float32 bytes back to back. The gateway then parses a publication with a
handful of JSON objects instead of two per summary, validates each column in one pass, and turns
all vectors into one matrix with a single base64 decode and `np.frombuffer` — what lets it verify
and index tens of thousands of summaries per second. The manifest's sha256 is still taken over
each record's canonical JSON (`summary_record_bytes`), the same bytes whether a record is held as
a `SummaryRecord` (the site) or as a row of columns (the gateway).
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, ClassVar, Iterable, Mapping, Sequence

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from hansa.core.errors import ConflictError, InputError, VerificationError
from hansa.core.jsonsafe import loads_strict
from hansa.core.model import FORBID, Wire
from hansa.sync.dsse import sign_envelope, verify_envelope
from hansa.sync.keys import SiteIdentity
from hansa.sync.terms import TermSketch, read_sketch
from hansa.sync.vectors import WIRE_DTYPE, b64decode_strict, b64encode
from hansa.sync.wire import (
    MAX_INT64,
    SHA256_HEX_RE,
    SUMMARY_ID_RE,
    Count,
    EmbeddingSpace,
    Richness,
    Sha256Hex,
    SummaryRecord,
    canonical_json,
    format_utc,
    parse_utc,
    validate_site_id,
)

PUBLICATION_TYPE_V2 = "application/vnd.hansa.publication+json; v=2"
MAX_CLOCK_SKEW = timedelta(minutes=5)
MAX_SUMMARIES = 1_000_000  # one site's manifest; the gateway's request-size cap usually binds first
MAX_LEVEL = 1024
_PAYLOAD_KEYS = frozenset(
    {"site_id", "sequence", "issued_at", "expires", "embedding", "base", "manifest", "summaries", "tombstones"}
)
# Optional: "terms", the site's term statistics (sync.terms); absent when the site publishes none.
_OPTIONAL_PAYLOAD_KEYS = frozenset({"terms"})
_COLUMN_KEYS = frozenset({"ids", "versions", "levels", "entities", "chunks", "documents", "texts", "vectors"})
# Optional: "parents", each summary's parent summary id or null (the hierarchy, plugin/hierarchy.py);
# absent when no record has a parent, as in every publication from before the hierarchy.
_OPTIONAL_COLUMN_KEYS = frozenset({"parents"})

Manifest = Mapping[str, tuple[int, str]]
_B64_RE = re.compile(r"[A-Za-z0-9+/]*={0,2}")


# -- canonical bytes and digests -------------------------------------------------------------------

def _record_bytes(
    summary_id: str, version: int, level: int, entities: int, chunks: int, documents: int,
    text: str | None, vector_b64: str, parent: str | None = None,
) -> bytes:
    """canonical_json of a record, written out directly (about 3x faster than json.dumps with
    sort_keys). Only for values that need no escaping beyond `text`'s: valid summary ids, exact
    `int`s, base64 text (`summary_record_bytes` checks; the column parser has already). A record
    without a parent has no "parent" key, so its bytes are those of a pre-hierarchy record."""
    text_json = "null" if text is None else json.dumps(text, ensure_ascii=True)
    parent_json = "" if parent is None else f'"parent":"{parent}",'
    return (
        f'{{"id":"{summary_id}","level":{level},{parent_json}"richness":{{"chunks":{chunks},"documents":{documents},'
        f'"entities":{entities}}},"text":{text_json},"vector":"{vector_b64}","version":{version}}}'
    ).encode("ascii")


def summary_record_bytes(rec: SummaryRecord) -> bytes:
    """Canonical bytes of one record: what the manifest's sha256 is taken over."""
    r = rec.richness
    ints = (rec.version, rec.level, r.entities, r.chunks, r.documents)
    plain = (
        isinstance(rec.summary_id, str) and SUMMARY_ID_RE.fullmatch(rec.summary_id) is not None
        and all(type(v) is int for v in ints)
        and isinstance(rec.vector_b64, str) and _B64_RE.fullmatch(rec.vector_b64) is not None
        and (rec.text is None or type(rec.text) is str)
        and (rec.parent is None or (isinstance(rec.parent, str) and SUMMARY_ID_RE.fullmatch(rec.parent) is not None))
    )
    if not plain:  # anything odd is spelled by the general encoder (and refused later, if invalid)
        return canonical_json(rec.to_json())
    return _record_bytes(rec.summary_id, rec.version, rec.level, r.entities, r.chunks, r.documents,
                         rec.text, rec.vector_b64, rec.parent)


def summary_sha256(rec: SummaryRecord) -> str:
    return hashlib.sha256(summary_record_bytes(rec)).hexdigest()


def manifest_sha256(manifest: Manifest) -> str:
    """The identity of a whole set: what a delta names as its base."""
    return hashlib.sha256(canonical_json({k: [v, h] for k, (v, h) in manifest.items()})).hexdigest()


# -- what a publication is -------------------------------------------------------------------------

@dataclass(frozen=True)
class PublicationBase(Wire):
    """The publication a delta builds on: its sequence and the digest of its manifest (the payload's
    "base"; JSON integers only, as everything signed)."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "publication: base"

    sequence: Count
    manifest_sha256: Sha256Hex


@dataclass(frozen=True, eq=False)
class PublicationHead:
    """A site's current set as one side holds it: the sequence that made it and its manifest."""

    sequence: int
    manifest: Manifest
    manifest_sha256: str = field(default="")

    def __post_init__(self) -> None:
        if not self.manifest_sha256:
            object.__setattr__(self, "manifest_sha256", manifest_sha256(self.manifest))

    def as_base(self) -> PublicationBase:
        return PublicationBase(self.sequence, self.manifest_sha256)


@dataclass(frozen=True, eq=False)
class SummaryPieces:
    """The records a publication carries, as columns; `vectors` is one read-only float32 matrix."""

    ids: tuple[str, ...]
    versions: tuple[int, ...]
    levels: tuple[int, ...]
    entities: tuple[int, ...]
    chunks: tuple[int, ...]
    documents: tuple[int, ...]
    texts: tuple[str | None, ...]
    vectors: np.ndarray  # (len(ids), dim), native float32
    parents: tuple[str | None, ...] | None = None  # None: the publication has no "parents" column

    def __len__(self) -> int:
        return len(self.ids)

    def vector_b64(self, i: int) -> str:
        return b64encode(self.vectors[i].astype(WIRE_DTYPE, copy=False).tobytes())

    def records(self) -> tuple[SummaryRecord, ...]:
        """The pieces as SummaryRecords (tools and tests; the gateway works on the columns)."""
        return tuple(
            SummaryRecord(
                summary_id=self.ids[i], version=self.versions[i], vector_b64=self.vector_b64(i),
                richness=Richness(self.entities[i], self.chunks[i], self.documents[i]),
                level=self.levels[i], text=self.texts[i],
                parent=None if self.parents is None else self.parents[i],
            )
            for i in range(len(self.ids))
        )


@dataclass(frozen=True, eq=False)
class Publication:
    """A verified, parsed and self-consistent publication (see the module docstring)."""

    site_id: str
    sequence: int
    issued_at: str
    expires: str
    embedding: EmbeddingSpace
    base: PublicationBase | None  # None: a full set
    manifest: Manifest  # every summary the site publishes after this publication
    pieces: SummaryPieces  # new or changed records (all of them for a full set)
    tombstones: tuple[str, ...]  # summaries of the base that the site withdraws
    payload_sha256: str  # of the exact signed bytes: one sequence, one content
    manifest_sha256: str
    terms: TermSketch | None = None  # the site's whole current term statistics (never a delta)

    @property
    def summaries(self) -> tuple[SummaryRecord, ...]:
        return self.pieces.records()

    @property
    def is_full(self) -> bool:
        return self.base is None

    def head(self) -> PublicationHead:
        return PublicationHead(self.sequence, self.manifest, self.manifest_sha256)


class StaleBaseError(ConflictError):
    """A delta builds on a set the receiver does not hold: resend the whole set (no base).

    Carries what the receiver holds, so the site can pick a sequence above it."""

    def __init__(self, message: str, current: PublicationHead | None) -> None:
        super().__init__(message)
        self.current_sequence = current.sequence if current is not None else None
        self.current_manifest_sha256 = current.manifest_sha256 if current is not None else None


# -- building (the site) ---------------------------------------------------------------------------

def _now(now: datetime | None) -> datetime:
    moment = now if now is not None else datetime.now(timezone.utc)
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("`now` must be timezone-aware")
    return moment.astimezone(timezone.utc)


def _check_sequence_arg(sequence: object) -> int:
    if isinstance(sequence, bool) or not isinstance(sequence, int) or not 0 <= sequence <= MAX_INT64:
        raise InputError(f"publication sequence must be an integer in 0..{MAX_INT64}")
    return sequence


def _columns_json(records: Sequence[SummaryRecord], dim: int) -> dict[str, Any]:
    raw = bytearray()
    for rec in records:
        try:
            raw += _vector_bytes(rec.vector_b64, dim, 1)
        except InputError as exc:
            raise InputError(f"publication: summary {rec.summary_id!r}: {exc}") from exc
    out: dict[str, Any] = {
        "ids": [r.summary_id for r in records],
        "versions": [r.version for r in records],
        "levels": [r.level for r in records],
        "entities": [r.richness.entities for r in records],
        "chunks": [r.richness.chunks for r in records],
        "documents": [r.richness.documents for r in records],
        "texts": [r.text for r in records],
        "vectors": b64encode(bytes(raw)),
    }
    if any(r.parent is not None for r in records):
        out["parents"] = [r.parent for r in records]
    return out


def build_publication(
    identity: SiteIdentity,
    site_id: str,
    sequence: int,
    embedding: EmbeddingSpace,
    summaries: Iterable[SummaryRecord],
    ttl: timedelta,
    now: datetime | None = None,
    base: PublicationHead | None = None,
    terms: TermSketch | None = None,
) -> dict[str, Any]:
    """Sign the site's whole current set `summaries`; with `base` (the last set the gateway
    accepted), carry only records that differ from it plus tombstones for those it no longer has.
    `terms`, when given, travels whole in every publication (a few tens of KB): the gateway holds
    exactly the statistics of the publication it routes by, with no delta rules of their own.

    Refuses anything the gateway would refuse, by reading its own bytes back as a gateway does."""
    validate_site_id(site_id)
    _check_sequence_arg(sequence)
    if ttl <= timedelta(0):
        raise InputError("publication ttl must be positive: every signed object expires")
    if base is not None and base.sequence >= sequence:
        raise InputError(f"publication sequence {sequence} must be above its base's {base.sequence}")
    issued = _now(now).replace(microsecond=0)
    records = sorted(summaries, key=lambda r: r.summary_id)
    for prev, rec in zip(records, records[1:]):
        if prev.summary_id == rec.summary_id:
            raise InputError(f"publication: summary id {rec.summary_id!r} appears twice")
    manifest = {r.summary_id: (r.version, summary_sha256(r)) for r in records}
    if base is None:
        pieces, tombstones = records, []
    else:
        check_versions(manifest, base.manifest, site_id)
        pieces = [r for r in records if base.manifest.get(r.summary_id) != manifest[r.summary_id]]
        tombstones = sorted(set(base.manifest) - set(manifest))
    payload = {
        "site_id": site_id,
        "sequence": sequence,
        "issued_at": format_utc(issued),
        "expires": format_utc(issued + ttl),
        "embedding": embedding.to_json(),
        "base": None if base is None else base.as_base().to_json(),
        "manifest": {k: [v, h] for k, (v, h) in manifest.items()},
        "summaries": _columns_json(pieces, embedding.dim),
        "tombstones": tombstones,
    }
    if terms is not None:
        payload["terms"] = terms.record().to_json()
    data = canonical_json(payload)
    parsed = parse_publication(data)  # what a gateway will read, checked the way it checks
    if base is not None:
        carried_over(parsed, base)
    return sign_envelope(PUBLICATION_TYPE_V2, data, identity)


# -- reading (the gateway) -------------------------------------------------------------------------

def _fail(what: str) -> InputError:
    return InputError(f"publication: {what}")


def _int(value: object, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


def _int_column(values: list[Any], name: str, high: int) -> tuple[int, ...]:
    if not all(type(v) is int for v in values) or (values and (min(values) < 0 or max(values) > high)):
        raise _fail(f"summaries.{name} must hold integers in 0..{high}")
    return tuple(values)


_ID = SUMMARY_ID_RE.pattern.strip("^$")  # the id alphabet and length, from the one definition
_ID_LINES_RE = re.compile(f"{_ID}(?:\n{_ID})*")
_HEX_RE = re.compile(r"[0-9a-f]*")


def _all_ids(values: list[Any]) -> bool:
    """Whether every value is a valid summary id, in one regex pass over them joined by newlines
    (a newline is outside the id alphabet, so none can hide inside an id: the counts must agree)."""
    if not values:
        return True
    if not all(type(v) is str for v in values):
        return False
    joined = "\n".join(values)
    return joined.count("\n") == len(values) - 1 and _ID_LINES_RE.fullmatch(joined) is not None


def _check_ids(ids: list[Any], where: str) -> tuple[str, ...]:
    """Valid summary ids in strictly ascending order: one spelling of a set, no duplicates."""
    if _all_ids(ids) and all(a < b for a, b in zip(ids, ids[1:])):
        return tuple(ids)
    for i, sid in enumerate(ids):  # say which one is wrong
        if type(sid) is not str or not SUMMARY_ID_RE.fullmatch(sid):
            raise _fail(f"{where}: invalid summary id {sid!r}: use 1-128 of A-Z a-z 0-9 _ . : -")
        if i and ids[i - 1] >= sid:
            what = "appears twice" if ids[i - 1] == sid else "is out of order (ids must be sorted)"
            raise _fail(f"{where}: summary id {sid!r} {what}")
    raise AssertionError("unreachable: the fast check and the loop disagree")


def _vector_bytes(text: object, dim: int, count: int) -> bytes:
    """`count` vectors of `dim` float32 values, all finite, from canonical base64."""
    raw = b64decode_strict(text, "vectors")
    if len(raw) != count * dim * WIRE_DTYPE.itemsize:
        raise InputError(
            f"vectors hold {len(raw)} bytes but {count} vector(s) of dimension {dim} need "
            f"{count * dim * WIRE_DTYPE.itemsize}: made with another model, or truncated"
        )
    if count and not np.isfinite(np.frombuffer(raw, dtype=WIRE_DTYPE)).all():
        raise InputError("vectors hold NaN or infinite values")
    return raw


def _vector_slicer(text: str, raw: bytes, dim: int) -> Callable[[int], str]:
    """Vector i's own canonical base64 (what its record's sha256 covers). When a vector is a whole
    number of 3-byte groups (dim divisible by 3, e.g. 384), base64 has no padding inside the
    concatenation, so vector i's text is a slice of the (canonical) whole; else it is re-encoded."""
    step = dim * WIRE_DTYPE.itemsize
    if step % 3 == 0:
        width = step // 3 * 4
        return lambda i: text[i * width:(i + 1) * width]
    view = memoryview(raw)
    return lambda i: base64.b64encode(view[i * step:(i + 1) * step]).decode("ascii")


def _parse_manifest(obj: object) -> dict[str, tuple[int, str]]:
    """summary id -> (version, sha256), every entry checked (column-wise first: the common case)."""
    if not isinstance(obj, dict):
        raise _fail("manifest must be an object")
    if len(obj) > MAX_SUMMARIES:
        raise _fail(f"manifest lists {len(obj)} summaries; at most {MAX_SUMMARIES} per site")
    ids, entries = list(obj), list(obj.values())
    if all(type(e) is list and len(e) == 2 for e in entries):
        versions, digests = [e[0] for e in entries], [e[1] for e in entries]
        if (
            _all_ids(ids)
            and all(type(v) is int for v in versions) and (not versions or 0 <= min(versions) and max(versions) <= MAX_INT64)
            and all(type(h) is str and len(h) == 64 for h in digests) and _HEX_RE.fullmatch("".join(digests))
        ):
            return dict(zip(ids, zip(versions, digests)))
    for sid, entry in obj.items():  # say which entry is wrong
        if not SUMMARY_ID_RE.fullmatch(sid):
            raise _fail(f"manifest has an invalid summary id {sid!r}")
        if not (
            type(entry) is list and len(entry) == 2 and _int(entry[0], 0, MAX_INT64)
            and type(entry[1]) is str and SHA256_HEX_RE.fullmatch(entry[1])
        ):
            raise _fail(f"manifest entry for {sid!r} must be [version, lowercase sha256 hex]")
    raise AssertionError("unreachable: the fast check and the loop disagree")


def _parse_base(obj: object, sequence: int) -> PublicationBase | None:
    if obj is None:
        return None
    base = PublicationBase.from_json(obj)  # type: ignore[arg-type]  # from_json refuses a non-object
    if base.sequence >= sequence:
        raise _fail(f"base.sequence must be below the publication's sequence {sequence}")
    return base


def _parse_pieces(obj: object, manifest: Manifest, dim: int) -> SummaryPieces:
    """Every piece must be exactly its manifest entry; the sha256 is computed once, here."""
    if not isinstance(obj, dict) or not _COLUMN_KEYS <= obj.keys() <= _COLUMN_KEYS | _OPTIONAL_COLUMN_KEYS:
        raise _fail(f"summaries must be an object with exactly {sorted(_COLUMN_KEYS)} "
                    f"(and optionally {sorted(_OPTIONAL_COLUMN_KEYS)})")
    ids = obj["ids"]
    if type(ids) is not list:
        raise _fail("summaries.ids must be a list")
    n = len(ids)
    for name in (obj.keys() & (_COLUMN_KEYS | _OPTIONAL_COLUMN_KEYS)) - {"vectors"}:
        if type(obj[name]) is not list or len(obj[name]) != n:
            raise _fail(f"summaries.{name} must be a list as long as summaries.ids ({n})")
    pid = _check_ids(ids, "summaries")
    versions = _int_column(obj["versions"], "versions", MAX_INT64)
    levels = _int_column(obj["levels"], "levels", MAX_LEVEL)
    entities = _int_column(obj["entities"], "entities", MAX_INT64)
    chunks = _int_column(obj["chunks"], "chunks", MAX_INT64)
    documents = _int_column(obj["documents"], "documents", MAX_INT64)
    texts = obj["texts"]
    if not all(t is None or type(t) is str for t in texts):
        raise _fail("summaries.texts must hold strings or nulls")
    parents = _parents_column(obj.get("parents"), pid, manifest)
    try:
        raw = _vector_bytes(obj["vectors"], dim, n)
    except InputError as exc:
        raise _fail(f"summaries.{exc}") from exc
    one_vector = _vector_slicer(obj["vectors"], raw, dim)
    for i, sid in enumerate(pid):
        entry = manifest.get(sid)
        if entry is None:
            raise _fail(f"summary {sid!r} is not in the manifest: a piece of no listed set is refused")
        if entry[0] != versions[i]:
            raise _fail(f"summary {sid!r} has version {versions[i]} but the manifest says {entry[0]}")
        record = _record_bytes(sid, versions[i], levels[i], entities[i], chunks[i], documents[i], texts[i],
                               one_vector(i), None if parents is None else parents[i])
        if hashlib.sha256(record).hexdigest() != entry[1]:
            raise _fail(f"summary {sid!r} does not match its manifest sha256")
    vectors = np.frombuffer(raw, dtype=WIRE_DTYPE).reshape(n, dim).astype(np.float32, copy=False)
    if vectors.flags.writeable:
        vectors.flags.writeable = False
    return SummaryPieces(pid, versions, levels, entities, chunks, documents, tuple(texts), vectors, parents)


def _parents_column(column: object, ids: Sequence[str], manifest: Manifest) -> tuple[str | None, ...] | None:
    """The optional "parents" column: each a summary id of the same manifest other than the record's
    own, or null (the top level); absent (None) in publications without a hierarchy."""
    if column is None:
        return None
    assert isinstance(column, list)  # the length check above has run
    if not any(p is not None for p in column):
        raise _fail("summaries.parents must be left out when no summary has a parent")
    for sid, parent in zip(ids, column):
        if parent is None:
            continue
        if type(parent) is not str or parent == sid or parent not in manifest:
            raise _fail(f"summary {sid!r}: its parent must be another summary of the publication's manifest, "
                        f"not {parent!r}")
    return tuple(column)


def parse_publication(data: bytes) -> Publication:
    """Parse signed payload bytes strictly and check them against themselves (not against `now`,
    a key or the receiver's state: `open_publication` and `carried_over` do that)."""
    obj = _payload_object(data)
    header = _parse_header(obj)
    return _with_pieces(header, obj, hashlib.sha256(data).hexdigest())


def _payload_object(data: bytes) -> dict[str, Any]:
    try:
        obj = loads_strict(data)
    except (ValueError, RecursionError) as exc:  # e.g. integers beyond Python's digit limit
        raise _fail(f"invalid JSON ({exc})") from exc
    if not isinstance(obj, dict):
        raise _fail("expected an object")
    if not _PAYLOAD_KEYS <= obj.keys() <= _PAYLOAD_KEYS | _OPTIONAL_PAYLOAD_KEYS:
        missing = sorted(_PAYLOAD_KEYS - obj.keys())
        extra = sorted(obj.keys() - _PAYLOAD_KEYS - _OPTIONAL_PAYLOAD_KEYS)
        raise _fail(f"payload keys are wrong (missing {missing}, unknown {extra})")
    return obj


@dataclass(frozen=True)
class _Header:
    site_id: str
    sequence: int
    issued_at: str
    expires: str
    embedding: EmbeddingSpace


def _parse_header(obj: dict[str, Any]) -> _Header:
    """The cheap fields, so identity, time and space are refused before any per-summary work."""
    site_id = obj["site_id"]
    if type(site_id) is not str:
        raise _fail("site_id must be a string")
    validate_site_id(site_id)
    sequence = obj["sequence"]
    if not _int(sequence, 0, MAX_INT64):
        raise _fail(f"sequence must be an integer in 0..{MAX_INT64}")
    issued_at, expires = obj["issued_at"], obj["expires"]
    if parse_utc(expires, "publication") <= parse_utc(issued_at, "publication"):
        raise _fail("expires must be later than issued_at")
    if not isinstance(obj["embedding"], dict):
        raise _fail("embedding must be an object")
    return _Header(site_id, sequence, issued_at, expires, EmbeddingSpace.from_json(obj["embedding"]))


def _with_pieces(header: _Header, obj: dict[str, Any], payload_digest: str) -> Publication:
    base = _parse_base(obj["base"], header.sequence)
    manifest = _parse_manifest(obj["manifest"])
    pieces = _parse_pieces(obj["summaries"], manifest, header.embedding.dim)
    tombstones = obj["tombstones"]
    if type(tombstones) is not list:
        raise _fail("tombstones must be a list")
    tombstones = _check_ids(tombstones, "tombstones")
    if base is None:
        if tombstones:
            raise _fail("a full set (base null) has nothing to withdraw: tombstones must be empty")
        if len(pieces) != len(manifest):
            missing = sorted(set(manifest) - set(pieces.ids))
            raise _fail(
                f"manifest lists {len(missing)} summaries without a piece (first: {missing[0]!r}); "
                "a full set (base null) carries every summary"
            )
    listed = [sid for sid in tombstones if sid in manifest]
    if listed:
        raise _fail(f"summary {listed[0]!r} is both withdrawn (tombstone) and in the manifest")
    terms = read_sketch(obj["terms"], "publication: terms") if "terms" in obj else None
    return Publication(
        site_id=header.site_id, sequence=header.sequence, issued_at=header.issued_at, expires=header.expires,
        embedding=header.embedding, base=base, manifest=manifest, pieces=pieces, tombstones=tombstones,
        payload_sha256=payload_digest, manifest_sha256=manifest_sha256(manifest), terms=terms,
    )


def open_publication(
    envelope: bytes | str | Mapping[str, Any],
    claimed_site_id: str,
    keys_for_site: Sequence[Ed25519PublicKey],
    expected_space: EmbeddingSpace,
    now: datetime | None = None,
    also: Sequence[EmbeddingSpace] = (),
) -> Publication:
    """Verify, then parse, then check a publication from the site the caller believes sent it.

    `also`: other spaces accepted besides `expected_space` (a gateway staging the federation's
    next embedder); the publication's `embedding` says which it is in.

    `keys_for_site` are the keys enrolled for `claimed_site_id` (from the URL path or the
    registry), never keys picked by the envelope's keyid. VerificationError: signature, origin,
    expiry or clock. InputError: a signed but malformed or self-inconsistent payload. What it
    builds on (its base) is checked against stored state by `carried_over`."""
    validate_site_id(claimed_site_id)
    if not keys_for_site:
        raise VerificationError(f"site {claimed_site_id!r} has no enrolled keys")
    _, data = verify_envelope(envelope, keys_for_site, {PUBLICATION_TYPE_V2})
    obj = _payload_object(data)
    header = _parse_header(obj)
    if header.site_id != claimed_site_id:
        raise VerificationError(
            f"publication names site {header.site_id!r} but was sent as {claimed_site_id!r}: "
            "a site may only publish into its own namespace"
        )
    moment = _now(now)
    if parse_utc(header.issued_at, "publication") > moment + MAX_CLOCK_SKEW:
        raise VerificationError(
            f"publication was issued at {header.issued_at}, in the future by more than "
            f"{MAX_CLOCK_SKEW}: fix the site's clock (NTP) and publish again"
        )
    if parse_utc(header.expires, "publication") <= moment:
        raise VerificationError(
            f"publication from {header.site_id!r} expired at {header.expires}: publish a fresh one"
        )
    got = header.embedding
    if got != expected_space and got not in also:
        raise InputError(
            f"publication uses embedder {got.describe()} but this federation uses {expected_space.describe()}: "
            f"re-embed the site with the federation's embedder (`hansa site reembed`, after setting [embedder] model)"
        )
    return _with_pieces(header, obj, hashlib.sha256(data).hexdigest())


# -- against what is held --------------------------------------------------------------------------

def check_versions(new: Manifest, held: Manifest, site_id: str, only: Iterable[str] | None = None) -> None:
    """A summary's version never goes down, and one version never names two contents.

    Checks the ids in `only` (default: all of `new`) that `held` also lists."""
    for sid in new if only is None else only:
        old = held.get(sid)
        if old is None:
            continue
        version, digest = new[sid]
        if version < old[0]:
            raise ConflictError(
                f"site {site_id!r}: summary {sid!r} goes back from version {old[0]} to {version} "
                "(rollback refused); if the site lost its publish state, restore it"
            )
        if version == old[0] and digest != old[1]:
            raise ConflictError(
                f"site {site_id!r}: summary {sid!r} version {version} already names other content "
                "(same version, different bytes refused): bump the version when content changes"
            )


def carried_over(pub: Publication, held: PublicationHead | None) -> frozenset[str]:
    """The ids `pub` keeps from `held` without resending them; refuses what would mix two sets.

    `held` is the set the receiver currently holds for the site (None: nothing). A full set needs
    nothing from it; a delta must name exactly it as its base (else StaleBaseError), and every
    summary it does not resend must be in it with the same version and sha256."""
    if held is not None:
        check_versions(pub.manifest, held.manifest, pub.site_id, only=pub.pieces.ids)
    if pub.base is None:
        return frozenset()
    if held is None or (held.sequence, held.manifest_sha256) != (pub.base.sequence, pub.base.manifest_sha256):
        holds = "nothing" if held is None else f"sequence {held.sequence}"
        raise StaleBaseError(
            f"site {pub.site_id!r}: publication {pub.sequence} builds on sequence {pub.base.sequence} "
            f"but the gateway holds {holds}: send the whole set (no base)",
            held,
        )
    sent = set(pub.pieces.ids)
    carried = [sid for sid in pub.manifest if sid not in sent]
    for sid in carried:
        if held.manifest.get(sid) != pub.manifest[sid]:
            raise _fail(
                f"summary {sid!r} is listed as version {pub.manifest[sid][0]} but no piece was sent and the "
                "held set has other content for it: send every changed summary (no mix-and-match)"
            )
    dropped = set(held.manifest) - set(pub.manifest)
    if set(pub.tombstones) != dropped:
        extra = sorted(set(pub.tombstones) - dropped)
        missing = sorted(dropped - set(pub.tombstones))
        raise _fail(
            "tombstones must be exactly the summaries the base lists and the manifest drops "
            f"(unexpected: {extra[:3]}, missing: {missing[:3]})"
        )
    return frozenset(carried)
