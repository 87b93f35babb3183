"""Durable small files: every piece of state hansa keeps on disk goes through here.

Why one place: keys, registries, publication floors, outboxes and install records must survive a
crash as either the old file or the new one, never half of each — temp file in the same
directory, fsync, rename, then fsync the directory so the rename itself is durable. A
read-modify-write of such a file runs under `locked`, so that neither another thread nor another
process (a CLI beside a running gateway) loses an update. And a model file checked against its
pinned sha256 is hashed here once per version of it (`file_sha256`).
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ContextManager, Iterator


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def file_signature(path: Path) -> tuple[int, int, int] | None:
    """(mtime, size, inode): changes whenever write_bytes_atomic replaces the file, so a reader can
    keep its parsed copy until another process writes a new one. None when the file is absent."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


@functools.lru_cache(maxsize=64)
def _sha256(path: str, size: int, mtime_ns: int, ctime_ns: int) -> str:  # noqa: ARG001  (the stat: the memo key)
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """A file's sha256, memoised per path, size, mtime and ctime. Why: a model's graph (tens of MB)
    is checked each time a reader or embedder is built on it; a write to the file changes its
    mtime and ctime, and so does setting its mtime back (ctime cannot be set), so a file changed
    since it was hashed is hashed again."""
    st = os.stat(path)
    return _sha256(str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_json_atomic(path: Path, data: Any) -> None:
    """Readable JSON (sorted, indented) for state an operator may want to inspect."""
    write_bytes_atomic(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"))


@contextmanager
def locked(lock_path: Path, thread_lock: ContextManager[Any]) -> Iterator[None]:
    """Hold `thread_lock`, then an exclusive advisory `flock` on `lock_path` (created if missing).

    The thread lock comes first because `flock` is per open file: threads of one process would not
    exclude each other through it."""
    with thread_lock:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with open(lock_path, "a+b") as lock_file:
            fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock_file.fileno(), fcntl.LOCK_UN)
