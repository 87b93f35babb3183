"""Issue 34: a site ingest's vector write (Milvus Lite in the ingest's process), before and after a
change, side by side in one run.

Each run is a fresh process of `scripts/profile_ingest_memory.py ingest --model-free` (this
checkout's script: the whole ingest of the first `--passages` SQuAD paragraphs, CC BY-SA 4.0, on a
fresh embedded site, random unit vectors in the model's 384 dimensions instead of the model) with
`hansa` imported from another tree: `before` from `--base` (a git revision, exported with `git
archive`), `after` from this checkout as it is. Runs alternate (before, after, before, ...) for
`--rounds`, so the load of a shared machine drifts over both alike; the load average is recorded
around every run. With `--edit-share`, each run then edits that share of the documents (one
sentence more at the end) and ingests again: the replace path (upserts, old rows deleted).

Reported per run: the ingest report (stage seconds: vector_write is Milvus; stage_cpu_seconds: the
process's CPU seconds, every thread, during each stage), the seconds closing
the site took (Lite's last flush and its background merges and index builds, which a run that
flushes less may only defer), the process's CPU seconds (user + system, all threads: less
sensitive to the machine's load than wall seconds), its peak resident memory (getrusage) at the
report and after closing.

    python scripts/bench_vector_write.py --passages 8000 --edit-share 0.05 --base 8a3fea8 \\
        --out benchmarks/ingest_vector_write_v2.json
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402  (scripts/ is not a package)

ROOT = Path(__file__).resolve().parent.parent  # the checkout: the `hansa` package itself
PROFILE = Path(__file__).resolve().parent / "profile_ingest_memory.py"


def shim(tree: Path, where: Path) -> Path:
    """A directory whose `hansa` is `tree`: the PYTHONPATH that imports that tree as hansa."""
    where.mkdir(parents=True)
    (where / "hansa").symlink_to(tree, target_is_directory=True)
    return where


def export(revision: str, where: Path) -> Path:
    """The checkout's files at `revision` (git archive: tracked files only)."""
    where.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return where


def run(pythonpath: Path, passages: int, edit_share: float) -> dict[str, Any]:
    load_before = [round(x, 2) for x in os.getloadavg()]
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, str(PROFILE), "ingest", "--passages", str(passages), "--model-free", "--edit-share", str(edit_share)],
        env={**os.environ, "PYTHONPATH": str(pythonpath)}, capture_output=True, text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"the run with PYTHONPATH={pythonpath} failed:\n{done.stderr[-3000:]}")
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return {"load_average_before": load_before, "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "process_cpu_seconds": round(cpu.ru_utime + cpu.ru_stime - cpu_before.ru_utime - cpu_before.ru_stime, 2), **report}


def summary(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Medians over a variant's runs, of what the README quotes."""
    def med(values: Sequence[float]) -> float:
        return round(statistics.median(values), 3)

    first = {
        "chunks": runs[0]["chunks"],
        "vector_write_seconds": med([r["stage_seconds"]["vector_write"] for r in runs]),
        "vector_write_chunks_per_s": med([r["chunks"] / r["stage_seconds"]["vector_write"] for r in runs]),
        "vector_write_cpu_seconds": med([r["stage_cpu_seconds"]["vector_write"] for r in runs]),
        "vector_write_chunks_per_cpu_s": med([r["chunks"] / r["stage_cpu_seconds"]["vector_write"] for r in runs]),
        "ingest_seconds": med([r["seconds"] for r in runs]),
        "ingest_chunks_per_s": med([r["chunks_per_s"] for r in runs]),
        "close_seconds": med([r["close_seconds"] for r in runs]),
        "vector_write_plus_close_chunks_per_s": med([r["chunks"] / (r["stage_seconds"]["vector_write"] + r["close_seconds"]) for r in runs]),
        "process_cpu_seconds": med([r["process_cpu_seconds"] for r in runs]),
        "peak_rss_mib": med([r["peak_rss_mib"] for r in runs]),
        "peak_rss_mib_after_close": med([r["peak_rss_mib_after_close"] for r in runs]),
    }
    if all("reingest" in r for r in runs):
        first["reingest_chunks"] = runs[0]["reingest"]["chunks"]
        first["reingest_vector_write_seconds"] = med([r["reingest"]["stage_seconds"]["vector_write"] for r in runs])
        first["reingest_vector_write_cpu_seconds"] = med([r["reingest"]["stage_cpu_seconds"]["vector_write"] for r in runs])
        first["reingest_seconds"] = med([r["reingest"]["seconds"] for r in runs])
    return first


def main(argv: Sequence[str] | None = None) -> int:
    p = benchlib.parser("vector_write", __doc__.split("\n\n")[0])
    p.add_argument("--passages", type=int, default=8000)
    p.add_argument("--edit-share", type=float, default=0.05)
    p.add_argument("--rounds", type=int, default=1, help="before/after pairs, alternating")
    p.add_argument("--base", default="HEAD", help="the git revision measured as `before`")
    args = benchlib.parse(p, argv)
    passages, rounds = (200, 1) if args.smoke else (args.passages, args.rounds)
    result = benchlib.Report("vector_write", args.smoke, libraries=("milvus-lite", "pymilvus", "pyarrow", "faiss-cpu"))
    base = subprocess.run(["git", "-C", str(ROOT), "rev-parse", args.base], check=True, capture_output=True, text=True).stdout.strip()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain"], check=True, capture_output=True, text=True).stdout.strip())
    result.params.update(passages=passages, edit_share=args.edit_share, rounds=rounds, before=base, after=head, after_dirty=dirty)
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="bench-vector-write-") as tmp:
        paths = {"before": shim(export(base, Path(tmp) / "before"), Path(tmp) / "shim-before"),
                 "after": shim(ROOT, Path(tmp) / "shim-after")}
        for n in range(rounds):
            for variant in ("before", "after"):
                benchlib.progress(f"round {n + 1}/{rounds}: {variant} ({passages} passages)")
                runs[variant].append(run(paths[variant], passages, args.edit_share))
                r = runs[variant][-1]
                benchlib.progress(f"  vector_write {r['stage_seconds']['vector_write']:.1f} s for {r['chunks']} chunks, "
                                  f"close {r['close_seconds']:.1f} s, peak {r['peak_rss_mib_after_close']:.0f} MiB")
    result.results = {"runs": runs, "before": summary(runs["before"]), "after": summary(runs["after"])}
    before, after = result.results["before"], result.results["after"]
    result.ratios["vector_write_speedup"] = benchlib.ratio(before["vector_write_seconds"], after["vector_write_seconds"])
    result.ratios["ingest_speedup"] = benchlib.ratio(before["ingest_seconds"], after["ingest_seconds"])
    result.ratios["vector_write_cpu_ratio"] = benchlib.ratio(before["vector_write_cpu_seconds"], after["vector_write_cpu_seconds"])
    result.ratios["process_cpu_ratio"] = benchlib.ratio(before["process_cpu_seconds"], after["process_cpu_seconds"])
    result.target("vector_write_chunks_per_s", ">= 1,000 chunks/s", after["vector_write_chunks_per_s"],
                  after["vector_write_chunks_per_s"] >= 1000)
    result.note("Model-free: random unit vectors, no model; Milvus Lite and the SQLite graph store in the ingest's process.")
    result.emit(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
