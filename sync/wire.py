"""Messages that cross a site boundary, as JSON-ready dataclasses of the model layer (core/model.py).

Only these shapes ever leave a site: community-summary publications (signed), and partial answers
with citations. Chunk text never does. Parsing is strict: unknown or missing keys and wrong types
raise InputError, so a peer's mistake cannot become our undefined state. The site API's OpenAPI
components are generated from these classes (sync/schema.py).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Annotated, Any, ClassVar, Literal, Mapping

from pydantic import AfterValidator, Field, StrictFloat, StrictInt, StrictStr

from hansa.core.errors import InputError
from hansa.core.model import FORBID, Wire, int_in, omitted_when_none

SITE_ID_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
SUMMARY_ID_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
MAX_QUESTION_CHARS = 4000
# A question must hold a character that is whitespace neither to Python's str.strip nor to JSON
# Schema's (ECMA-262) \s, so the OpenAPI spec's pattern and the parsers accept exactly the same set.
NOT_BLANK_RE = re.compile(r"[^\s\u001c-\u001f\u0085\ufeff]")
SHA256_HEX_RE = re.compile(r"^[0-9a-f]{64}$")
RFC3339_UTC_RE = re.compile(
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?Z$"
)
MAX_INT64 = 2**63 - 1
MAX_MODEL_ID_CHARS = 256
MAX_DIM = 65536
VECTOR_ENCODING = "f32le-b64"


def canonical_json(obj: Any) -> bytes:
    """Deterministic bytes for a JSON value: sorted keys, no spaces, ASCII only, no NaN.

    Used for what gets hashed or signed; only ever applied to values without floats."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    ).encode("ascii")


def format_utc(moment: datetime) -> str:
    """RFC 3339 in UTC with a `Z`, to the second: the one spelling `parse_utc` accepts."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("timestamps must be timezone-aware")
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_utc(text: object, where: str) -> datetime:
    try:
        return _utc_moment(text)
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from None


def _utc_moment(text: object) -> datetime:
    if not isinstance(text, str) or not RFC3339_UTC_RE.fullmatch(text):
        raise ValueError(f"timestamp {text!r} must be RFC 3339 UTC like 2025-01-31T12:00:00Z")
    try:
        return datetime.fromisoformat(text[:-1]).replace(tzinfo=timezone.utc)
    except ValueError:
        raise ValueError(f"timestamp {text!r} is not a real date/time") from None


def _utc_value(text: str) -> str:
    _utc_moment(text)
    return text


def validate_site_id(site_id: object) -> str:
    """Site ids name namespaces and files: DNS-label syntax only (no `../`, no spoofing by case)."""
    if not isinstance(site_id, str) or not SITE_ID_RE.fullmatch(site_id):
        raise InputError(_site_id_refusal(site_id))
    return site_id


def _site_id_refusal(site_id: object) -> str:
    return f"invalid site id {site_id!r}: use 1-64 lowercase letters, digits and '-'"


def _site_id_value(site_id: str) -> str:
    if not SITE_ID_RE.fullmatch(site_id):
        raise ValueError(_site_id_refusal(site_id))
    return site_id


def _question_value(question: str) -> str:
    if len(question) > MAX_QUESTION_CHARS or not NOT_BLANK_RE.search(question):
        raise ValueError(f"question must have 1-{MAX_QUESTION_CHARS} characters, not all whitespace")
    return question.strip()


def _summary_id_value(summary_id: str) -> str:
    if not SUMMARY_ID_RE.fullmatch(summary_id):
        raise ValueError(f"invalid id {summary_id!r}: use 1-128 of A-Z a-z 0-9 _ . : -")
    return summary_id


def _encoding_value(encoding: str) -> str:
    if encoding != VECTOR_ENCODING:
        raise ValueError(f"encoding {encoding!r} is not supported; use {VECTOR_ENCODING!r}")
    return encoding


def _model_sha256_value(digest: str) -> str:
    if digest and not SHA256_HEX_RE.fullmatch(digest):
        raise ValueError("model_sha256 must be 64 lowercase hex digits, or empty")
    return digest


# The field types: what JSON each field accepts (the validator) and says it accepts (the schema).
SiteId = Annotated[StrictStr, AfterValidator(_site_id_value),
                   Field(json_schema_extra={"pattern": SITE_ID_RE.pattern, "maxLength": 64})]
Question = Annotated[StrictStr, AfterValidator(_question_value), Field(
    min_length=1, max_length=MAX_QUESTION_CHARS,
    description=f"At most {MAX_QUESTION_CHARS} characters, at least one of them not whitespace",
    json_schema_extra={"pattern": NOT_BLANK_RE.pattern})]
SummaryId = Annotated[StrictStr, AfterValidator(_summary_id_value),
                      Field(json_schema_extra={"pattern": SUMMARY_ID_RE.pattern})]
Relevance = Annotated[StrictFloat, Field(ge=-1.0, le=1.0)]
# Integers as signed documents and hansa's own files spell them: JSON integers only (not 1.0, which
# `json_int` would take). What is signed is canonical JSON, which has no floats, and a document
# that spelled a version 1.0 would not re-serialize to the bytes that were signed.
Positive = Annotated[StrictInt, Field(ge=1, le=MAX_INT64)]
Count = Annotated[StrictInt, Field(ge=0, le=MAX_INT64)]
Sha256Hex = Annotated[StrictStr, Field(pattern=SHA256_HEX_RE.pattern)]
# A moment as signed documents and state files spell it: RFC 3339 UTC to the second (`format_utc`).
UtcTimestamp = Annotated[StrictStr, AfterValidator(_utc_value),
                         Field(json_schema_extra={"pattern": RFC3339_UTC_RE.pattern})]
# A sentence of the answer with the document it comes from, and optionally its relevance.
Sentence = tuple[StrictStr, StrictStr] | tuple[StrictStr, StrictStr, Relevance]
MAX_PAGE = 10**7


@dataclass(frozen=True)
class Citation(Wire):
    """One cited document. `page` (1-based, PDFs) and `source` ("<source>:<path>" inside the
    site, see plugin.sources) are optional: absent from the JSON when unknown, so citations
    without them keep the shape older peers read."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "citation"
    API_DESCRIPTION: ClassVar[str] = (
        "A document one of the answer's sentences comes from (unless the site's policy lists unused ones: "
        "[site] answer_unused_documents). What it reveals follows [site] answer_titles (an empty title when off) "
        "and answer_sources: `source` is the file's name (\"name\", the default), its source and path inside it "
        "(\"relative\"), or absent with an opaque doc_id (\"hidden\")")

    site_id: StrictStr
    doc_id: StrictStr
    title: StrictStr
    score: StrictFloat = 0.0
    page: Annotated[int_in(1, MAX_PAGE) | None, omitted_when_none()] = None
    source: Annotated[StrictStr | None, omitted_when_none()] = None


@dataclass(frozen=True)
class RetrieveRequest(Wire):
    """What the gateway asks a site. `mode`: "local" (entities + graph), "global" (communities)."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "retrieve request"

    question: Question
    top_k: Annotated[int_in(1, 100), Field(description=(
        "Chunks retrieved and documents the site may cite; the site's answer policy caps what is cited "
        "([site] answer_max_citations, 10 by default)"))] = 10
    mode: Literal["local", "global"] = "local"


@dataclass(frozen=True)
class PartialAnswer(Wire):
    """A site's answer to one retrieve request: an extractive (or LLM) answer and what it cites.

    `evidence` ranks the cited documents best first (what evidence recall@k is measured on);
    `confidence` in [0, 1] is the site's own estimate, used by the gateway's gate and fusion."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "partial answer"

    site_id: SiteId
    answer: StrictStr
    citations: tuple[Citation, ...]
    confidence: Annotated[StrictFloat, Field(ge=0.0, le=1.0)]
    # The answer's support, for fusion: (sentence, doc_id) or (sentence, doc_id, relevance), where
    # relevance is the site's cosine of the sentence with the question (same model at every site,
    # so comparable across sites). Given, it spares the gateway re-embedding every sentence.
    sentences: tuple[Sentence, ...] = ()


@dataclass(frozen=True)
class Richness(Wire):
    """How much knowledge a summary stands for: SCOUT-RAG's richness signal, and DGRAG's size."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "richness"

    entities: int_in(0, MAX_INT64)
    chunks: int_in(0, MAX_INT64)
    documents: int_in(0, MAX_INT64)


@dataclass(frozen=True)
class SummaryRecord(Wire):
    """One community summary as published: id, version, exact vector bytes, richness, optional text.

    Every key but `parent` is required (`text` may be null): one record has one JSON shape."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "summary record"
    JSON_REQUIRED: ClassVar[tuple[str, ...]] = ("level", "text")

    summary_id: Annotated[SummaryId, Field(alias="id")]
    version: int_in(0, MAX_INT64)
    # base64 of little-endian float32, exactly `dim` values (see sync.vectors)
    vector_b64: Annotated[StrictStr, Field(alias="vector")]
    richness: Richness
    level: int_in(0, 1024) = 0
    text: StrictStr | None = None  # only when the site's policy allows publishing summary text
    # The summary of the community one level coarser holding this one (plugin/hierarchy.py); None at
    # the top level and in publications from before the hierarchy, whose records have no "parent" key
    # (so their bytes, and the manifest digests over them, are unchanged). A null is refused: the
    # top level leaves the key out.
    parent: Annotated[SummaryId, omitted_when_none()] = None  # type: ignore[assignment]

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], where: str | None = None) -> "SummaryRecord":
        record = super().from_json(obj, where)
        if record.parent == record.summary_id:
            raise InputError(f"{where or cls.WHERE}: 'parent' must be another summary's id, not its own")
        return record


@dataclass(frozen=True)
class EmbeddingSpace(Wire):
    """The embedder a set of vectors was made with. Two sets are comparable only when every field
    matches: `model_sha256` (the model file's hash; "" where none is known, a served model) tells
    an int8 graph from the fp32 one and a re-exported file from the catalog's."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "embedding space"
    JSON_REQUIRED: ClassVar[tuple[str, ...]] = ("encoding",)

    model_id: Annotated[StrictStr, Field(min_length=1, max_length=MAX_MODEL_ID_CHARS)]
    dim: int_in(1, MAX_DIM)
    encoding: Annotated[StrictStr, AfterValidator(_encoding_value),
                        Field(json_schema_extra={"const": VECTOR_ENCODING})] = VECTOR_ENCODING
    model_sha256: Annotated[StrictStr, AfterValidator(_model_sha256_value), Field(
        description="sha256 of the embedding model file; empty where none is known",
        json_schema_extra={"pattern": "^([0-9a-f]{64})?$"})] = ""

    @classmethod
    def of(cls, embedder: Any) -> "EmbeddingSpace":
        """The space of an embedder (hansa.adapters.embedder.Embedder; duck-typed, sync imports no adapter)."""
        return cls(model_id=embedder.model_id, dim=embedder.dim, model_sha256=getattr(embedder, "model_sha256", ""))

    def describe(self) -> str:
        files = f", file sha256 {self.model_sha256[:12]}" if self.model_sha256 else ", no file hash"
        return f"{self.model_id!r} (dim {self.dim}{files})"


# Retired: v=1 carried full sets only. The gateway refuses it (sync.publication defines the v=2 type);
# kept so tests can prove a retired type is refused even when validly signed.
PUBLICATION_TYPE = "application/vnd.hansa.publication+json; v=1"
