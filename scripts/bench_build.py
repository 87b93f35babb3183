"""A site's whole build, install -> publish, per graph backend, as an admin runs it (issue 10: a
10,000-passage site's full build time per backend).

Data: the first `--passages` SQuAD paragraphs in file order (CC BY-SA 4.0; `../shared/datasets/squad`,
the evaluation's SQuAD corpus; file order keeps an article's paragraphs together, as one
organization's documents would be), one JSONL file {id, title, text}. Each backend gets a fresh
home and a fresh Milvus Lite file; `neo4j` a fresh Neo4j + GDS from scripts/neo4j_dev.py (started
before the clock runs).

The stages are a site admin's commands (docs/site-admin.md), run as the `hansa` CLI in a subprocess
each: `site install`, `site ingest FILE --json`, `site communities --json`, `site publish --out FILE
--json`. A stage's wall time therefore includes its own start-up (imports, loading the embedder), as
an admin waits for it.
No LLM (extractive summaries); every embedding is computed (no embedding cache): chunks, their
answer sentences and the community summaries. The ingest and communities reports are kept.

    python scripts/bench_build.py [--smoke] [--passages 10000] [--out benchmarks/build.json]
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402  (scripts/ is not a package)
from benchlib import progress  # noqa: E402

STAGE_TIMEOUT_S = 4 * 3600


def write_corpus(path: Path, n: int) -> int:
    documents = benchlib.squad_documents(n)
    with path.open("w", encoding="utf-8") as fh:
        for d in documents:
            fh.write(json.dumps(d, ensure_ascii=False) + "\n")
    return len(documents)


def hansa_command() -> list[str]:
    """This interpreter's `hansa` script (beside python in a virtualenv), else the one on PATH."""
    script = Path(sys.executable).parent / "hansa"
    return [str(script)] if script.exists() else ["hansa"]


def run_stage(name: str, args: Sequence[str], env: dict[str, str], cwd: Path) -> tuple[float, Any]:
    """One CLI stage: (wall seconds, its --json output or None)."""
    t0 = time.perf_counter()
    done = subprocess.run([*hansa_command(), *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=STAGE_TIMEOUT_S)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"`hansa {' '.join(args)}` failed ({done.returncode}):\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout) if "--json" in args else None
    progress(f"  {name}: {seconds:.1f} s")
    return seconds, out


def build(backend: str, corpus: Path, workdir: Path, neo4j_uri: str | None) -> dict[str, Any]:
    home = workdir / f"{backend}-home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HANSA_")}
    env.update({"HANSA_HOME": str(home), "HANSA_SITE_SITE_ID": f"build-{backend}", "HANSA_GRAPH_BACKEND": backend,
                "HANSA_MILVUS_URI": str(home / "milvus.db")})
    if neo4j_uri:
        env["HANSA_NEO4J_URI"] = neo4j_uri
    stages: dict[str, float] = {}
    reports: dict[str, Any] = {}
    publication = workdir / f"{backend}-publication.json"
    try:
        for name, args in (("install", ["site", "install"]),
                           ("ingest", ["site", "ingest", str(corpus), "--json"]),
                           ("communities", ["site", "communities", "--json"]),
                           ("publish", ["site", "publish", "--out", str(publication), "--json"])):
            stages[name], reports[name] = run_stage(name, args, env, workdir)
    finally:
        if neo4j_uri:  # a given Neo4j is left as found (untimed); a started one goes away with its folder
            subprocess.run([*hansa_command(), "site", "uninstall", "--yes"], env=env, cwd=workdir,
                           capture_output=True, timeout=STAGE_TIMEOUT_S)
    total = sum(stages.values())
    ingest = reports["ingest"] or {}
    chunks = ingest.get("chunks")
    return {"stages_seconds": {k: round(v, 2) for k, v in stages.items()}, "total_seconds": round(total, 2),
            "total_minutes": round(total / 60, 2), "chunks": chunks,
            "chunks_per_s_whole_build": benchlib.rate(chunks, total) if chunks else None,
            "ingest_report": ingest, "communities_report": reports["communities"],
            "publication_bytes": publication.stat().st_size}


def main(argv: Sequence[str] | None = None) -> int:
    p = benchlib.parser("build", __doc__.split("\n\n")[0])
    p.add_argument("--passages", type=int, default=None, help="SQuAD paragraphs (default 10000; smoke 30)")
    p.add_argument("--backends", default="embedded,neo4j", help="comma-separated: embedded, neo4j")
    p.add_argument("--neo4j-uri", default=None, help="use this running Neo4j + GDS instead of starting one")
    args = benchlib.parse(p, list(argv) if argv is not None else None)
    backends = [b for b in args.backends.split(",") if b]
    if not backends or any(b not in ("embedded", "neo4j") for b in backends):
        p.error("--backends takes embedded and/or neo4j")
    n = args.passages or (30 if args.smoke else 10_000)
    if n < 1:
        p.error("--passages must be >= 1")
    report = benchlib.Report("build", args.smoke, libraries=("onnxruntime", "pymilvus", "milvus-lite", "neo4j",
                                                             "graphdatascience", "igraph", "leidenalg"))
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-build-") as tmp:
        workdir = Path(tmp)
        corpus = workdir / "corpus.jsonl"
        report.params = {"passages": write_corpus(corpus, n), "corpus_bytes": corpus.stat().st_size,
                         "backends": backends, "llm": None, "data": "SQuAD paragraphs, file order (CC BY-SA 4.0)"}
        for backend in backends:
            progress(f"{backend}: install -> ingest -> communities -> publish, {report.params['passages']} passages")
            if backend == "neo4j":
                server: dict[str, Any] = {}
                with benchlib.neo4j(args.neo4j_uri, server) as uri:
                    server.pop("pid", None)
                    results[backend] = build(backend, corpus, workdir, uri)
                results[backend]["server"] = server
            else:
                results[backend] = build(backend, corpus, workdir, None)
    report.results["builds"] = results
    if "embedded" in results and "neo4j" in results:
        report.ratios["neo4j_vs_embedded:total_seconds"] = benchlib.ratio(
            results["neo4j"]["total_seconds"], results["embedded"]["total_seconds"])
    if args.neo4j_uri:
        report.note("Neo4j was given (--neo4j-uri): its store may have held other data while measuring")
    report.note("Each stage is a fresh `hansa` process: its time includes start-up (imports, model load).")
    report.emit(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
