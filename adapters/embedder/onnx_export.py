"""Export a local sentence-transformers model's transformer to ONNX, once, into a digest-keyed cache.

For a model an admin brings as a sentence-transformers directory; the catalog's models
(catalog.py) come as ONNX graphs already and never pass through here. Needs the `export` extra.

Why a cache keyed by the model's digest: the export needs torch (seconds to import, ~1 GB
resident), the run-time ONNX path must not. So the export runs once per model version, in a
child process (`python -m hansa.adapters.embedder.onnx_export`), and every later process only
opens the file. The key is the sha256 of the model's files plus the export recipe, so new weights,
a new tokenizer or a new recipe can never reuse a stale graph; the write is atomic (a temporary
directory renamed into place), so a crash or two concurrent exports never leave a half-written
model behind.

Only the transformer is exported (input_ids, attention_mask, token_type_ids -> last_hidden_state);
mean pooling and normalization run in numpy (onnx.py), exactly as sentence-transformers' Pooling
and Normalize modules compute them.

Variants: "fp32" is the exported graph, the one a local model is served with. "int8" (ONNX
Runtime's dynamic quantization of its MatMul weights) is made only on the command line
(`python -m hansa.adapters.embedder.onnx_export DIR CACHE int8`): its vectors fall to cosine ~0.96
mean of the fp32 ones (benchmarks/embed.json), another space, so no configuration selects it for a
local model; the catalog's int8 models carry their own file hash instead.
"""
from __future__ import annotations

import fcntl
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from hansa.adapters.embedder.local_model import model_digest
from hansa.core.errors import BackendError, ConfigError

VARIANTS = ("fp32", "int8")
OPSET = 17
RECIPE = 1  # bump when the export below changes what it writes: old cache entries are then ignored
GRAPH = "model.onnx"
META = "export.json"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def default_cache_dir() -> Path:
    """~/.cache/hansa/onnx (XDG): one export per user and model version, whatever HANSA_HOME a process
    uses. The digest key makes sharing safe; HANSA_EMBEDDER_CACHE_DIR moves it (under HANSA_HOME for a
    site that must keep all its state there)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "hansa" / "onnx"


def _digest(model_dir: str) -> str:
    """Hashing ~90 MB costs ~0.15 s: done again only when a file's size or mtime changed."""
    stats = tuple(sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in Path(model_dir).rglob("*") if p.is_file()))
    return _hashed(model_dir, stats)


@functools.lru_cache(maxsize=16)
def _hashed(model_dir: str, stats: tuple) -> str:  # noqa: ARG001  (stats: the cache key)
    return model_digest(Path(model_dir))


def cache_key(model_dir: Path, variant: str) -> str:
    return f"{_digest(str(model_dir))[:32]}-r{RECIPE}-{variant}"


def cached_graph(model_dir: Path, cache_dir: Path, variant: str) -> Path | None:
    """The exported graph for this model and variant, if a complete export is already cached."""
    entry = cache_dir / cache_key(model_dir, variant)
    return entry / GRAPH if (entry / META).is_file() and (entry / GRAPH).is_file() else None


def ensure_exported(model_dir: Path, cache_dir: Path, variant: str = "fp32", *, timeout_s: float = 900) -> Path:
    """The cached graph, exported first (in a child process, so this one never imports torch) if absent."""
    if variant not in VARIANTS:
        raise ConfigError(f"ONNX variant {variant!r} is not one of {', '.join(VARIANTS)}: set HANSA_EMBEDDER_PRECISION")
    found = cached_graph(model_dir, cache_dir, variant)
    if found is not None:
        return found
    cmd = [sys.executable, "-m", "hansa.adapters.embedder.onnx_export", str(model_dir), str(cache_dir), variant]
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        # One exporter at a time per cache: sites starting together wait for the first one's graph.
        with open(cache_dir / ".export.lock", "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if cached_graph(model_dir, cache_dir, variant) is None:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
            else:
                proc = subprocess.CompletedProcess(cmd, 0, "", "")
    except subprocess.TimeoutExpired as exc:
        raise BackendError(f"exporting {model_dir} to ONNX took over {timeout_s:.0f} s") from exc
    except OSError as exc:
        raise BackendError(f"cannot use the ONNX cache {cache_dir}: {exc}; set HANSA_EMBEDDER_CACHE_DIR") from exc
    found = cached_graph(model_dir, cache_dir, variant)
    if proc.returncode != 0 or found is None:
        raise BackendError(f"exporting {model_dir} to ONNX failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return found


def export(model_dir: Path, cache_dir: Path, variant: str = "fp32") -> Path:
    """Export in this process (imports torch): the child process's job, also usable directly."""
    entry = cache_dir / cache_key(model_dir, variant)
    if (entry / META).is_file():
        return entry / GRAPH
    cache_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=cache_dir))
    work.chmod(0o755)  # mkdtemp's 0700 would hide the cache from the other accounts that run hansa
    try:
        if variant == "fp32":
            _export_fp32(model_dir, work / GRAPH)
        else:
            base = export(model_dir, cache_dir, "fp32")
            _quantize_int8(base, work / GRAPH)
        meta = {"model_dir": str(model_dir), "model_sha256": _digest(str(model_dir)), "variant": variant,
                "recipe": RECIPE, "opset": OPSET, "inputs": list(INPUTS), "output": "last_hidden_state"}
        (work / META).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        try:
            os.rename(work, entry)  # atomic; fails if another process already put a complete entry there
        except OSError:
            if not (entry / META).is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return entry / GRAPH


def _export_fp32(model_dir: Path, out: Path) -> None:
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(model_dir), local_files_only=True).eval()

    class LastHiddenState(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):  # noqa: ANN001
            return self.inner(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)[0]

    # A padded dummy batch: traced with an all-ones mask, transformers may skip building the
    # attention mask altogether and the graph would then ignore padding for ever.
    ids = torch.tensor([[101, 2023, 2003, 1037, 3231, 102], [101, 7592, 102, 0, 0, 0]], dtype=torch.long)
    dummy = (ids, (ids != 0).long(), torch.zeros_like(ids))
    axes = {name: {0: "batch", 1: "sequence"} for name in INPUTS}
    axes["last_hidden_state"] = {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(
            LastHiddenState(model), dummy, str(out), input_names=list(INPUTS), output_names=["last_hidden_state"],
            dynamic_axes=axes, opset_version=OPSET, dynamo=False,
        )


def _quantize_int8(base: Path, out: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(base), str(out), weight_type=QuantType.QInt8)


if __name__ == "__main__":  # python -m hansa.adapters.embedder.onnx_export MODEL_DIR CACHE_DIR [VARIANT]
    args = sys.argv[1:]
    if len(args) not in (2, 3):
        sys.exit("usage: python -m hansa.adapters.embedder.onnx_export MODEL_DIR CACHE_DIR [fp32|int8]")
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    print(export(Path(args[0]), Path(args[1]), args[2] if len(args) == 3 else "fp32"))
