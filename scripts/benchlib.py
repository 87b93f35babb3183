"""Shared plumbing of the hansa benchmarks (scripts/bench_*.py): one place for arguments, timing,
percentiles, memory readings, machine facts and the JSON document every benchmark prints.

Why one module: the benchmarks are compared with each other and across machines, so they must
measure and report the same way. Absolute times only mean something next to the machine they were
taken on (cpu model and count, load while running), so every document carries those facts, and the
headline numbers are ratios between variants measured side by side in the same run.

Standard library + numpy only: importing this must not pull in the code being measured.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

SCRIPTS_DIR = Path(__file__).resolve().parent
REPO_DIR = SCRIPTS_DIR.parent
# ../shared beside the repository; HANSA_SHARED_DIR names it where the checkout sits elsewhere (a git worktree).
SHARED_DIR = Path(os.environ.get("HANSA_SHARED_DIR") or REPO_DIR.parent / "shared").resolve()
MTRAG_DIR = SHARED_DIR / "datasets" / "mtrag"
SCHEMA_VERSION = 1

# Distributions whose versions go into every document (absent ones are reported as None).
COMMON_LIBRARIES = ("numpy", "hansa")


# -- command line ---------------------------------------------------------------------------------

def parser(name: str, description: str) -> argparse.ArgumentParser:
    """The arguments every benchmark takes; a script adds its own before parsing."""
    p = argparse.ArgumentParser(prog=f"bench_{name}.py", description=description)
    p.add_argument("--smoke", action="store_true",
                   help="a seconds-long version with tiny sizes (CI runs it so the script cannot rot)")
    p.add_argument("--out", type=Path, default=None,
                   help=f"also write the JSON document here (e.g. benchmarks/{name}.json)")
    p.add_argument("--threads", type=int, default=None,
                   help="threads for numpy/BLAS/OpenMP (FAISS) (default: the libraries' own, every core)")
    return p


THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def parse(p: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse; with --threads, re-run this script with the thread variables set.

    BLAS and OpenMP read them once, when numpy/FAISS load, which already happened (benchlib
    imports numpy), so the only reliable way is a fresh process. The values are in machine facts."""
    args = p.parse_args(argv)
    if args.threads is not None:
        if args.threads < 1:
            p.error("--threads must be >= 1")
        want = str(args.threads)
        if any(os.environ.get(v) != want for v in THREAD_VARS):
            env = dict(os.environ, **{v: want for v in THREAD_VARS})
            sys.stdout.flush()
            sys.stderr.flush()
            os.execve(sys.executable, [sys.executable, sys.argv[0], *(sys.argv[1:] if argv is None else argv)], env)
    return args


# -- time -----------------------------------------------------------------------------------------

class Stopwatch:
    """Elapsed wall seconds of a `with` block (perf_counter: monotonic, highest resolution)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        # CPU seconds of this process (all its threads) in the block: steadier than wall seconds on
        # shared cores, blind to other processes' work (a Neo4j server's).
        self.cpu_seconds = 0.0
        self._start = 0.0
        self._cpu = 0.0

    def __enter__(self) -> "Stopwatch":
        self._start, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._start
        self.cpu_seconds = time.process_time() - self._cpu

    @property
    def elapsed(self) -> float:
        """Seconds since the block started (readable inside it: build-time projections)."""
        return time.perf_counter() - self._start


def time_each(call: Callable[[Any], Any], items: Sequence[Any], *, warmup: int = 3,
              budget_s: float | None = None, min_calls: int = 10) -> list[float]:
    """Seconds of `call(item)` for each item, one at a time (latency, not throughput).

    The first `warmup` items are called untimed (caches, lazy loads). With `budget_s`, stops after
    that many seconds of timed calls once `min_calls` were made: slow backends still get a fair
    sample without holding the run for minutes; the count is reported with the percentiles."""
    for item in items[:warmup]:
        call(item)
    samples: list[float] = []
    spent = 0.0
    for item in items:
        start = time.perf_counter()
        call(item)
        elapsed = time.perf_counter() - start
        samples.append(elapsed)
        spent += elapsed
        if budget_s is not None and spent >= budget_s and len(samples) >= min_calls:
            break
    return samples


def percentiles(samples_s: Sequence[float]) -> dict[str, float | int]:
    """Latency summary in milliseconds (p50/p90/p99 by linear interpolation, as numpy defines it)."""
    if not samples_s:
        raise ValueError("no samples to summarize")
    ms = np.asarray(samples_s, dtype=np.float64) * 1000.0
    p50, p90, p99 = np.percentile(ms, [50, 90, 99])
    return {
        "n": int(ms.size),
        "p50_ms": round(float(p50), 4),
        "p90_ms": round(float(p90), 4),
        "p99_ms": round(float(p99), 4),
        "mean_ms": round(float(ms.mean()), 4),
        "min_ms": round(float(ms.min()), 4),
        "max_ms": round(float(ms.max()), 4),
    }


def rate(count: int | float, seconds: float) -> float:
    """Items per second (0 items in 0 s is reported as 0, never a division error)."""
    return round(float(count) / seconds, 3) if seconds > 0 else 0.0


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator, or None when either side was not measured (or is zero)."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return round(float(numerator) / float(denominator), 4)


# -- memory ---------------------------------------------------------------------------------------

def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds a process has used so far (Linux /proc), None where unreadable.

    Why: on a machine shared with other jobs, wall time mostly measures the neighbours; the CPU a
    server spent on a stage is what the stage costs."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _status_kib(field: str) -> int:
    """A `kB` field of /proc/self/status (psutil is not a dependency of hansa)."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field} line: memory readings need Linux")


def rss_bytes() -> int:
    """Resident set size of this process now."""
    return _status_kib("VmRSS") * 1024


def peak_rss_bytes() -> int:
    """Highest resident set size this process has had (VmHWM)."""
    return _status_kib("VmHWM") * 1024


class MemoryDelta:
    """RSS growth across a `with` block, after a garbage collection on both sides.

    Only growth the block keeps alive is meaningful: hold the built object past the block's end
    (memory a block frees is often not returned to the OS, which reads as a positive delta too)."""

    def __init__(self) -> None:
        self.before = 0
        self.after = 0

    def __enter__(self) -> "MemoryDelta":
        gc.collect()
        self.before = rss_bytes()
        return self

    def __exit__(self, *exc: object) -> None:
        gc.collect()
        self.after = rss_bytes()

    @property
    def mib(self) -> float:
        return round((self.after - self.before) / 2**20, 2)


def mib(n_bytes: int | float) -> float:
    return round(float(n_bytes) / 2**20, 2)


# -- machine facts --------------------------------------------------------------------------------

def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def _mem_total_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def library_versions(names: Sequence[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in sorted(set(COMMON_LIBRARIES) | set(names)):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def machine_facts(libraries: Sequence[str] = ()) -> dict[str, Any]:
    """What an absolute time must be read against: cpu, memory, load, versions, thread settings."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        usable = os.cpu_count()
    total = _mem_total_bytes()
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "cpu_model": _cpu_model(),
        "mem_total_mib": mib(total) if total else None,
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "thread_env": {k: os.environ[k] for k in THREAD_VARS if k in os.environ},
        "libraries": library_versions(libraries),
    }


# -- the document ---------------------------------------------------------------------------------

class Report:
    """The one JSON document a benchmark prints: params, results, ratios, targets, notes.

    `targets` entries say what the project guide asks for and what this run observed, so a reader
    sees at once whether a number is near its goal; `notes` say what was skipped and why (a
    benchmark never silently leaves a variant out)."""

    def __init__(self, name: str, smoke: bool, libraries: Sequence[str] = ()) -> None:
        self.name = name
        self.smoke = smoke
        self._libraries = libraries
        self._started = time.perf_counter()
        self._started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._load_start = [round(x, 2) for x in os.getloadavg()]
        self.params: dict[str, Any] = {}
        self.results: dict[str, Any] = {}
        self.ratios: dict[str, float | None] = {}
        self.targets: dict[str, dict[str, Any]] = {}
        self.notes: list[str] = []

    def target(self, key: str, goal: str, observed: float | None, met: bool | None) -> None:
        self.targets[key] = {"goal": goal, "observed": observed, "met": met}

    def note(self, text: str) -> None:
        self.notes.append(text)

    def document(self) -> dict[str, Any]:
        machine = machine_facts(self._libraries)
        machine["load_average_at_start"] = self._load_start
        return {
            "benchmark": self.name,
            "schema_version": SCHEMA_VERSION,
            "smoke": self.smoke,
            "started_at": self._started_at,
            "wall_seconds": round(time.perf_counter() - self._started, 3),
            "machine": machine,
            "params": self.params,
            "results": self.results,
            "ratios": self.ratios,
            "targets": self.targets,
            "notes": self.notes,
        }

    def emit(self, out: Path | None) -> dict[str, Any]:
        """Print the document on stdout (the only thing a benchmark prints there) and write `out`."""
        doc = self.document()
        text = json.dumps(_plain(doc), indent=2, sort_keys=False, allow_nan=False)
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_name(out.name + ".tmp")
            tmp.write_text(text + "\n", encoding="utf-8")
            tmp.replace(out)
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return doc


def _plain(obj: Any) -> Any:
    """numpy scalars/arrays and Paths -> JSON types; NaN/inf -> None (JSON has no such numbers)."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_plain(v) for v in obj.tolist()]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def progress(message: str) -> None:
    """Progress goes to stderr: stdout carries only the JSON document."""
    sys.stderr.write(f"[bench {time.strftime('%H:%M:%S')}] {message}\n")
    sys.stderr.flush()


# -- servers ---------------------------------------------------------------------------------------

@contextmanager
def neo4j(uri: str | None, facts: dict[str, Any]) -> Iterator[str]:
    """A Bolt URI: `uri` when given (a running scripts/neo4j-dev, or the test suite's), otherwise a
    fresh Neo4j + GDS from scripts/neo4j_dev.py in a temporary directory, stopped on exit.

    Fills `facts` with where it came from and how long it took to start (not part of any timing),
    and `facts["pid"]` with the server's process id when this function started it (for
    `process_cpu_seconds`; callers drop it from their report)."""
    if uri:
        facts.update({"neo4j": "given", "uri": uri})
        yield uri
        return
    import neo4j_dev  # scripts/ is on sys.path (this module's own directory)

    with tempfile.TemporaryDirectory(prefix="bench-neo4j-") as workdir:
        progress("starting Neo4j + GDS (scripts/neo4j_dev.py)")
        dev = neo4j_dev.Neo4jDev.start(Path(workdir))
        facts.update({"neo4j": "started", "ready_line": dev.ready_line,
                      "startup_seconds": round(dev.startup_seconds, 2), "pid": dev.process.pid})
        try:
            yield dev.uri
        finally:
            dev.stop()


# -- shared data ----------------------------------------------------------------------------------

def dataset_dir(name: str) -> Path:
    """A dataset folder of the shared data (`mtrag`, `squad`), or a clear error where it is missing."""
    path = SHARED_DIR / "datasets" / name
    if not path.is_dir():
        raise RuntimeError(f"{path} is missing: the shared data folder must sit beside the repository")
    return path


def mtrag_dir() -> Path:
    return dataset_dir("mtrag")


def mtrag_passages(limit: int | None = None) -> list[Any]:
    """MTRAG passages interleaved across the four domains (so any prefix mixes topics), stable order."""
    from hansa.evaluation.mtrag import load_passages

    per_domain = load_passages(mtrag_dir())
    queues = [list(per_domain[d]) for d in sorted(per_domain)]
    out: list[Any] = []
    while any(queues) and (limit is None or len(out) < limit):
        for q in queues:
            if q and (limit is None or len(out) < limit):
                out.append(q.pop(0))
    return out


def squad_documents(limit: int | None = None) -> list[dict[str, Any]]:
    """SQuAD paragraphs in file order as ingest's JSONL records {id, title, text} (CC BY-SA 4.0).
    File order keeps an article's paragraphs together, as one organization's documents would be."""
    from hansa.evaluation.squad import load_passages

    return [p.as_document() for p in load_passages(dataset_dir("squad"))[:limit]]


def mtrag_questions(limit: int | None = None) -> list[str]:
    """Texts of real MTRAG questions (last user turn), stable order."""
    from hansa.evaluation.mtrag import load_questions

    texts = [q.text for q in load_questions(mtrag_dir())]
    return texts if limit is None else texts[:limit]


def embedder() -> Any:
    """The real sentence-transformers embedder hansa ships; its module forces offline loading."""
    from hansa.adapters.embedder.sentence_transformers import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()


def recall_at_k(found: Sequence[Sequence[int]], truth: np.ndarray, k: int) -> float:
    """Mean |found_i[:k] ∩ truth_i[:k]| / k over queries (truth from the exact search)."""
    if len(found) != len(truth):
        raise ValueError(f"{len(found)} results for {len(truth)} queries")
    hits = sum(len(set(map(int, f[:k])) & set(map(int, t[:k]))) for f, t in zip(found, truth))
    return round(hits / (k * len(truth)), 5)
