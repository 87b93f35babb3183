"""Build a site once, reuse it: sites cached by a digest of their content, configuration and code.

Why: a SQuAD federation takes tens of minutes to build on two cores (embedding every chunk, NLP
extraction, Leiden, summaries), while a strategy, a sweep or a rerun only needs to *ask* it. A
site's home (its embedded graph, Milvus Lite data, keys, ingested documents) lives in
`<cache>/sites/<site_id>-<digest>/`, where the digest covers

- the site id and every document (id, title, text, in order),
- the site's effective configuration (core.config.as_dict without `home`, the gateway's public
  key, which is given to the site afresh each run and is not part of what the site built, and the
  QUERY_TIME_SETTINGS, which change how a site answers, not what it built),
- the source of the code that builds a site (hansa.plugin, adapters, sync, cypher, core), so a
  changed chunker or extractor never reuses a stale site,
- `FORMAT`, bumped when the cache layout changes.

A slot is reused only when its marker file (`COMPLETE`, written atomically and last) is present;
a slot without it (a crash, Ctrl-C mid-build) is deleted and built again. What a gateway accepted
is not part of a site's build: publication state is cleared on reuse, as each run starts a new
gateway. One process at a time per cache (Milvus Lite locks each data directory to one process
and says so).

Chunk and summary embeddings also go through a content-addressed embedding cache
(`<cache>/embeddings.sqlite`, adapters.embedder.cached), so the 64-site federation and the
centralized site reuse the 16-site federation's vectors.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

from hansa.adapters.embedder import Embedder
from hansa.core.config import Config, as_dict
from hansa.core.files import write_json_atomic

FORMAT = 1
MARKER = "COMPLETE"
CACHE_ENV = "HANSA_EVAL_CACHE"
# What a site is built by; a change to any of these files changes every digest.
_BUILDING_PACKAGES = ("hansa.plugin", "hansa.adapters", "hansa.sync", "hansa.cypher", "hansa.core")
# [site] settings read only when answering a request: a site built without them is the same site.
QUERY_TIME_SETTINGS = ("reader",)
# Per-run state that must not survive into the next run's fresh gateway.
_PUBLICATION_STATE = ("publish_state.json", "outbox")


def default_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """$HANSA_EVAL_CACHE, else $XDG_CACHE_HOME/hansa/eval, else ~/.cache/hansa/eval."""
    env = os.environ if env is None else env
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV]).expanduser()
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "hansa" / "eval"


def _code_digest() -> str:
    import importlib

    h = hashlib.sha256()
    for name in _BUILDING_PACKAGES:
        root = Path(importlib.import_module(name).__file__).parent
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".cypher") and "__pycache__" not in path.parts:
                h.update(f"{name}/{path.relative_to(root).as_posix()}\0".encode())
                h.update(path.read_bytes())
    return h.hexdigest()


class SiteCache:
    def __init__(self, root: Path) -> None:
        self.root = Path(root).expanduser()
        self.sites_dir = self.root / "sites"
        self.sites_dir.mkdir(parents=True, exist_ok=True)
        self._code = _code_digest()
        self._embedder: Embedder | None = None
        self.reused: list[str] = []
        self.built: list[str] = []

    def digest(self, site_id: str, documents: Sequence[Mapping[str, str]], cfg: Config) -> str:
        settings = as_dict(cfg)
        settings.pop("home", None)
        settings.get("site", {}).pop("gateway_public_key", None)
        for key in QUERY_TIME_SETTINGS:  # how a built site answers, not what it built
            settings.get("site", {}).pop(key, None)
        h = hashlib.sha256()
        h.update(json.dumps({"format": FORMAT, "site_id": site_id, "code": self._code, "config": settings},
                            sort_keys=True, default=str).encode())
        for d in documents:
            h.update(json.dumps([d["id"], d["title"], d["text"]], ensure_ascii=False).encode())
            h.update(b"\n")
        return h.hexdigest()

    def slot(self, site_id: str, digest: str) -> Path:
        return self.sites_dir / f"{site_id}-{digest[:24]}"

    @staticmethod
    def complete(slot: Path) -> dict[str, Any] | None:
        """The build record of a finished slot, or None when it is absent or unfinished."""
        try:
            return json.loads((slot / MARKER).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def prepare(self, slot: Path) -> None:
        """An empty slot to build into (whatever an unfinished build left there is removed)."""
        if slot.exists():
            shutil.rmtree(slot)
        slot.mkdir(parents=True)

    def mark_complete(self, slot: Path, info: Mapping[str, Any]) -> None:
        write_json_atomic(slot / MARKER, dict(info))
        self.built.append(slot.name)

    def reuse(self, slot: Path) -> None:
        """Forget what an earlier run's gateway accepted: this run's gateway starts empty."""
        for name in _PUBLICATION_STATE:
            path = slot / name
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
        self.reused.append(slot.name)

    def embedder(self, inner: Embedder) -> Embedder:
        """The shared embedding cache in front of `inner` (one SQLite file per cache)."""
        from hansa.adapters.embedder.cached import CachedEmbedder

        if self._embedder is None:
            self._embedder = CachedEmbedder(inner, self.root / "embeddings.sqlite")
        return self._embedder

    def close(self) -> None:
        if self._embedder is not None:
            self._embedder.close()  # type: ignore[attr-defined]
            self._embedder = None
