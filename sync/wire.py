"""Messages that cross a site boundary, as JSON-ready dataclasses.

Only these shapes ever leave a site: community-summary publications (signed), and partial answers
with citations. Chunk text never does. Parsing is strict: unknown or missing keys and wrong types
raise InputError, so a peer's mistake cannot become our undefined state.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, Mapping

from hansa.core.errors import InputError

SITE_ID_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
SUMMARY_ID_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
MAX_QUESTION_CHARS = 4000
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
    if not isinstance(text, str) or not RFC3339_UTC_RE.fullmatch(text):
        raise InputError(
            f"{where}: timestamp {text!r} must be RFC 3339 UTC like 2025-01-31T12:00:00Z"
        )
    try:
        return datetime.fromisoformat(text[:-1]).replace(tzinfo=timezone.utc)
    except ValueError as exc:
        raise InputError(f"{where}: timestamp {text!r} is not a real date/time") from exc


def _int_in(obj: Mapping[str, Any], key: str, low: int, high: int, where: str) -> int:
    value = _require(obj, key, int, where)
    if not low <= value <= high:
        raise InputError(f"{where}: {key!r} must be in {low}..{high}")
    return value


def validate_site_id(site_id: object) -> str:
    """Site ids name namespaces and files: DNS-label syntax only (no `../`, no spoofing by case)."""
    if not isinstance(site_id, str) or not SITE_ID_RE.fullmatch(site_id):
        raise InputError(f"invalid site id {site_id!r}: use 1-64 lowercase letters, digits and '-'")
    return site_id


def json_int(value: Any) -> Any:
    """JSON has one number type: `5.0` is the integer 5 (JSON Schema, hence our OpenAPI specs,
    says so), while `5.5`, `true` and `"5"` are not integers. Returns the int, or the value as is."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _require(obj: Mapping[str, Any], key: str, typ: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, Mapping):
        raise InputError(f"{where}: expected an object")
    if key not in obj:
        raise InputError(f"{where}: missing {key!r}")
    value = obj[key]
    if typ is int:
        value = json_int(value)
    if typ is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, typ) or (typ in (int, float) and isinstance(value, bool)):
        raise InputError(f"{where}: {key!r} has the wrong type")
    return value


def _no_extra(obj: Mapping[str, Any], allowed: set[str], where: str) -> None:
    extra = set(obj) - allowed
    if extra:
        raise InputError(f"{where}: unknown keys {sorted(extra)}")


MAX_PAGE = 10**7


@dataclass(frozen=True)
class Citation:
    """One cited document. `page` (1-based, PDFs) and `source` ("<source>:<path>" inside the
    site, see plugin.sources) are optional: absent from the JSON when unknown, so citations
    without them keep the shape older peers read."""

    site_id: str
    doc_id: str
    title: str
    score: float = 0.0
    page: int | None = None
    source: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("page", "source"):
            if out[key] is None:
                del out[key]
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "Citation":
        w = "citation"
        _no_extra(obj, {"site_id", "doc_id", "title", "score", "page", "source"}, w)
        page = _int_in(obj, "page", 1, MAX_PAGE, w) if obj.get("page") is not None else None
        source = _require(obj, "source", str, w) if obj.get("source") is not None else None
        return cls(
            site_id=_require(obj, "site_id", str, w),
            doc_id=_require(obj, "doc_id", str, w),
            title=_require(obj, "title", str, w),
            score=_require(obj, "score", float, w) if "score" in obj else 0.0,
            page=page,
            source=source,
        )


@dataclass(frozen=True)
class RetrieveRequest:
    """What the gateway asks a site. `mode`: "local" (entities + graph), "global" (communities)."""

    question: str
    top_k: int = 10
    mode: str = "local"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "RetrieveRequest":
        w = "retrieve request"
        _no_extra(obj, {"question", "top_k", "mode"}, w)
        q = _require(obj, "question", str, w).strip()
        if not q or len(q) > MAX_QUESTION_CHARS:
            raise InputError(f"{w}: question must have 1-{MAX_QUESTION_CHARS} characters")
        top_k = _require(obj, "top_k", int, w) if "top_k" in obj else 10
        if not 1 <= top_k <= 100:
            raise InputError(f"{w}: top_k must be 1-100")
        mode = _require(obj, "mode", str, w) if "mode" in obj else "local"
        if mode not in ("local", "global"):
            raise InputError(f"{w}: mode must be 'local' or 'global'")
        return cls(question=q, top_k=top_k, mode=mode)


@dataclass(frozen=True)
class PartialAnswer:
    """A site's answer to one retrieve request: an extractive (or LLM) answer and what it cites.

    `evidence` ranks the cited documents best first (what evidence recall@k is measured on);
    `confidence` in [0, 1] is the site's own estimate, used by the gateway's gate and fusion."""

    site_id: str
    answer: str
    citations: tuple[Citation, ...]
    confidence: float
    # The answer's support, for fusion: (sentence, doc_id) or (sentence, doc_id, relevance), where
    # relevance is the site's cosine of the sentence with the question (same model at every site,
    # so comparable across sites). Given, it spares the gateway re-embedding every sentence.
    sentences: tuple[tuple[str, str] | tuple[str, str, float], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "site_id": self.site_id,
            "answer": self.answer,
            "citations": [c.to_json() for c in self.citations],
            "confidence": self.confidence,
            "sentences": [list(s) for s in self.sentences],
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "PartialAnswer":
        w = "partial answer"
        _no_extra(obj, {"site_id", "answer", "citations", "confidence", "sentences"}, w)
        cites = _require(obj, "citations", list, w)
        sentences = _require(obj, "sentences", list, w) if "sentences" in obj else []
        parsed_sentences = []
        for s in sentences:
            if not (isinstance(s, list) and len(s) in (2, 3) and all(isinstance(x, str) for x in s[:2])):
                raise InputError(f"{w}: sentences must be [text, doc_id] or [text, doc_id, relevance]")
            if len(s) == 2:
                parsed_sentences.append((s[0], s[1]))
                continue
            relevance = json_int(s[2])
            if isinstance(relevance, bool) or not isinstance(relevance, (int, float)) or not -1.0 <= relevance <= 1.0:
                raise InputError(f"{w}: a sentence's relevance must be a number in [-1, 1]")
            parsed_sentences.append((s[0], s[1], float(relevance)))
        conf = _require(obj, "confidence", float, w)
        if not 0.0 <= conf <= 1.0:
            raise InputError(f"{w}: confidence must be in [0, 1]")
        return cls(
            site_id=validate_site_id(_require(obj, "site_id", str, w)),
            answer=_require(obj, "answer", str, w),
            citations=tuple(Citation.from_json(c) for c in cites),
            confidence=conf,
            sentences=tuple(parsed_sentences),
        )


@dataclass(frozen=True)
class Richness:
    """How much knowledge a summary stands for: SCOUT-RAG's richness signal, and DGRAG's size."""

    entities: int
    chunks: int
    documents: int

    def to_json(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "Richness":
        w = "richness"
        _no_extra(_expect_object(obj, w), {"entities", "chunks", "documents"}, w)
        return cls(
            entities=_int_in(obj, "entities", 0, MAX_INT64, w),
            chunks=_int_in(obj, "chunks", 0, MAX_INT64, w),
            documents=_int_in(obj, "documents", 0, MAX_INT64, w),
        )


@dataclass(frozen=True)
class SummaryRecord:
    """One community summary as published: id, version, exact vector bytes, richness, optional text."""

    summary_id: str
    version: int
    vector_b64: str  # base64 of little-endian float32, exactly `dim` values (see sync.vectors)
    richness: Richness
    level: int = 0
    text: str | None = None  # only when the site's policy allows publishing summary text
    # The summary of the community one level coarser holding this one (plugin/hierarchy.py); None at
    # the top level and in publications from before the hierarchy, whose records have no "parent" key
    # (so their bytes, and the manifest digests over them, are unchanged).
    parent: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {
            "id": self.summary_id,
            "version": self.version,
            "vector": self.vector_b64,
            "richness": self.richness.to_json(),
            "level": self.level,
            "text": self.text,
        }
        if self.parent is not None:
            out["parent"] = self.parent
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "SummaryRecord":
        """Every key is required (`text` may be null): one record has one JSON shape."""
        w = "summary record"
        summary_id = _require(obj, "id", str, w)
        _no_extra(obj, {"id", "version", "vector", "richness", "level", "text", "parent"}, w)
        if not SUMMARY_ID_RE.fullmatch(summary_id):
            raise InputError(f"{w}: invalid id {summary_id!r}: use 1-128 of A-Z a-z 0-9 _ . : -")
        parent = obj.get("parent")
        if "parent" in obj and not (isinstance(parent, str) and SUMMARY_ID_RE.fullmatch(parent) and parent != summary_id):
            raise InputError(f"{w}: 'parent' must be another summary's id (leave the key out at the top level)")
        if "text" not in obj:
            raise InputError(f"{w}: missing 'text' (send null when no text is published)")
        text = obj["text"]
        if text is not None and not isinstance(text, str):
            raise InputError(f"{w}: 'text' must be a string or null")
        return cls(
            summary_id=summary_id,
            version=_int_in(obj, "version", 0, MAX_INT64, w),
            vector_b64=_require(obj, "vector", str, w),
            richness=Richness.from_json(_require(obj, "richness", Mapping, w)),
            level=_int_in(obj, "level", 0, 1024, w),
            text=text,
            parent=parent,
        )


@dataclass(frozen=True)
class EmbeddingSpace:
    """The embedder a set of vectors was made with. Two sets are comparable only when every field
    matches: `model_sha256` (the model file's hash; "" where none is known, a served model) tells
    an int8 graph from the fp32 one and a re-exported file from the catalog's."""

    model_id: str
    dim: int
    encoding: str = "f32le-b64"
    model_sha256: str = ""

    @classmethod
    def of(cls, embedder: Any) -> "EmbeddingSpace":
        """The space of an embedder (hansa.adapters.embedder.Embedder; duck-typed, sync imports no adapter)."""
        return cls(model_id=embedder.model_id, dim=embedder.dim, model_sha256=getattr(embedder, "model_sha256", ""))

    def describe(self) -> str:
        files = f", file sha256 {self.model_sha256[:12]}" if self.model_sha256 else ", no file hash"
        return f"{self.model_id!r} (dim {self.dim}{files})"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "EmbeddingSpace":
        w = "embedding space"
        model_id = _require(obj, "model_id", str, w)
        _no_extra(obj, {"model_id", "dim", "encoding", "model_sha256"}, w)
        if not model_id or len(model_id) > MAX_MODEL_ID_CHARS:
            raise InputError(f"{w}: model_id must have 1-{MAX_MODEL_ID_CHARS} characters")
        encoding = _require(obj, "encoding", str, w)
        if encoding != VECTOR_ENCODING:
            raise InputError(
                f"{w}: encoding {encoding!r} is not supported; use {VECTOR_ENCODING!r}"
            )
        digest = obj.get("model_sha256", "")
        if not isinstance(digest, str) or (digest and not SHA256_HEX_RE.fullmatch(digest)):
            raise InputError(f"{w}: model_sha256 must be 64 lowercase hex digits, or empty")
        return cls(model_id=model_id, dim=_int_in(obj, "dim", 1, MAX_DIM, w), encoding=encoding, model_sha256=digest)


def _expect_object(obj: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise InputError(f"{where}: expected an object")
    return obj


# Retired: v=1 carried full sets only. The gateway refuses it (sync.publication defines the v=2 type);
# kept so tests can prove a retired type is refused even when validly signed.
PUBLICATION_TYPE = "application/vnd.hansa.publication+json; v=1"
