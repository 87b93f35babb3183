"""Load and fault drill (issue 11): the production gateway under load with a fifth of its sites down,
a tenth hung and a tenth answering garbage or too slowly.

The federation, all on loopback:
- real sites (`--real-sites`, default 6), built and served by federation.local.LocalFederation from
  the MTRAG sample `hansa demo` ships (embedded graph, Milvus Lite, the packaged embedder);
- fault sites, as many as make 20% down, 10% hung and 10% garbage-or-slow of all sites: each has
  its own key, is enrolled and publishes signed summaries (copies of a real site's passages, so
  the router really picks it beside that site); "down" is a port nobody listens on, "hung" accepts
  connections and never answers, "garbage" answers every other request with unsigned non-JSON
  at once and the others with the same after the deadline has passed;
- the gateway: `hansa gateway serve --workers N` (gunicorn, core/wsgi_server.py) over the
  federation's gateway home, its summaries in one `milvus-lite server`, for N in `--workers`.

For each N, after a warm-up, `--questions` POST /v1/query requests run at `--concurrency` (the
sample's questions, one per passage title and, in a full run, MTRAG's questions when the shared
data folder is there (benchlib.MTRAG_DIR), round robin). Checked per run:
- well-formed: every response is JSON matching the gateway's own OpenAPI schema (QueryResponse
  for 200, SitesFailed for 502), and names a status for every site it called;
- p99 of the client-side latency <= the per-site deadline + 100 ms;
- threads and open file descriptors (sockets apart) of the gateway's processes (master and
  workers), read from /proc before the load and after it (once calls still running at their
  deadline have ended): growth within LEAK_BOUND per worker;
- throughput and p50/p99 against N (JSON records + a PNG beside `--out`).

Bounded and self-stopping: each gateway is its own process group, stopped (SIGTERM, then
SIGKILL) when its run ends or fails; every fault server closes with the run; loopback only. The
load generator runs in a process of its own (not behind the sites' interpreter lock), but it, the
sites and the gateway share the machine's cores: the record carries the load average, and
absolute figures only compare within one document.

    python scripts/bench_load.py [--smoke] [--out benchmarks/load.json]
"""
from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402  (scripts/ is not a package)
from bench_serving import demo_sample, stop_server, tree_rss_mib, wait_healthy  # noqa: E402
from benchlib import progress, rate  # noqa: E402

P99_MARGIN_MS = 100.0  # the bound: p99 <= per-site deadline + this
# Growth allowed between the readings before and after the load, per gateway worker: a worker may
# lazily start a helper thread or keep a pooled connection once; a leak grows with every question.
LEAK_BOUND = {"threads": 2, "fds": 4, "sockets": 4}
FAULTS = (("down", 0.2), ("hung", 0.1), ("garbage", 0.1))
GARBAGE = b"<html>not a partial answer \x00\xff"


# -- fault sites --------------------------------------------------------------------------------------
class HungSite:
    """Accepts connections and never answers (holds them open until closed)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=512)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, name="hung-site", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


class GarbageSite:
    """Answers every other request at once with unsigned non-JSON, the others the same way but
    only after `slow_s` (past the gateway's deadline)."""

    def __init__(self, slow_s: float) -> None:
        counter = itertools.count()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if next(counter) % 2:
                    time.sleep(slow_s)
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(GARBAGE)))
                    self.end_headers()
                    self.wfile.write(GARBAGE)
                except OSError:  # the gateway gave up at its deadline and closed the connection
                    self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, name="garbage-site", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def closed_port() -> int:
    """A loopback port nobody listens on (bound once, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fault_counts(real_sites: int) -> dict[str, int]:
    """How many fault sites of each kind make FAULTS' shares of all sites (real ones the rest)."""
    total = round(real_sites / (1 - sum(share for _, share in FAULTS)))
    return {kind: max(1, round(share * total)) for kind, share in FAULTS}


def add_fault_sites(fed: Any, stack: ExitStack, documents: dict[str, list[dict[str, str]]],
                    deadline_s: float) -> dict[str, str]:
    """Start, enroll and publish the fault sites; returns {site_id: kind}. Each mirrors a real
    site's passages as its summaries, so questions that route to that site route to it as well."""
    from hansa.gateway.trust import admin
    from hansa.sync.keys import SiteIdentity
    from hansa.sync.publication import build_publication
    from hansa.sync.vectors import encode_vector
    from hansa.sync.wire import EmbeddingSpace, Richness, SummaryRecord

    gw = fed.gateway_service
    space = EmbeddingSpace.of(gw.embedder)
    real = sorted(documents)
    kinds: dict[str, str] = {}
    mirrors = itertools.cycle(real)
    for kind, count in fault_counts(len(real)).items():
        for i in range(count):
            site_id = f"fault-{kind}-{i}"
            if kind == "down":
                port = closed_port()
            elif kind == "hung":
                port = stack.enter_context(_closing(HungSite())).port
            else:
                port = stack.enter_context(_closing(GarbageSite(deadline_s + 1.0))).port
            identity = SiteIdentity.generate()
            admin.enroll(fed.registry, site_id, f"http://127.0.0.1:{port}", [identity.public_key_b64])
            passages = documents[next(mirrors)][:4]
            vectors = gw.embedder.embed([p["text"] for p in passages])
            records = [SummaryRecord(f"c{j}", 1, encode_vector(v), Richness(5, 3, 1), level=0, text=p["title"])
                       for j, (p, v) in enumerate(zip(passages, vectors))]
            gw.publish(site_id, build_publication(identity, site_id, 1, space, records, timedelta(hours=2)))
            kinds[site_id] = kind
    if not gw.index.flush(60.0):
        raise RuntimeError("the gateway's summary store did not become durable within 60 s")
    return kinds


class _closing:
    def __init__(self, thing: Any) -> None:
        self.thing = thing

    def __enter__(self) -> Any:
        return self.thing

    def __exit__(self, *exc: object) -> None:
        self.thing.close()


# -- well-formedness ------------------------------------------------------------------------------------
def response_validators() -> dict[int, Any]:
    """jsonschema validators for the documented bodies of POST /v1/query: 200 and 502."""
    from jsonschema import Draft202012Validator

    spec = json.loads(resources.files("hansa.gateway.http").joinpath("openapi.json").read_bytes())

    def of(name: str) -> Any:
        return Draft202012Validator({**spec, "$ref": f"#/components/schemas/{name}"})

    return {200: of("QueryResponse"), 502: of("SitesFailed")}


def judge(status: int, raw: bytes, validators: dict[int, Any]) -> tuple[str | None, dict[str, Any]]:
    """(None, body) for a well-formed response, else (why, {})."""
    if status not in validators:
        return f"HTTP {status}", {}
    try:
        body = json.loads(raw)
    except ValueError:
        return "not JSON", {}
    errors = sorted(validators[status].iter_errors(body), key=str)
    if errors:
        return f"schema: {errors[0].message[:200]}", {}
    details = body["sites"]["details"]
    if body["sites"]["total"] != len(details) or not details:
        return "per-site summary does not list every called site", {}
    if status == 200 and set(body["trace"]["sites_called"]) != {d["site_id"] for d in details}:
        return "a called site has no status", {}
    return None, body


# -- the gateway ---------------------------------------------------------------------------------------
def gateway_env(home: Path, milvus_uri: str, deadline_s: float) -> dict[str, str]:
    return {**os.environ, "HANSA_HOME": str(home), "HANSA_MILVUS_URI": milvus_uri, "HF_HUB_OFFLINE": "1",
            "HANSA_GATEWAY_ALLOW_PRIVATE_ADDRESSES": "true", "HANSA_GATEWAY_SITE_TIMEOUT_S": str(deadline_s),
            # the drill measures the gateway under load, not one client's rate limit (still charged)
            "HANSA_GATEWAY_QUERY_BURST": "1000000", "HANSA_GATEWAY_QUERY_REFILL_PER_S": "1000000"}


def start_gateway(workers: int, port: int, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-c", "from hansa.cli import main; main()", "--log-level", "warning",
           "gateway", "serve", "--port", str(port), "--workers", str(workers)]
    with open(log, "wb") as fh:
        return subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)


def process_tree(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children", encoding="ascii") as fh:
                todo.extend(int(c) for c in fh.read().split())
        except OSError:
            continue
    return found


def resources_of(pid: int) -> dict[str, int]:
    """Threads, open file descriptors and sockets among them, summed over the process tree."""
    out = {"processes": 0, "threads": 0, "fds": 0, "sockets": 0}
    for p in process_tree(pid):
        try:
            threads = len(os.listdir(f"/proc/{p}/task"))
            links = [os.readlink(f"/proc/{p}/fd/{fd}") for fd in os.listdir(f"/proc/{p}/fd")]
        except OSError:  # gone between the listing and the read
            continue
        out["processes"] += 1
        out["threads"] += threads
        out["fds"] += len(links)
        out["sockets"] += sum(link.startswith("socket:") for link in links)
    return out


# -- the load --------------------------------------------------------------------------------------------
def run_load_apart(url: str, api_key: str, questions: Sequence[str], count: int, concurrency: int,
                   timeout_s: float, fresh_connections: bool = False) -> dict[str, Any]:
    """run_load in a process of its own (spawned). Why: the real and fault sites serve from this
    process; client threads sharing its interpreter lock would time their own waits behind the
    sites' work (~50 ms at p99 here) as the gateway's latency."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(run_load, url, api_key, list(questions), count, concurrency, timeout_s,
                           fresh_connections).result()


def run_load(url: str, api_key: str, questions: Sequence[str], count: int, concurrency: int,
             timeout_s: float, fresh_connections: bool = False) -> dict[str, Any]:
    """`count` questions over `concurrency` client threads, each judged as it returns.
    `fresh_connections`: one connection per question (the warm-up: so every worker gets some, and
    has loaded its model and opened its stores before resources are read), else keep-alive."""
    import requests

    validators = response_validators()
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    malformed: dict[str, int] = {}
    site_status: dict[str, dict[str, int]] = {}
    stages: dict[str, list[float]] = {}  # the gateway's own trace: where its time went
    lock = threading.Lock()
    numbers = iter(range(count))

    def worker() -> None:
        session = requests.Session()
        headers = {"Authorization": f"Bearer {api_key}", **({"Connection": "close"} if fresh_connections else {})}
        while True:
            with lock:
                i = next(numbers, None)
            if i is None:
                return
            t0 = time.perf_counter()
            why: str | None = None
            try:
                resp = session.post(f"{url}/v1/query", json={"question": questions[i % len(questions)]},
                                    headers=headers, timeout=timeout_s)
                status, raw = resp.status_code, resp.content
            except requests.RequestException as exc:
                status, raw, why = None, b"", type(exc).__name__
            elapsed = time.perf_counter() - t0
            body: dict[str, Any] = {}
            if status is not None:
                why, body = judge(status, raw, validators)
            with lock:
                latencies.append(elapsed)
                for stage, ms in body.get("trace", {}).get("stages_ms", {}).items():
                    stages.setdefault(stage, []).append(ms / 1000)
                if "trace" in body:
                    stages.setdefault("gateway_total", []).append(body["trace"]["total_ms"] / 1000)
                    # what the question's last round kept back of the deadline (gateway/query/call.py)
                    stages.setdefault("finish_reserve", []).append(body["trace"].get("finish_reserve_ms", 0.0) / 1000)
                statuses[str(status)] = statuses.get(str(status), 0) + 1
                if why is not None:
                    malformed[why] = malformed.get(why, 0) + 1
                for d in body.get("sites", {}).get("details", ()):
                    per = site_status.setdefault(d["site_id"], {})
                    per[d["status"]] = per.get(d["status"], 0) + 1

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return {"wall_seconds": round(wall, 3), "statuses": statuses, "malformed": malformed,
            "latency": benchlib.percentiles(latencies), "throughput_qps": rate(len(latencies), wall),
            "site_status": site_status,
            "gateway_stages": {k: benchlib.percentiles(v) for k, v in sorted(stages.items())}}


def by_kind(site_status: dict[str, dict[str, int]], kinds: dict[str, str]) -> dict[str, dict[str, int]]:
    """Per-site statuses summed by what the site is (real, down, hung, garbage)."""
    out: dict[str, dict[str, int]] = {}
    for site_id, counts in site_status.items():
        agg = out.setdefault(kinds.get(site_id, "real"), {})
        for status, n in counts.items():
            agg[status] = agg.get(status, 0) + n
    return out


def drill(workers: int, n: int, env: dict[str, str], workdir: Path, api_key: str, questions: Sequence[str],
          kinds: dict[str, str], args: Any, deadline_s: float) -> dict[str, Any]:
    from hansa.adapters.vector.lite_server import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = workdir / f"gateway-{workers}.log"
    progress(f"gateway x{workers}: starting")
    proc = start_gateway(workers, port, env, log)
    client_timeout = deadline_s * 10 + 60
    try:
        boot = wait_healthy(url, proc, log)
        warm = max(2 * args.concurrency, 8 * workers)
        progress(f"gateway x{workers}: healthy after {boot:.1f} s; warm-up {warm} questions")
        warmup = run_load_apart(url, api_key, questions, warm, args.concurrency, client_timeout,
                                fresh_connections=True)
        time.sleep(deadline_s + 1.0)  # calls cut at the deadline end on their own
        before = resources_of(proc.pid)
        progress(f"gateway x{workers}: {n} questions at concurrency {args.concurrency}")
        load = run_load_apart(url, api_key, questions[warm:] + questions[:warm], n, args.concurrency,
                              client_timeout)
        time.sleep(deadline_s + 1.0)
        after = resources_of(proc.pid)
        rss = tree_rss_mib(proc.pid)
    finally:
        stop_server(proc)
    well_formed = n - sum(load["malformed"].values())
    bound_ms = deadline_s * 1000 + P99_MARGIN_MS
    growth = {k: after[k] - before[k] for k in LEAK_BOUND}
    kinds_seen = by_kind(load["site_status"], kinds)
    record = {
        "drill": "faults", "questions": n, "concurrency": args.concurrency, "workers": workers,
        "site_deadline_ms": round(deadline_s * 1000, 1),
        "well_formed_share": round(well_formed / n, 4), "malformed": load["malformed"], "statuses": load["statuses"],
        "p50_ms": load["latency"]["p50_ms"], "p99_ms": load["latency"]["p99_ms"], "latency": load["latency"],
        # the gateway's wait on sites alone (its trace's call stage): what a hung site could stretch
        "call_p99_ms": load["gateway_stages"].get("call", {}).get("p99_ms"),
        "throughput_qps": load["throughput_qps"], "wall_seconds": load["wall_seconds"],
        "site_calls_by_kind": kinds_seen, "gateway_stages": load["gateway_stages"],
        "resources_before": before, "resources_after": after, "resources_growth": growth,
        "boot_seconds": round(boot, 2), "rss_mib": rss,
        # the first questions each fresh worker answers (its first embedding, its first calls):
        # not part of the drill's percentiles, but what a restarted gateway's first users wait
        "warmup": {"questions": warm, "well_formed": warm - sum(warmup["malformed"].values()),
                   "latency": warmup["latency"],
                   "route_max_ms": warmup["gateway_stages"].get("route", {}).get("max_ms")},
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
    }
    record["pass"] = {
        "well_formed": well_formed == n,
        "p99_within_deadline_plus_100ms": load["latency"]["p99_ms"] <= bound_ms,
        "calls_cut_at_deadline": record["call_p99_ms"] is not None and record["call_p99_ms"] <= bound_ms,
        "no_thread_growth": growth["threads"] <= LEAK_BOUND["threads"] * workers,
        "no_fd_growth": growth["fds"] <= LEAK_BOUND["fds"] * workers,
        "no_socket_growth": growth["sockets"] <= LEAK_BOUND["sockets"] * workers,
        "faults_called": all(k in kinds_seen for k in ("down", "hung", "garbage")),
    }
    progress(f"gateway x{workers}: {record['throughput_qps']} q/s, p50 {record['p50_ms']:.0f} ms, "
             f"p99 {record['p99_ms']:.0f} ms, well-formed {record['well_formed_share']}, pass {record['pass']}")
    return record


def plot(records: list[dict[str, Any]], path: Path) -> None:
    """Throughput and p99 against the number of gateway workers (p99's bound drawn in)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = sorted(records, key=lambda r: r["workers"])
    xs = [r["workers"] for r in records]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    left.plot(xs, [r["throughput_qps"] for r in records], "o-")
    for r in records:
        left.annotate(f"n={r['questions']}", (r["workers"], r["throughput_qps"]), fontsize=7,
                      textcoords="offset points", xytext=(4, 4))
    left.set(xlabel="gateway workers", ylabel="questions / s", title="throughput", xticks=xs)
    right.plot(xs, [r["p99_ms"] for r in records], "o-", label="p99")
    right.plot(xs, [r["p50_ms"] for r in records], "s--", label="p50")
    right.axhline(records[0]["site_deadline_ms"] + P99_MARGIN_MS, color="red", lw=1, label="deadline + 100 ms")
    right.set(xlabel="gateway workers", ylabel="ms", title="latency", xticks=xs)
    right.legend(fontsize=8)
    fig.suptitle(f"fault drill at concurrency {records[0]['concurrency']} (n questions per point), "
                 "20% down, 10% hung, 10% garbage/slow", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def split_sites(passages: list[dict[str, str]], sites: int) -> dict[str, list[dict[str, str]]]:
    return {f"site-{i}": passages[i::sites] for i in range(sites)}


def main(argv: Sequence[str] | None = None) -> int:
    p = benchlib.parser("load", __doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, nargs="+", default=None,
                   help="gateway worker counts, the main drill's first (default 2 1 4; smoke 1)")
    p.add_argument("--questions", type=int, default=None,
                   help="questions for the first worker count (the main drill; default 1000; smoke 40)")
    p.add_argument("--sweep-questions", type=int, default=None,
                   help="questions for every further worker count (default: as many as --questions, so every "
                        "worker count gets the issue's 1,000: a p99 over 150 questions rests on their 3 slowest)")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--real-sites", type=int, default=6)
    p.add_argument("--passages", type=int, default=None, help="sample passages over the real sites (default 60; smoke 24)")
    p.add_argument("--deadline", type=float, default=2.0, help="per-site deadline in seconds (HANSA_GATEWAY_SITE_TIMEOUT_S)")
    args = benchlib.parse(p, list(argv) if argv is not None else None)
    workers = args.workers or ([1] if args.smoke else [2, 1, 4])
    args.questions = args.questions or (40 if args.smoke else 1000)
    args.sweep_questions = args.sweep_questions or args.questions
    if (args.concurrency < 1 or min(workers) < 1 or min(args.questions, args.sweep_questions) < 1
            or args.real_sites < 1 or args.deadline <= 0):
        p.error("--concurrency, --workers, --questions and --real-sites must be >= 1, --deadline > 0")
    passages, questions = demo_sample(args.passages or (24 if args.smoke else 60))
    if not args.smoke and benchlib.MTRAG_DIR.is_dir():  # distinct questions, so caches do not answer them all
        questions = questions + [q for q in benchlib.mtrag_questions() if q not in questions]

    from hansa.adapters.embedder.memo import MemoEmbedder
    from hansa.adapters.vector.lite_server import LiteServer
    from hansa.core.logs import configure
    from hansa.federation.local import LocalFederation

    configure("warning", as_json=True)  # on stderr: a site's or the harness's complaint says why

    report = benchlib.Report("load", args.smoke, libraries=("gunicorn", "flask", "pymilvus", "milvus-lite", "jsonschema"))
    documents = split_sites(passages, args.real_sites)
    report.params = {"workers": workers, "questions": args.questions, "sweep_questions": args.sweep_questions,
                     "concurrency": args.concurrency,
                     "real_sites": args.real_sites, "fault_sites": fault_counts(args.real_sites),
                     "passages": len(passages), "distinct_questions": len(questions), "site_deadline_ms": args.deadline * 1000,
                     "p99_bound_ms": args.deadline * 1000 + P99_MARGIN_MS, "leak_bound_per_worker": LEAK_BOUND}
    records = []
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp, ExitStack() as stack:
        workdir = Path(tmp)
        milvus_uri = stack.enter_context(LiteServer(workdir / "milvus"))
        progress(f"building {args.real_sites} real sites from {len(passages)} sample passages")
        fed = stack.enter_context(LocalFederation(
            workdir, documents, progress=progress, serving_embedder=lambda e: MemoEmbedder(e, maxsize=65536),
            gateway_env={"HANSA_MILVUS_URI": milvus_uri, "HANSA_GATEWAY_SITE_TIMEOUT_S": str(args.deadline)}))
        kinds = add_fault_sites(fed, stack, documents, args.deadline)
        report.results["sites"] = {sid: h.info for sid, h in fed.sites.items()} | {k: {"fault": v} for k, v in kinds.items()}
        env = gateway_env(workdir, milvus_uri, args.deadline)
        for i, n in enumerate(workers):
            count = args.questions if i == 0 else args.sweep_questions
            records.append(drill(n, count, env, workdir, fed.api_key, questions, kinds, args, args.deadline))
    report.results["records"] = records
    for r in records:
        report.target(f"well_formed_w{r['workers']}", "100% well-formed", r["well_formed_share"], r["pass"]["well_formed"])
        report.target(f"p99_w{r['workers']}", f"p99 <= {args.deadline * 1000 + P99_MARGIN_MS:.0f} ms", r["p99_ms"],
                      r["pass"]["p99_within_deadline_plus_100ms"])
    if args.out is not None:
        plot(records, args.out.with_suffix(".png"))
    report.note("The real sites memoize their embeddings (adapters/embedder/memo.py): a site embeds its ~40 "
                "candidate sentences on every call (about 1.3 s of CPU each here), which would time every real "
                "site out under this load; the drill loads the gateway, and sites answer from their real stores.")
    report.note("Sites and fault servers run in this process, the load generator in a spawned one and the "
                "gateway in its own: all share the machine's cores, so figures compare within this document only.")
    report.emit(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
