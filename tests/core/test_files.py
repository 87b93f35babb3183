"""core.files.file_sha256: a model file is hashed once per version of it, and a changed file is
hashed again even when its size and mtime were put back (its ctime moved)."""
from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from hansa.core.files import _sha256, file_sha256


def test_a_file_is_hashed_once_per_version(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(b"graph" * 1000)
    misses = _sha256.cache_info().misses
    assert file_sha256(path) == file_sha256(path) == hashlib.sha256(b"graph" * 1000).hexdigest()
    assert _sha256.cache_info().misses == misses + 1  # read once
    stamp = path.stat().st_mtime_ns
    time.sleep(0.05)  # past the clock tick a file's times are taken at
    path.write_bytes(b"GRAPH" * 1000)  # tampered: the same size ...
    os.utime(path, ns=(stamp, stamp))  # ... and the old mtime
    assert file_sha256(path) == hashlib.sha256(b"GRAPH" * 1000).hexdigest()
