"""Milvus behind the vector-store port: Milvus Lite by file path, a Milvus server by URI.

Written for server semantics so the same code runs on Lite, standalone or a cluster: collections
are loaded explicitly (Lite 3.x reopens them unloaded), reads ask for Strong consistency (servers
default to Bounded), inserts go in batches that stay far below request-size limits, and bulk
writes are flushed every few thousand rows and at their end (Lite brute-forces unflushed rows in
Python and turns all of them into Python objects when it flushes; a flush per small write seals a
segment each).

Filter expressions are the one place where caller data meets a query language: field names come
only from the collection's own schema and every value is a quoted, escaped literal, so a hostile
string can never change the shape of an expression.
"""
from __future__ import annotations

import logging
import math
import os
import re
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit
from typing import Any, Iterator, Mapping, Sequence

# gRPC's C core writes its own log lines (connection drops, GOAWAY "too_many_pings" from a Milvus
# Lite server answering pymilvus' keepalive pings, absl's "log messages before InitializeLog")
# straight to the terminal, beside hansa's progress bars. Every failure that matters also reaches
# pymilvus as an exception, which this module turns into a BackendError with advice, so the core's
# lines are noise for an admin; GRPC_VERBOSITY=ERROR (or DEBUG) in the environment brings them back.
os.environ.setdefault("GRPC_VERBOSITY", "NONE")

import numpy as np

from hansa.adapters.records import VectorHit
from hansa.adapters.vector.base import CollectionSpec, VectorStore
from hansa.core.errors import BackendError, ConfigError, InputError, NotFoundError
from hansa.core.logs import get_logger

_log = get_logger(__name__)

ID_FIELD = "id"
VECTOR_FIELD = "vector"
ID_MAX_BYTES = 512
STR_MAX_BYTES = 1024
BATCH_ROWS = 1000  # rows per insert/delete request: well inside the 64 MB portable limit at 384-d
MAX_DIM = 32_768
MAX_LIMIT = 16_384
METRICS = ("COSINE", "IP")
INDEXES = ("AUTOINDEX", "FLAT", "IVF_FLAT", "HNSW")
FIELD_KINDS = ("str", "int", "float", "json", "int8[N]")
# "int8[N]": exactly N signed bytes, e.g. a vector's int8 codes (an ARRAY of INT8 with capacity N:
# Milvus Lite 3.2 refuses FLOAT16, INT8 and BINARY vector fields, and an INT8 array is stored at
# about a byte per value); read and written whole, never filtered on. Milvus caps an array at 4,096.
MAX_INT8_LENGTH = 4096
_INT8_KIND = re.compile(r"^int8\[([1-9][0-9]{0,3})\]$")


def int8_length(kind: str) -> int | None:
    """N of an "int8[N]" field kind (1..4096), else None."""
    m = _INT8_KIND.match(kind) if isinstance(kind, str) else None
    return int(m.group(1)) if m and int(m.group(1)) <= MAX_INT8_LENGTH else None


def check_int8_lengths(where: str, held: Mapping[str, str], asked: Mapping[str, str]) -> None:
    """Refuse (BackendError) a collection whose int8 codes have another length than asked for:
    they were made by another embedder."""
    for name, kind in asked.items():
        had, want = int8_length(held.get(name, "")), int8_length(kind)
        if had and want and had != want:
            raise BackendError(
                f"vector collection {where} holds {had}-d codes in {name!r} but {want}-d were asked for: the "
                f"embedding model changed. Re-index into a fresh collection (drop it and re-embed)."
            )


def filterable(kind: str | None) -> bool:
    return kind in ("str", "int", "float")


def default_value(kind: str) -> Any:
    """A field's value in a row written without it."""
    n = int8_length(kind)
    return [0] * n if n else {"str": "", "int": 0, "float": 0.0, "json": {}}[kind]
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,254}$")
_SERVER_SCHEMES = ("http://", "https://", "tcp://", "unix:")
# Build parameters per index type; the engine's defaults for everything not named here.
_INDEX_BUILD: dict[str, dict[str, int]] = {"IVF_FLAT": {"nlist": 128}, "HNSW": {"M": 16, "efConstruction": 200}}
OWNER_PROPERTY = "hansa.site"  # collection property naming the site that created it
_LITE_ADVICE = (
    "Milvus Lite allows one process per data directory. Stop the other process, or run a shared "
    "server (`milvus-lite server --data-dir DIR --host 127.0.0.1 --port 19530`, or Milvus standalone) "
    "and point every process "
    "at it with HANSA_MILVUS_URI=http://127.0.0.1:19530."
)


@dataclass(frozen=True)
class _Schema:
    """What the store needs to know about a live collection to validate calls against it."""

    dim: int
    fields: dict[str, str]  # scalar field name -> kind ("str" | "int" | "float" | "json" | "int8[N]")
    index: str
    metric: str


def is_server_uri(uri: str) -> bool:
    return uri.startswith(_SERVER_SCHEMES)


def grpc_options(uri: str, embedded: bool) -> dict[str, Any]:
    """MilvusClient options for `uri`. Milvus Lite (embedded, or `milvus-lite server` on this host)
    serves gRPC with grpc's default ping policy, and pymilvus pings idle channels every 10 s: the
    server answers GOAWAY "too_many_pings", and a connection pymilvus keeps for the URI fails its
    next health check and reconnect (seen after ~10 idle minutes against `milvus-lite server`). Over
    loopback there is no idle middlebox to keep alive, so idle pings are off there; a remote server
    keeps pymilvus's defaults."""
    host = (urlsplit(uri).hostname or "") if "://" in uri else ""
    if embedded or host in ("localhost", "::1") or host.startswith("127."):
        return {"grpc_options": {"grpc.keepalive_permit_without_calls": 0}}
    return {}


class _NoAllocTimestampRefusal(logging.Filter):
    """Milvus Lite serves gRPC in this process and does not implement AllocTimestamp, which pymilvus
    calls while it waits for the index of a collection it just created; pymilvus carries on without
    it, but grpc logs the refusal as an ERROR with a traceback at every collection creation, which
    reads as a failure in the demo and in a site's logs. Only that refusal is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, NotImplementedError) or record.exc_info[2] is None:
            return True
        return all(frame.name != "AllocTimestamp" for frame in traceback.extract_tb(record.exc_info[2]))


def _quiet_lite_refusals() -> None:
    grpc_server = logging.getLogger("grpc._server")
    if not any(isinstance(f, _NoAllocTimestampRefusal) for f in grpc_server.filters):
        grpc_server.addFilter(_NoAllocTimestampRefusal())


def _shown(uri: str) -> str:
    """The URI as error messages may show it: without `user:password@`."""
    return re.sub(r"^([a-z]+://)[^/@]*@", r"\1", uri)


def quote_literal(value: str) -> str:
    """A Milvus expression string literal that always reads back as exactly `value`."""
    escaped = (
        value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    )
    return f'"{escaped}"'


def _check_name(kind: str, name: str) -> None:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InputError(f"{kind} name {name!r} is invalid: use letters, digits and '_' and start with a letter or '_'")


def _validate_spec(spec: CollectionSpec) -> None:
    _check_name("collection", spec.name)
    if not isinstance(spec.dim, int) or isinstance(spec.dim, bool) or not 1 <= spec.dim <= MAX_DIM:
        raise InputError(f"collection {spec.name!r}: dim must be an integer in 1..{MAX_DIM}, got {spec.dim!r}")
    if spec.metric not in METRICS:
        raise InputError(f"collection {spec.name!r}: metric must be one of {', '.join(METRICS)}, got {spec.metric!r}")
    if spec.index not in INDEXES:
        raise InputError(f"collection {spec.name!r}: index must be one of {', '.join(INDEXES)}, got {spec.index!r}")
    for name, kind in spec.fields.items():
        _check_name("field", name)
        if name in (ID_FIELD, VECTOR_FIELD):
            raise InputError(f"collection {spec.name!r}: field name {name!r} is reserved")
        if kind not in FIELD_KINDS[:-1] and int8_length(kind) is None:
            raise InputError(f"collection {spec.name!r}: field {name!r} has kind {kind!r}; kinds: {', '.join(FIELD_KINDS)}")


def _batches(n: int, size: int = BATCH_ROWS) -> Iterator[slice]:
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


def _lite_dir_locked(data_dir: Path) -> bool:
    """True when another process holds Milvus Lite's advisory lock on `data_dir`.

    Only asked after opening failed: pymilvus swallows Lite's own "locked" error into a bare
    "Open local milvus failed", and a person needs to know which of the possible causes it was.
    """
    lock_path = data_dir / "LOCK"
    if not lock_path.exists():
        return False
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: cannot probe, say what is likely
        return True
    fd = os.open(lock_path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


# Milvus Lite runs one in-process server per data directory (shared by every client in this process
# that names it). Counting our users lets the last close() release the directory's lock, so that a
# CLI command, a test or another process can open it afterwards.
_LITE_USERS: dict[str, int] = {}
_LITE_LOCK = threading.Lock()


def _lite_acquire(path: str) -> None:
    with _LITE_LOCK:
        _LITE_USERS[path] = _LITE_USERS.get(path, 0) + 1


def _lite_release(path: str) -> None:
    with _LITE_LOCK:
        left = _LITE_USERS.get(path, 0) - 1
        if left > 0:
            _LITE_USERS[path] = left
            return
        _LITE_USERS.pop(path, None)
        from milvus_lite.server_manager import server_manager_instance

        server_manager_instance.release_server(path)


class MilvusVectorStore(VectorStore):
    """One MilvusClient; collection names get `prefix` so several tools can share one Milvus."""

    def __init__(self, uri: str, token: str = "", prefix: str = "hansa_", *, timeout_s: float = 30.0) -> None:
        if not uri:
            raise ConfigError("milvus uri is empty: set [milvus] uri / HANSA_MILVUS_URI to a .db path or http://host:19530")
        if prefix:
            _check_name("collection prefix", prefix)
        self._prefix = prefix
        self._timeout = timeout_s
        self._schemas: dict[str, _Schema] = {}
        self._loaded: set[str] = set()
        self._guard = threading.Lock()
        self._lite_path: str | None = None
        if is_server_uri(uri):
            self._uri = _shown(uri)
            self._client = self._connect(uri, token)
        else:
            path = Path(uri).expanduser().absolute()
            if path.suffix != ".db":
                raise ConfigError(f"Milvus Lite data path {str(path)!r} must end in '.db' (it is a directory Milvus Lite creates)")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise BackendError(f"cannot create the Milvus Lite directory {path.parent}: {exc}") from exc
            self._uri = str(path)
            _quiet_lite_refusals()
            self._client = self._connect(self._uri, token, lite_dir=path)
            self._lite_path = self._uri
            _lite_acquire(self._lite_path)

    def _connect(self, uri: str, token: str, lite_dir: Path | None = None) -> Any:
        from pymilvus import MilvusClient
        from pymilvus.exceptions import MilvusException

        options = grpc_options(uri, embedded=lite_dir is not None)
        try:
            return MilvusClient(uri=uri, token=token, timeout=self._timeout, **options)
        except MilvusException as exc:
            if lite_dir is not None and _lite_dir_locked(lite_dir):
                raise BackendError(f"Milvus Lite data directory {lite_dir} is locked by another process. {_LITE_ADVICE}") from exc
            raise BackendError(f"cannot open Milvus at {_shown(uri)}: {exc.message or exc}") from exc

    # -- naming and schema knowledge --------------------------------------------------------------

    @property
    def uri(self) -> str:
        return self._uri

    @property
    def shared(self) -> bool:
        return is_server_uri(self._uri)

    def _full(self, collection: str) -> str:
        _check_name("collection", collection)
        return self._prefix + collection

    def _call(self, what: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """Run one client call, turning engine failures into a BackendError that names the call."""
        from pymilvus.exceptions import MilvusException

        if self._client is None:
            raise BackendError(f"the vector store for {self._uri} is closed")
        try:
            return getattr(self._client, method)(*args, timeout=self._timeout, **kwargs)
        except MilvusException as exc:
            raise BackendError(f"Milvus at {self._uri}: {what} failed: {exc.message or exc}") from exc

    def _describe(self, full: str) -> _Schema:
        desc = self._call(f"describe {full}", "describe_collection", full)
        from pymilvus import DataType

        kinds = {DataType.VARCHAR: "str", DataType.INT64: "int", DataType.DOUBLE: "float", DataType.JSON: "json"}
        dim = 0
        fields: dict[str, str] = {}
        for f in desc["fields"]:
            if f["name"] == VECTOR_FIELD:
                dim = int(f["params"]["dim"])
            elif f["name"] != ID_FIELD and f["type"] in kinds:
                fields[f["name"]] = kinds[f["type"]]
            elif f["type"] == DataType.ARRAY and f.get("element_type") == DataType.INT8:
                fields[f["name"]] = f"int8[{int(f['params']['max_capacity'])}]"
        index, metric = "AUTOINDEX", "COSINE"
        if VECTOR_FIELD in self._call(f"list indexes of {full}", "list_indexes", full):
            info = self._call(f"describe index of {full}", "describe_index", full, VECTOR_FIELD)
            index, metric = info.get("index_type", index), info.get("metric_type", metric)
        return _Schema(dim=dim, fields=fields, index=index, metric=metric)

    def _schema(self, collection: str) -> tuple[str, _Schema]:
        """The collection's schema, loading the collection the first time this store touches it."""
        full = self._full(collection)
        with self._guard:
            known = self._schemas.get(full)
        if known is not None:
            return full, known
        if not self._call(f"has_collection {full}", "has_collection", full):
            raise NotFoundError(f"vector collection {full!r} does not exist at {self._uri}: create it first (ensure_collection)")
        schema = self._describe(full)
        self._load(full)
        with self._guard:
            self._schemas[full] = schema
        return full, schema

    def _load(self, full: str) -> None:
        with self._guard:
            if full in self._loaded:
                return
        try:
            self._call(f"load {full}", "load_collection", full)
        except BackendError:
            # Milvus Lite writes each segment's index sidecar (`*.idx`, derived from the segment's
            # own data and rebuilt when absent) in place, not through a rename: a process killed
            # while writing one leaves it cut short, and every later load fails on it (seen in the
            # kill -9 drills under load). The data files are intact, so drop the collection's
            # sidecars and load once more; a second failure is a real one.
            if not self._drop_lite_index_files(full):
                raise
            self._call(f"load {full}", "load_collection", full)
        with self._guard:
            self._loaded.add(full)

    def _drop_lite_index_files(self, full: str) -> int:
        """Remove the Milvus Lite index sidecars of `full` (none for a server); how many."""
        if self._lite_path is None:
            return 0
        files = sorted((Path(self._lite_path) / "collections" / full / "partitions").glob("*/indexes/*.idx"))
        for f in files:
            f.unlink(missing_ok=True)
        if files:
            _log.warning("milvus_lite.index_files_rebuilt", collection=full, files=len(files),
                         reason="a load failed on an index file (a crash may have cut one short); the data files are intact")
        return len(files)

    # -- the port ---------------------------------------------------------------------------------

    def collection_owner(self, collection: str) -> str | None:
        full = self._full(collection)
        if not self._call(f"has_collection {full}", "has_collection", full):
            return None
        properties = self._call(f"describe {full}", "describe_collection", full).get("properties") or {}
        return str(properties.get(OWNER_PROPERTY, ""))

    def collection_dim(self, collection: str) -> int | None:
        full = self._full(collection)
        if not self._call(f"has_collection {full}", "has_collection", full):
            return None
        return self._describe(full).dim

    def ensure_collection(self, spec: CollectionSpec) -> None:
        _validate_spec(spec)
        full = self._full(spec.name)
        schema: _Schema | None = None
        if not self._call(f"has_collection {full}", "has_collection", full):
            try:
                self._create(full, spec)
                schema = _Schema(dim=spec.dim, fields=dict(spec.fields), index=spec.index, metric=spec.metric)
            except BackendError:
                # Several processes opening one Milvus server at once (gunicorn workers on a fresh
                # server) all find the collection missing and all create it; one wins. The others
                # check what it created as they would any existing collection.
                if not self._call(f"has_collection {full}", "has_collection", full):
                    raise
        if schema is None:
            schema = self._existing(full, spec)
        self._load(full)
        with self._guard:
            self._schemas[full] = schema

    def _existing(self, full: str, spec: CollectionSpec) -> _Schema:
        """An existing collection's schema, refused when it is another site's or does not fit `spec`."""
        owner = self.collection_owner(spec.name)
        if spec.owner and owner and owner != spec.owner:
            raise BackendError(
                f"vector collection {full!r} at {self._uri} belongs to site {owner!r}, not {spec.owner!r}: one "
                f"collection prefix holds one site; give this site its own [milvus] collection_prefix"
            )
        existing = self._describe(full)
        if existing.dim != spec.dim:
            raise BackendError(
                f"vector collection {full!r} at {self._uri} holds {existing.dim}-d vectors but {spec.dim}-d were "
                f"asked for: the embedding model changed. Re-index into a fresh collection (drop {full!r} and re-embed)."
            )
        check_int8_lengths(f"{full!r} at {self._uri}", existing.fields, spec.fields)
        missing = [f"{k} ({v})" for k, v in spec.fields.items() if existing.fields.get(k) != v]
        if missing:
            raise BackendError(
                f"vector collection {full!r} at {self._uri} lacks field(s) {', '.join(missing)}: it was created by "
                f"another version; drop it and re-index"
            )
        return existing

    def _create(self, full: str, spec: CollectionSpec) -> None:
        from pymilvus import DataType, MilvusClient

        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field(ID_FIELD, DataType.VARCHAR, is_primary=True, max_length=ID_MAX_BYTES)
        schema.add_field(VECTOR_FIELD, DataType.FLOAT_VECTOR, dim=spec.dim)
        for name, kind in spec.fields.items():
            if kind == "str":
                schema.add_field(name, DataType.VARCHAR, max_length=STR_MAX_BYTES)
            elif kind == "int":
                schema.add_field(name, DataType.INT64)
            elif kind == "float":
                schema.add_field(name, DataType.DOUBLE)
            elif int8_length(kind):
                schema.add_field(name, DataType.ARRAY, element_type=DataType.INT8, max_capacity=int8_length(kind))
            else:
                schema.add_field(name, DataType.JSON)
        index = MilvusClient.prepare_index_params()
        index.add_index(field_name=VECTOR_FIELD, index_type=spec.index, metric_type=spec.metric, params=dict(_INDEX_BUILD.get(spec.index, {})))
        self._call(
            f"create {full}", "create_collection", full, schema=schema, index_params=index, consistency_level="Strong",
            **({"properties": {OWNER_PROPERTY: spec.owner}} if spec.owner else {}),
        )

    def _as_matrix(self, full: str, vectors: np.ndarray, dim: int) -> np.ndarray:
        arr = np.asarray(vectors, dtype=np.float32)
        if arr.ndim == 1:
            arr = arr.reshape(1, -1)
        if arr.ndim != 2 or arr.shape[1] != dim:
            raise InputError(f"vectors for {full!r} must have shape (n, {dim}), got {np.shape(vectors)}")
        if not np.isfinite(arr).all():
            raise InputError(f"vectors for {full!r} contain NaN or infinity")
        return arr

    def _row_value(self, full: str, name: str, kind: str, value: Any) -> Any:
        if kind == "str":
            if not isinstance(value, str):
                raise InputError(f"{full}: field {name!r} must be a string, got {type(value).__name__}")
            if len(value.encode("utf-8")) > STR_MAX_BYTES:
                raise InputError(f"{full}: field {name!r} is longer than {STR_MAX_BYTES} bytes; store long text elsewhere")
            return value
        if kind == "int":
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise InputError(f"{full}: field {name!r} must be an integer, got {value!r}")
            return int(value)
        if kind == "float":
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not math.isfinite(value):
                raise InputError(f"{full}: field {name!r} must be a finite number, got {value!r}")
            return float(value)
        length = int8_length(kind)
        if length:
            arr = np.asarray(value)
            if arr.shape != (length,) or arr.dtype.kind not in "iu" or arr.min() < -128 or arr.max() > 127:
                raise InputError(f"{full}: field {name!r} must be a list of exactly {length} integers in -128..127")
            return arr.astype(np.int8).tolist()
        if not isinstance(value, (dict, list)):
            raise InputError(f"{full}: field {name!r} must be a JSON object or array, got {type(value).__name__}")
        return value

    def upsert(self, collection: str, ids: Sequence[str], vectors: np.ndarray, fields: Sequence[Mapping[str, Any]] | None = None,
               *, flush: bool = True) -> None:
        self._write("upsert", collection, ids, vectors, fields, flush)

    def insert(self, collection: str, ids: Sequence[str], vectors: np.ndarray, fields: Sequence[Mapping[str, Any]] | None = None,
               *, flush: bool = True) -> None:
        self._write("insert", collection, ids, vectors, fields, flush)

    def _write(self, method: str, collection: str, ids: Sequence[str], vectors: np.ndarray,
               fields: Sequence[Mapping[str, Any]] | None, flush: bool) -> None:
        """`upsert` or `insert` (the client's method of that name), after checking every row."""
        full, schema = self._schema(collection)
        ids = list(ids)
        arr = self._as_matrix(full, vectors, schema.dim)
        if len(ids) != arr.shape[0]:
            raise InputError(f"{full}: {len(ids)} ids but {arr.shape[0]} vectors")
        if fields is not None and len(fields) != len(ids):
            raise InputError(f"{full}: {len(ids)} ids but {len(fields)} field rows")
        if len(set(ids)) != len(ids):
            raise InputError(f"{full}: duplicate ids in one {method}")
        rows: list[dict[str, Any]] = []  # every row is validated before anything is written
        for i, row_id in enumerate(ids):
            if not isinstance(row_id, str) or not row_id or len(row_id.encode("utf-8")) > ID_MAX_BYTES:
                raise InputError(f"{full}: id {row_id!r} must be a non-empty string of at most {ID_MAX_BYTES} bytes")
            given = fields[i] if fields is not None else {}
            unknown = set(given) - set(schema.fields)
            if unknown:
                raise InputError(f"{full}: unknown field(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(schema.fields)) or 'none'}")
            row: dict[str, Any] = {ID_FIELD: row_id, VECTOR_FIELD: arr[i].tolist()}
            for name, kind in schema.fields.items():
                row[name] = self._row_value(full, name, kind, given[name]) if name in given else default_value(kind)
            rows.append(row)
        if not rows:
            return
        for part in _batches(len(rows)):
            self._call(f"{method} into {full}", method, full, rows[part])
        if flush:
            self._call(f"flush {full}", "flush", full)

    def flush(self, collection: str) -> None:
        full, _ = self._schema(collection)
        self._call(f"flush {full}", "flush", full)

    def _where_expr(self, full: str, schema: _Schema, where: Mapping[str, Any]) -> str:
        clauses = []
        for name, value in where.items():
            kind = schema.fields.get(name)
            if not filterable(kind):
                allowed = ", ".join(sorted(k for k, v in schema.fields.items() if filterable(v))) or "none"
                raise InputError(f"{full}: cannot filter on {name!r}; filterable fields: {allowed}")
            if isinstance(value, (list, tuple)):  # any of these values
                if not value:
                    raise InputError(f"{full}: filter values for {name!r} are empty: they would match nothing")
                clauses.append(f"{name} in [{', '.join(self._literal(full, name, kind, v) for v in value)}]")
            else:
                clauses.append(f"{name} == {self._literal(full, name, kind, value)}")
        return " and ".join(clauses)

    @staticmethod
    def _literal(full: str, name: str, kind: str | None, value: Any) -> str:
        if kind == "str":
            if not isinstance(value, str):
                raise InputError(f"{full}: filter value for {name!r} must be a string, got {value!r}")
            return quote_literal(value)
        if kind == "int":
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise InputError(f"{full}: filter value for {name!r} must be an integer, got {value!r}")
            return str(int(value))
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not math.isfinite(value):
            raise InputError(f"{full}: filter value for {name!r} must be a finite number, got {value!r}")
        return repr(float(value))

    @staticmethod
    def _ids_expr(ids: Sequence[str]) -> str:
        # pymilvus's own `ids=` path quotes ids without escaping them, so we build the expression.
        return f"{ID_FIELD} in [{', '.join(quote_literal(i) for i in ids)}]"

    def delete(self, collection: str, ids: Sequence[str] | None = None, where: Mapping[str, Any] | None = None) -> None:
        full, schema = self._schema(collection)
        if ids is None and not where:
            raise InputError(f"{full}: delete needs ids or a where filter (refusing to delete everything)")
        where_expr = self._where_expr(full, schema, where) if where else ""
        if ids is None:
            assert where  # checked above
            # A long list of values goes in parts, as ids do: each part is one filtered scan on Lite.
            long = next((name for name, value in where.items() if isinstance(value, (list, tuple)) and len(value) > BATCH_ROWS), None)
            if long is None:
                self._call(f"delete from {full}", "delete", full, filter=where_expr)
                return
            values = list(where[long])
            for part in _batches(len(values)):
                self._call(f"delete from {full}", "delete", full, filter=self._where_expr(full, schema, {**where, long: values[part]}))
            return
        ids = list(ids)
        for row_id in ids:
            if not isinstance(row_id, str):
                raise InputError(f"{full}: ids must be strings, got {row_id!r}")
        for part in _batches(len(ids)):
            expr = self._ids_expr(ids[part])
            if where_expr:
                expr = f"({expr}) and ({where_expr})"
            self._call(f"delete from {full}", "delete", full, filter=expr)

    def search(self, collection: str, vectors: np.ndarray, limit: int, where: Mapping[str, Any] | None = None, output_fields: Sequence[str] = ()) -> list[list[VectorHit]]:
        full, schema = self._schema(collection)
        arr = self._as_matrix(full, vectors, schema.dim)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise InputError(f"{full}: limit must be an integer in 1..{MAX_LIMIT}, got {limit!r}")
        unknown = [f for f in output_fields if f not in schema.fields]
        if unknown:
            raise InputError(f"{full}: unknown output field(s) {', '.join(unknown)}; known: {', '.join(sorted(schema.fields)) or 'none'}")
        if arr.shape[0] == 0:
            return []
        params: dict[str, Any] = {"metric_type": schema.metric}
        if schema.index == "IVF_FLAT":
            params["params"] = {"nprobe": 16}
        elif schema.index == "HNSW":
            params["params"] = {"ef": max(64, limit)}
        result = self._call(
            f"search {full}",
            "search",
            full,
            data=arr.tolist(),
            limit=limit,
            filter=self._where_expr(full, schema, where) if where else "",
            output_fields=list(output_fields),
            search_params=params,
            consistency_level="Strong",
        )
        return [
            [VectorHit(id=str(hit["id"]), score=float(hit["distance"]), fields={f: hit["entity"].get(f) for f in output_fields}) for hit in hits]
            for hits in result
        ]

    def get(self, collection: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        full, schema = self._schema(collection)
        ids = list(ids)
        for row_id in ids:
            if not isinstance(row_id, str):
                raise InputError(f"{full}: ids must be strings, got {row_id!r}")
        found: dict[str, np.ndarray] = {}
        for part in _batches(len(ids)):
            rows = self._call(
                f"get from {full}",
                "query",
                full,
                filter=self._ids_expr(ids[part]),
                output_fields=[ID_FIELD, VECTOR_FIELD],
                consistency_level="Strong",
            )
            for row in rows:
                found[str(row[ID_FIELD])] = np.asarray(row[VECTOR_FIELD], dtype=np.float32).reshape(schema.dim)
        return found

    def fields(self, collection: str, names: Sequence[str], ids: Sequence[str] | None = None,
               where: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
        full, schema = self._schema(collection)
        unknown = [f for f in names if f not in schema.fields]
        if unknown:
            raise InputError(f"{full}: unknown fields {unknown}; known: {', '.join(sorted(schema.fields)) or 'none'}")
        # Milvus needs a filter or a limit to query: "every row" is the id field being a string at all.
        where_expr = self._where_expr(full, schema, where) if where else f'{ID_FIELD} != ""'
        id_list = None if ids is None else list(ids)
        for row_id in id_list or ():
            if not isinstance(row_id, str):
                raise InputError(f"{full}: ids must be strings, got {row_id!r}")
        found: dict[str, dict[str, Any]] = {}
        for part in [slice(None)] if id_list is None else _batches(len(id_list)):
            expr = where_expr if id_list is None else f"({self._ids_expr(id_list[part])}) and ({where_expr})"
            rows = self._call(f"read fields of {full}", "query", full, filter=expr,
                              output_fields=[ID_FIELD, *names], consistency_level="Strong")
            for row in rows:
                found[str(row[ID_FIELD])] = {f: row.get(f) for f in names}
        return found

    def count(self, collection: str) -> int:
        full, _ = self._schema(collection)
        rows = self._call(f"count {full}", "query", full, filter="", output_fields=["count(*)"], consistency_level="Strong")
        return int(rows[0]["count(*)"])

    def drop(self, collection: str) -> None:
        full = self._full(collection)
        if self._call(f"has_collection {full}", "has_collection", full):
            self._call(f"drop {full}", "drop_collection", full)
        with self._guard:
            self._schemas.pop(full, None)
            self._loaded.discard(full)

    def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        try:
            client.close()
        finally:
            if self._lite_path is not None:
                _lite_release(self._lite_path)
