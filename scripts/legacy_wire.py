"""hansa's hand-written wire parsing as it was before the model layer (sync/wire.py at e6955d4), kept
only as the baseline of scripts/bench_models.py: the decision record (docs/decisions/0002-model-layer.md)
compares it with pydantic and msgspec. Nothing in hansa imports this file.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

from hansa.core.errors import InputError
from hansa.core.model import json_int
from hansa.sync.wire import MAX_INT64, MAX_PAGE, MAX_QUESTION_CHARS, SUMMARY_ID_RE, validate_site_id


def _int_in(obj: Mapping[str, Any], key: str, low: int, high: int, where: str) -> int:
    value = _require(obj, key, int, where)
    if not low <= value <= high:
        raise InputError(f"{where}: {key!r} must be in {low}..{high}")
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


def _expect_object(obj: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise InputError(f"{where}: expected an object")
    return obj
