"""Fakes of hansa's own ports, for the fast test tier (`scripts/test --fast`).

Why: routing, the engine, fusion and the gateway's HTTP surface can be tested in milliseconds when
the embedder, the vector store and the sites are stand-ins that keep each port's promises. Never
fakes of Neo4j or Milvus themselves: the integration tier runs those for real. Each fake has a
contract test (tests/test_fakes.py; the vector store also runs tests/adapters/vector/test_milvus.py's
shared contract), so a fake that drifts from its port fails there, not silently in the tests that use it.

- `HashEmbedder` (adapters.embedder.base.Embedder): deterministic vectors from hashed word tokens,
  so texts sharing words are near and texts sharing none are (nearly) orthogonal.
- `InMemoryVectorStore` (adapters.vector.base.VectorStore): exact cosine/IP search over dicts, with
  the same input checks as the Milvus store (one spec validator, the same limits), and an `insert`
  that refuses stored ids (the promise its callers make).
- `WordReader` (adapters.reader.base.Reader): a sentence answers as far as it holds the question's
  content words; its span is the first capitalized word or number the question does not hold.
- `ScriptedSiteTransport` (gateway.transport.SiteTransport): canned answers per site, signed with
  the site's real key and checked by the gateway's real verification (check_signed_response,
  check_answer), plus scripted hangs, unsigned or foreign-signed replies and invalid bodies.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from hansa.adapters.embedder.base import Embedder, checked_texts, unit_rows
from hansa.adapters.records import VectorHit
from hansa.adapters.vector.base import CollectionSpec, VectorStore
from hansa.adapters.vector.milvus import (ID_MAX_BYTES, MAX_LIMIT, MilvusVectorStore, _validate_spec,
                                          check_int8_lengths, default_value, filterable)
from hansa.core.errors import BackendError, InputError, NotFoundError
from hansa.core.jsonsafe import dumps
from hansa.gateway.client import ERROR, INVALID, RETRIEVE_PATH, CallFailed, SiteTarget, check_answer, check_signed_response
from hansa.gateway.client import signed_headers, time_left
from hansa.gateway.transport import InProcessSiteTransport
from hansa.sync.httpsig import HttpMessage, keyring, sign_response
from hansa.sync.keys import SiteIdentity, load_public_key
from hansa.sync.membership import validate_site_url
from hansa.sync.wire import PartialAnswer, RetrieveRequest

# -- the embedder -----------------------------------------------------------------------------------
_WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbedder(Embedder):
    """Each lower-cased word token adds +-1 to one of `dim` buckets (blake2b of the token); rows
    are L2-normalized. Deterministic across processes (no Python hash seed) and model-free."""

    model_id = "test/hash-embedder"
    model_sha256 = ""

    def __init__(self, dim: int = 64) -> None:
        if dim < 2:
            raise InputError(f"HashEmbedder dim must be at least 2, got {dim}")
        self.dim = dim

    def _bucket(self, token: str) -> tuple[int, float]:
        digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self.dim, 1.0 if (value >> 63) & 1 else -1.0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = np.zeros((len(checked_texts(texts)), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            tokens = _WORD.findall(text.lower()) or [text]  # punctuation-only text still gets a vector
            for token in tokens:
                bucket, sign = self._bucket(token)
                rows[i, bucket] += sign
            if not rows[i].any():  # tokens that cancelled out: fall back to the whole text's bucket
                bucket, sign = self._bucket("\x00" + text)
                rows[i, bucket] = sign
        return unit_rows(rows)


# -- the vector store -------------------------------------------------------------------------------
class RelabelledEmbedder(Embedder):
    """Another embedder's vectors under another `model_id`: what a site or gateway looks its score
    scale up by (adapters/embedder/scale.py), so a test can hold the vectors fixed and vary the scale."""

    def __init__(self, inner: Embedder, model_id: str) -> None:
        self.inner, self.model_id, self.dim = inner, model_id, inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed_queries(texts)


class WordReader:
    """The reader port without a model: score = share of the question's content words in the sentence."""

    name = "word-reader (test double)"
    model_sha256 = "0" * 64

    def __init__(self) -> None:
        self.reads: list[tuple[str, tuple[str, ...]]] = []

    def read(self, question: str, sentences: Sequence[str]) -> list[Any]:
        from hansa.adapters.reader.base import Reading
        from hansa.core.text import content_words

        self.reads.append((question, tuple(sentences)))
        asked = content_words(question)
        out = []
        for sentence in sentences:
            held = content_words(sentence)
            score = len(asked & held) / len(asked) if asked else 0.0
            span = next((m for m in re.finditer(r"\b(?:[A-Z][a-z]+|\d+)\b", sentence)
                         if m.group(0).casefold() not in question.casefold()), None)
            out.append(Reading(score, span.group(0), span.start(), span.end()) if span else Reading(score))
        return out


@dataclass
class _Collection:
    spec: CollectionSpec
    rows: dict[str, tuple[np.ndarray, dict[str, Any]]] = field(default_factory=dict)


class InMemoryVectorStore(VectorStore):
    """Collections as dicts in this process: exact search, strong consistency, nothing durable.

    Instances built with the same `shared_state` dict see one another's collections (two gateway
    processes on one store, in a test)."""

    def __init__(self, prefix: str = "hansa_", shared_state: dict[str, _Collection] | None = None) -> None:
        self.prefix = prefix
        self._data: dict[str, _Collection] = shared_state if shared_state is not None else {}
        self._lock = threading.RLock()
        self._closed = False

    def _coll(self, collection: str) -> tuple[str, _Collection]:
        if self._closed:
            raise BackendError("the in-memory vector store is closed")
        full = self.prefix + collection
        coll = self._data.get(full)
        if coll is None:
            raise NotFoundError(f"vector collection {full!r} does not exist")
        return full, coll

    def ensure_collection(self, spec: CollectionSpec) -> None:
        _validate_spec(spec)
        full = self.prefix + spec.name
        with self._lock:
            existing = self._data.get(full)
            if existing is None:
                self._data[full] = _Collection(spec)
                return
            held = existing.spec
            if spec.owner and held.owner and held.owner != spec.owner:
                raise BackendError(f"vector collection {full!r} belongs to site {held.owner!r}, not {spec.owner!r}")
            if held.dim != spec.dim:
                raise BackendError(f"vector collection {full!r} holds {held.dim}-d vectors but {spec.dim}-d were asked for")
            check_int8_lengths(repr(full), held.fields, spec.fields)
            missing = [f"{k} ({v})" for k, v in spec.fields.items() if held.fields.get(k) != v]
            if missing:
                raise BackendError(f"vector collection {full!r} lacks field(s) {', '.join(missing)}")

    def collection_owner(self, collection: str) -> str | None:
        coll = self._data.get(self.prefix + collection)
        return None if coll is None else coll.spec.owner

    def collection_dim(self, collection: str) -> int | None:
        coll = self._data.get(self.prefix + collection)
        return None if coll is None else coll.spec.dim

    # The Milvus store's own input checks (they read no state of the store): one set of rules for both.
    _matrix = MilvusVectorStore._as_matrix
    _value = MilvusVectorStore._row_value

    def upsert(self, collection: str, ids: Sequence[str], vectors: np.ndarray,
               fields: Sequence[Mapping[str, Any]] | None = None, *, flush: bool = True) -> None:
        full, coll = self._coll(collection)
        ids = list(ids)
        arr = self._matrix(full, vectors, coll.spec.dim)
        if len(ids) != arr.shape[0] or (fields is not None and len(fields) != len(ids)):
            raise InputError(f"{full}: {len(ids)} ids, {arr.shape[0]} vectors and {len(fields or ids)} field rows")
        if len(set(ids)) != len(ids):
            raise InputError(f"{full}: duplicate ids in one upsert")
        staged = {}
        for i, row_id in enumerate(ids):  # every row is checked before anything is written
            if not isinstance(row_id, str) or not row_id or len(row_id.encode("utf-8")) > ID_MAX_BYTES:
                raise InputError(f"{full}: id {row_id!r} must be a non-empty string of at most {ID_MAX_BYTES} bytes")
            given = dict(fields[i]) if fields is not None else {}
            unknown = set(given) - set(coll.spec.fields)
            if unknown:
                raise InputError(f"{full}: unknown field(s) {', '.join(sorted(unknown))}")
            values = {n: self._value(full, n, k, given[n]) if n in given else default_value(k) for n, k in coll.spec.fields.items()}
            staged[row_id] = (arr[i].copy(), values)
        with self._lock:
            coll.rows.update(staged)

    def insert(self, collection: str, ids: Sequence[str], vectors: np.ndarray,
               fields: Sequence[Mapping[str, Any]] | None = None, *, flush: bool = True) -> None:
        """An upsert that refuses ids already stored: the caller's promise, which Milvus cannot
        check (a server would keep both rows), is checked here, so a caller breaking it fails."""
        full, coll = self._coll(collection)
        with self._lock:
            stored = sorted({i for i in ids if isinstance(i, str) and i in coll.rows})
            if stored:
                raise InputError(f"{full}: insert of stored id(s) {', '.join(map(repr, stored[:3]))}; upsert replaces rows")
            self.upsert(collection, ids, vectors, fields, flush=flush)

    def flush(self, collection: str) -> None:
        self._coll(collection)  # nothing to seal in memory; a missing collection is refused as Milvus refuses it

    def _matches(self, full: str, coll: _Collection, where: Mapping[str, Any] | None) -> Callable[[dict[str, Any]], bool]:
        if not where:
            return lambda values: True
        allowed: dict[str, list[Any]] = {}  # a list of values matches any of them
        for name, given in where.items():
            kind = coll.spec.fields.get(name)
            if not filterable(kind):
                raise InputError(f"{full}: cannot filter on {name!r}")
            listed = list(given) if isinstance(given, (list, tuple)) else [given]
            if not listed:
                raise InputError(f"{full}: filter values for {name!r} are empty: they would match nothing")
            for value in listed:
                if kind == "str" and not isinstance(value, str):
                    raise InputError(f"{full}: filter value for {name!r} must be a string, got {value!r}")
                if kind == "int" and (isinstance(value, bool) or not isinstance(value, (int, np.integer))):
                    raise InputError(f"{full}: filter value for {name!r} must be an integer, got {value!r}")
                if kind == "float" and (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)):
                    raise InputError(f"{full}: filter value for {name!r} must be a finite number, got {value!r}")
            allowed[name] = listed
        return lambda values: all(values[n] in v for n, v in allowed.items())

    @staticmethod
    def _check_ids(full: str, ids: Sequence[Any]) -> list[str]:
        ids = list(ids)
        for row_id in ids:
            if not isinstance(row_id, str):
                raise InputError(f"{full}: ids must be strings, got {row_id!r}")
        return ids

    def delete(self, collection: str, ids: Sequence[str] | None = None, where: Mapping[str, Any] | None = None) -> None:
        full, coll = self._coll(collection)
        if ids is None and not where:
            raise InputError(f"{full}: delete needs ids or a where filter (refusing to delete everything)")
        match = self._matches(full, coll, where)
        with self._lock:
            chosen = coll.rows if ids is None else self._check_ids(full, ids)
            for row_id in [i for i in chosen if i in coll.rows and match(coll.rows[i][1])]:
                del coll.rows[row_id]

    def search(self, collection: str, vectors: np.ndarray, limit: int, where: Mapping[str, Any] | None = None,
               output_fields: Sequence[str] = ()) -> list[list[VectorHit]]:
        full, coll = self._coll(collection)
        arr = self._matrix(full, vectors, coll.spec.dim)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise InputError(f"{full}: limit must be an integer in 1..{MAX_LIMIT}, got {limit!r}")
        unknown = [f for f in output_fields if f not in coll.spec.fields]
        if unknown:
            raise InputError(f"{full}: unknown output field(s) {', '.join(unknown)}")
        match = self._matches(full, coll, where)
        with self._lock:
            rows = [(i, v, f) for i, (v, f) in coll.rows.items() if match(f)]
        if not rows:
            return [[] for _ in range(arr.shape[0])]
        matrix = np.stack([v for _, v, _ in rows])
        if coll.spec.metric == "COSINE":  # Milvus normalizes both sides for COSINE
            matrix = unit_rows(matrix)
            arr = unit_rows(arr)
        scores = arr @ matrix.T
        out = []
        for q in range(arr.shape[0]):
            order = sorted(range(len(rows)), key=lambda j: (-scores[q, j], rows[j][0]))[:limit]
            out.append([VectorHit(id=rows[j][0], score=float(scores[q, j]),
                                  fields={f: rows[j][2][f] for f in output_fields}) for j in order])
        return out

    def get(self, collection: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        full, coll = self._coll(collection)
        with self._lock:
            return {i: coll.rows[i][0].copy() for i in self._check_ids(full, ids) if i in coll.rows}

    def fields(self, collection: str, names: Sequence[str], ids: Sequence[str] | None = None,
               where: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
        full, coll = self._coll(collection)
        unknown = [f for f in names if f not in coll.spec.fields]
        if unknown:
            raise InputError(f"{full}: unknown fields {unknown}")
        match = self._matches(full, coll, where)
        with self._lock:
            chosen = list(coll.rows) if ids is None else self._check_ids(full, ids)
            return {i: {n: coll.rows[i][1][n] for n in names} for i in chosen if i in coll.rows and match(coll.rows[i][1])}

    def count(self, collection: str) -> int:
        _, coll = self._coll(collection)
        return len(coll.rows)

    def drop(self, collection: str) -> None:
        with self._lock:
            self._data.pop(self.prefix + collection, None)

    def close(self) -> None:
        self._closed = True


# -- the site transport -----------------------------------------------------------------------------
SITE = "site"  # signed with the site's own key: accepted
UNSIGNED = "unsigned"  # no signature headers: refused as invalid
STRANGER = "stranger"  # signed with a key the registry does not hold for the site: refused as invalid


@dataclass(frozen=True)
class Reply:
    """One scripted site reply. `answer`: a PartialAnswer, a function of the request returning
    one, or raw body bytes (a malformed answer); `delay_s`: how long the site takes (past the
    round's deadline it is a timeout); `signed_by`: SITE, UNSIGNED or STRANGER; `status`: HTTP status."""

    answer: PartialAnswer | Callable[[RetrieveRequest], PartialAnswer] | bytes | None = None
    delay_s: float = 0.0
    signed_by: str = SITE
    status: int = 200


def hang() -> Reply:
    """A site that never answers within any deadline a test uses."""
    return Reply(delay_s=3600.0)


class ScriptedSiteTransport(InProcessSiteTransport):
    """A SiteTransport whose sites answer from a script: `replies[site_id]` is a Reply (every call)
    or a list of Replies (one per call, the last repeated). Every reply goes through the gateway's
    own checks: the request is signed by the gateway identity, the response signed by the site
    identity given in `site_keys` (or not, as scripted) and verified against the target's registry
    keys, capped at `max_response_bytes` and parsed by check_answer. `requests` records what each
    site was asked, in call order. Rounds (deadline, order, on_answer) are the in-process
    transport's: only where an answer comes from differs."""

    def __init__(self, gateway: SiteIdentity, site_keys: Mapping[str, SiteIdentity],
                 replies: Mapping[str, Reply | Sequence[Reply]] | None = None) -> None:
        super().__init__(gateway)
        self.site_keys = dict(site_keys)
        self.replies: dict[str, Reply | Sequence[Reply]] = dict(replies or {})
        self.requests: list[tuple[str, RetrieveRequest]] = []
        self._stranger = SiteIdentity.generate()
        self._lock = threading.Lock()

    def script(self, site_id: str, reply: Reply | Sequence[Reply]) -> None:
        self.replies[site_id] = reply

    def asked(self, site_id: str) -> list[RetrieveRequest]:
        return [r for s, r in self.requests if s == site_id]

    def _next_reply(self, site_id: str, request: RetrieveRequest) -> Reply:
        with self._lock:
            script = self.replies.get(site_id)
            if script is None:
                raise CallFailed(ERROR, f"no scripted reply for site {site_id!r}")
            self.requests.append((site_id, request))
            if isinstance(script, Reply):
                return script
            n = sum(1 for s, _ in self.requests if s == site_id) - 1
            return script[min(n, len(script) - 1)]

    def _call_one(self, target: SiteTarget, body: bytes, deadline: float, cap: int) -> tuple[PartialAnswer, int]:
        request = RetrieveRequest.from_json(json.loads(body))
        reply = self._next_reply(target.site_id, request)
        target_uri = validate_site_url(target.url) + RETRIEVE_PATH
        req_headers = signed_headers(self.identity, target.site_id, target_uri, body)
        if reply.delay_s:
            time.sleep(min(reply.delay_s, max(0.0, deadline - time.monotonic()) + 0.05))
        time_left(deadline, "while the site was answering")
        if isinstance(reply.answer, bytes):
            raw = reply.answer
        else:
            answer = reply.answer(request) if callable(reply.answer) else reply.answer
            raw = dumps(answer.to_json()) if answer is not None else b""
        if len(raw) > cap:
            raise CallFailed(INVALID, f"response larger than {cap} bytes; stopped reading", cap)
        headers: dict[str, str] = {"Content-Type": "application/json"}
        signer = {SITE: self.site_keys.get(target.site_id), STRANGER: self._stranger, UNSIGNED: None}[reply.signed_by]
        request_msg = HttpMessage.request("POST", target_uri, req_headers)
        if signer is not None:
            headers.update(sign_response(signer, reply.status, headers, raw, request_msg))
        if reply.status != 200:
            raise CallFailed(ERROR, f"site answered HTTP {reply.status}", len(raw))
        keys = keyring(load_public_key(k) for k in target.public_keys)
        check_signed_response(reply.status, headers, raw, keys, request_msg)
        return check_answer(target.site_id, raw), len(raw)
