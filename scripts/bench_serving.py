"""Production WSGI server for the site API, chosen by measurement: gunicorn vs waitress.

One real site (the MTRAG sample `hansa demo` ships, embedded graph, vectors in a `milvus-lite
server` both servers share, the packaged embedder) is served on loopback, in turn, by:

- `gunicorn`: `hansa site serve --workers N`, i.e. hansa.core.wsgi_server (N processes, sync
  workers, replay nonces shared in SQLite),
- `waitress`: the same app (hansa.plugin.serving.open_site_app) in one process with N threads
  (waitress has no worker processes; N threads is its way to take N requests at once),

for N in `--workers` (default 1 2 4). A load of signed POST /v1/retrieve requests (the sample's
questions and its passage titles, each with a fresh RFC 9421 signature, as the gateway sends them) runs at
`--concurrency` (default 8) for `--seconds` after `--warmup` seconds: throughput (answered 200 per
second) and latency percentiles per server and N; then GET /v1/health for half as long (no embedding:
the server's own overhead). The load generator runs on the same cores as the
servers (2 here): absolute figures are low and only comparable within one run.

Bounded and self-stopping: every server is its own process group, stopped (SIGTERM, then SIGKILL)
when its run ends or fails; loopback only.

    python scripts/bench_serving.py [--smoke] [--out benchmarks/serving.json]
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402  (scripts/ is not a package)
from benchlib import progress, rate  # noqa: E402

SERVERS = ("gunicorn", "waitress")
BOOT_TIMEOUT_S = 240.0
STOP_TIMEOUT_S = 30.0


# -- the site ---------------------------------------------------------------------------------------
def site_env(home: Path, milvus_uri: str, gateway_key_b64: str) -> dict[str, str]:
    return {
        **os.environ,
        "HANSA_HOME": str(home), "HANSA_SITE_SITE_ID": "bench-site", "HANSA_MILVUS_URI": milvus_uri,
        "HANSA_SITE_GATEWAY_PUBLIC_KEY": gateway_key_b64, "HF_HUB_OFFLINE": "1",
        "HANSA_GRAPH_BACKEND": "embedded",
    }


def demo_sample(limit: int) -> tuple[list[dict[str, str]], list[str]]:
    """The MTRAG / MTRAG-UN sample shipped in hansa.cli (Apache-2.0): passages, and questions (the
    sample's own, then one per passage title, so the load is not six questions over and over)."""
    from importlib import resources

    data = resources.files("hansa.cli") / "data"
    rows = [json.loads(line) for line in (data / "demo_passages.jsonl").read_text(encoding="utf-8").splitlines()]
    passages = [{"id": r["id"], "title": r["title"], "text": r["text"]} for r in rows[:limit]]
    asked = [json.loads(line)["question"] for line in (data / "demo_questions.jsonl").read_text(encoding="utf-8").splitlines()]
    return passages, asked + [f"What is known about {p['title']}?" for p in passages]


def build_site(env: dict[str, str], workdir: Path, passages: list[dict[str, str]]) -> dict[str, Any]:
    """Install, ingest and build communities, in this process, then close everything."""
    from hansa.core.config import load_config
    from hansa.plugin.communities import build_communities
    from hansa.plugin.ingest import ingest_paths
    from hansa.plugin.install import install_site
    from hansa.plugin.site import SiteContext

    docs = workdir / "docs.jsonl"
    docs.write_text("".join(json.dumps(p) + "\n" for p in passages), encoding="utf-8")
    start = time.perf_counter()
    with SiteContext.open(load_config(env=env)) as ctx:
        install_site(ctx)
        ingest_paths(ctx, [docs], progress=False)
        build_communities(ctx, progress=False)
        stats = ctx.graph.stats()
    return {"documents": stats.documents, "chunks": stats.chunks, "communities": stats.communities,
            "build_seconds": round(time.perf_counter() - start, 2)}


# -- the servers -------------------------------------------------------------------------------------
def waitress_child(threads: int, port: int) -> None:
    """`--waitress-child`: serve the site app with waitress in this process (until SIGTERM)."""
    import waitress

    from hansa.core.config import load_config
    from hansa.plugin.serving import open_site_app

    with open_site_app(load_config()) as app:
        waitress.serve(app, host="127.0.0.1", port=port, threads=threads, ident=None, _quiet=True)


def start_server(server: str, workers: int, port: int, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    if server == "gunicorn":
        cmd = [sys.executable, "-c", "from hansa.cli import main; main()", "--log-level", "warning",
               "site", "serve", "--port", str(port), "--workers", str(workers)]
    else:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--waitress-child", str(workers), "--port", str(port)]
    with open(log, "wb") as fh:
        return subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(STOP_TIMEOUT_S)


def wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path) -> float:
    import requests

    start = time.monotonic()
    while time.monotonic() - start < BOOT_TIMEOUT_S:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {log.read_text(errors='replace')[-3000:]}")
        try:
            if requests.get(f"{url}/v1/health", timeout=5).status_code == 200:
                return time.monotonic() - start
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"server not healthy within {BOOT_TIMEOUT_S:.0f} s: {log.read_text(errors='replace')[-3000:]}")


def tree_rss_mib(pid: int) -> float | None:
    """Resident memory of a process and its children (gunicorn's master + workers)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status", encoding="ascii") as fh:
                total += next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:")) * 1024
            with open(f"/proc/{p}/task/{p}/children", encoding="ascii") as fh:
                todo.extend(int(c) for c in fh.read().split())
        except (OSError, StopIteration):
            continue
    return benchlib.mib(total) if total else None


# -- the load -----------------------------------------------------------------------------------------
Sender = Callable[[Any, int], str]  # (requests session, request number) -> status (or exception name)


def retrieve_sender(url: str, gateway: Any, questions: Sequence[str]) -> Sender:
    """Signed POST /v1/retrieve, signed just before it is sent, as the gateway does."""
    import requests

    from hansa.sync.httpsig import RETRIEVE_COMPONENTS, SITE_HEADER, sign_request

    target = f"{url}/v1/retrieve"

    def send(session: Any, i: int) -> str:
        body = json.dumps({"question": questions[i % len(questions)], "top_k": 5}).encode()
        headers = {"Content-Type": "application/json", SITE_HEADER: "bench-site"}
        headers.update(sign_request(gateway, "POST", target, headers, body, components=RETRIEVE_COMPONENTS))
        try:
            return str(session.post(target, data=body, headers=headers, timeout=60).status_code)
        except requests.RequestException as exc:
            return type(exc).__name__

    return send


def health_sender(url: str) -> Sender:
    """GET /v1/health: no embedding, so what is left is the server's own overhead (and the stores' counts)."""
    import requests

    def send(session: Any, i: int) -> str:
        try:
            return str(session.get(f"{url}/v1/health", timeout=60).status_code)
        except requests.RequestException as exc:
            return type(exc).__name__

    return send


def run_load(send: Sender, concurrency: int, seconds: float) -> dict[str, Any]:
    """`concurrency` threads, each sending requests back to back for `seconds`."""
    import requests

    latencies: list[float] = []
    statuses: dict[str, int] = {}
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def worker(offset: int) -> None:
        session = requests.Session()
        i = offset
        while time.monotonic() < stop_at:
            t0 = time.perf_counter()
            status = send(session, i)
            elapsed = time.perf_counter() - t0
            with lock:
                statuses[status] = statuses.get(status, 0) + 1
                if status == "200":
                    latencies.append(elapsed)
            i += concurrency

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(concurrency)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 120)
    wall = time.perf_counter() - t0
    ok = statuses.get("200", 0)
    return {"requests": sum(statuses.values()), "ok": ok, "statuses": statuses, "wall_seconds": round(wall, 3),
            "throughput_rps": rate(ok, wall), "latency": benchlib.percentiles(latencies) if latencies else None}


def measure(server: str, workers: int, env: dict[str, str], workdir: Path, gateway: Any, questions: Sequence[str],
            concurrency: int, warmup_s: float, seconds: float) -> dict[str, Any]:
    from hansa.adapters.vector.lite_server import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = workdir / f"{server}-{workers}.log"
    progress(f"{server} x{workers}: starting")
    proc = start_server(server, workers, port, env, log)
    try:
        boot = wait_healthy(url, proc, log)
        progress(f"{server} x{workers}: healthy after {boot:.1f} s; warm-up {warmup_s:.0f} s")
        retrieve = retrieve_sender(url, gateway, questions)
        run_load(retrieve, concurrency, warmup_s)  # every worker loads its model, fills caches
        progress(f"{server} x{workers}: retrieve load {seconds:.0f} s at concurrency {concurrency}")
        result = run_load(retrieve, concurrency, seconds)
        progress(f"{server} x{workers}: health load {seconds / 2:.0f} s at concurrency {concurrency}")
        result["health"] = run_load(health_sender(url), concurrency, seconds / 2)
        result.update({"server": server, "workers": workers, "concurrency": concurrency,
                       "workers_mean": "processes" if server == "gunicorn" else "threads in one process",
                       "compute_threads_per_process": compute_threads(server, workers),
                       "boot_seconds": round(boot, 2), "rss_mib": tree_rss_mib(proc.pid)})
        return result
    finally:
        stop_server(proc)


def compute_threads(server: str, workers: int) -> int:
    """Torch/BLAS threads per server process: gunicorn splits the cores between its workers
    (core.wsgi_server), waitress's one process keeps the libraries' default, every core."""
    from hansa.core.wsgi_server import ServerOptions, usable_cpus

    return ServerOptions(workers=workers).compute_threads() if server == "gunicorn" else usable_cpus()


def rate_difference_z(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """How many standard errors apart two throughputs are, counting answers as Poisson events."""
    if not a["wall_seconds"] or not b["wall_seconds"] or a["ok"] + b["ok"] == 0:
        return None
    se = ((a["ok"] / a["wall_seconds"] ** 2) + (b["ok"] / b["wall_seconds"] ** 2)) ** 0.5
    return round((a["throughput_rps"] - b["throughput_rps"]) / se, 2) if se else None


def choose(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The rule, fixed before the run: the server whose best retrieve throughput is higher by more
    than two standard errors wins; a statistical tie goes to the server that can also terminate TLS
    and run worker processes (gunicorn), since waitress would need a proxy and one process for both."""
    best: dict[str, dict[str, Any]] = {}
    for r in runs:
        if r["latency"] and (r["server"] not in best or r["throughput_rps"] > best[r["server"]]["throughput_rps"]):
            best[r["server"]] = r
    if len(best) < 2:
        return {"server": None, "why": "not every server produced answers"}
    g, w = best["gunicorn"], best["waitress"]
    z = rate_difference_z(g, w)
    summary = {name: {"workers": r["workers"], "throughput_rps": r["throughput_rps"], "p99_ms": r["latency"]["p99_ms"],
                      "health_throughput_rps": r["health"]["throughput_rps"]} for name, r in best.items()}
    if z is not None and abs(z) > 2:
        winner = "gunicorn" if z > 0 else "waitress"
        why = f"best retrieve throughput higher by {abs(z)} standard errors"
    else:
        winner = "gunicorn"
        why = (f"retrieve throughput a statistical tie (z = {z}); gunicorn also terminates TLS and runs "
               "worker processes, waitress does neither")
    return {"server": winner, "why": why, "z_gunicorn_minus_waitress": z, "best": summary}


def main(argv: Sequence[str] | None = None) -> int:
    p = benchlib.parser("serving", __doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, nargs="+", default=None, help="worker counts (default 1 2 4; smoke 1)")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--seconds", type=float, default=None, help="measured load per run (default 30; smoke 3)")
    p.add_argument("--warmup", type=float, default=None, help="unmeasured load first (default 10; smoke 2)")
    p.add_argument("--passages", type=int, default=None, help="sample passages in the site (default 60 of 120; smoke 30)")
    p.add_argument("--port", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--waitress-child", type=int, default=None, help=argparse.SUPPRESS)
    args = benchlib.parse(p, list(argv) if argv is not None else None)
    if args.waitress_child is not None:
        waitress_child(args.waitress_child, args.port)
        return 0
    workers = args.workers or ([1] if args.smoke else [1, 2, 4])
    seconds = args.seconds or (3.0 if args.smoke else 30.0)
    warmup = args.warmup if args.warmup is not None else (2.0 if args.smoke else 10.0)
    passages, questions = demo_sample(args.passages or (30 if args.smoke else 60))
    if args.concurrency < 1 or min(workers) < 1:
        p.error("--concurrency and --workers must be >= 1")

    from hansa.adapters.vector.lite_server import LiteServer
    from hansa.sync.keys import SiteIdentity

    report = benchlib.Report("serving", args.smoke, libraries=("gunicorn", "waitress", "flask", "pymilvus", "milvus-lite"))
    report.params = {"servers": list(SERVERS), "workers": workers, "concurrency": args.concurrency,
                     "seconds": seconds, "warmup_seconds": warmup, "passages": len(passages), "questions": len(questions),
                     "request": "signed POST /v1/retrieve, top_k 5, local mode"}
    gateway = SiteIdentity.generate()
    with tempfile.TemporaryDirectory(prefix="bench-serving-") as tmp:
        workdir = Path(tmp)
        with LiteServer(workdir / "milvus") as milvus_uri:
            env = site_env(workdir / "home", milvus_uri, gateway.public_key_b64)
            progress(f"building the site: {len(passages)} sample passages, vectors in {milvus_uri}")
            report.results["site"] = build_site(env, workdir, passages)
            runs = []
            for n in workers:
                for server in SERVERS:
                    runs.append(measure(server, n, env, workdir, gateway, questions, args.concurrency, warmup, seconds))
    report.results["runs"] = runs
    report.results["choice"] = choose(runs)
    by = {(r["server"], r["workers"]): r for r in runs}
    for n in workers:
        g, w = by[("gunicorn", n)], by[("waitress", n)]
        report.ratios[f"gunicorn_over_waitress_throughput_w{n}"] = benchlib.ratio(g["throughput_rps"], w["throughput_rps"])
        report.ratios[f"gunicorn_over_waitress_health_throughput_w{n}"] = benchlib.ratio(
            g["health"]["throughput_rps"], w["health"]["throughput_rps"])
    report.note("waitress cannot run worker processes or terminate TLS; its 'workers' are threads of one process. "
                "The site API serializes store access per process, so threads overlap only I/O.")
    report.note("Load generator, servers and Milvus share the machine's cores: compare runs within this document only.")
    report.emit(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
