"""Serve a WSGI app in production: gunicorn, N worker processes, optional TLS, one app per worker.

Why gunicorn: measured side by side with waitress on the real site API (scripts/bench_serving.py,
benchmarks/serving.json), the two were a statistical tie on retrieve throughput at concurrency 8
(on two busy cores), and gunicorn is the one that can run several processes (a site's retrieve is
CPU-bound Python: threads in one process share one GIL) and terminate TLS itself (waitress serves
plain HTTP from one process only).

Why an app *opener* instead of an app: a site's stores (Milvus, the embedded graph, the embedder)
must be opened in the process that uses them, never inherited across a fork. So the caller passes
`open_app`, a callable returning a context manager that yields the WSGI app; each worker enters it
after the fork (gunicorn's `preload_app` stays off) and leaves it when the worker exits. The
master process opens nothing, which also keeps Milvus Lite's one-process lock free for a single
worker.

    serve(lambda: site_app(cfg), ServerOptions(host, port, workers=4, tls_cert=..., tls_key=...))
"""
from __future__ import annotations

import os
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from hansa.core import metrics
from hansa.core.errors import ConfigError
from hansa.core import logs
from hansa.core.logs import get_logger

log = get_logger(__name__)

WSGIApp = Callable[..., Any]
AppOpener = Callable[[], AbstractContextManager[WSGIApp]]
MAX_WORKERS = 64
MAX_THREADS = 256
# Read by torch (the embedder), numpy's BLAS and FAISS when a worker first imports them.
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class ServerOptions:
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 1
    # Requests one worker serves at once (gunicorn's gthread worker above 1; its sync worker at 1).
    # Why more than one for the gateway: a gateway request mostly *waits* on sites, up to the
    # per-site deadline when one hangs; with one request per worker, every question queued behind
    # it waits too (scripts/bench_load.py measured p50 12 s at a 2 s deadline, 8 clients, 1 worker).
    # A site's retrieve is CPU-bound Python, so the site keeps 1 and scales with processes.
    threads: int = 1
    tls_cert: str = ""  # PEM certificate chain; with tls_key, the server speaks HTTPS only
    tls_key: str = ""
    # A worker silent this long is killed and replaced. Generous: a worker's first request waits
    # for its embedder to load, and two cores shared by several workers load slowly.
    timeout_s: int = 120
    name: str = "hansa"
    # Compute threads per worker (torch, BLAS, OpenMP); None: the usable cores / workers, at least 1.
    # Why: each library defaults to every core in every worker, and N workers x all cores threads
    # thrash. Measured on a busy 2-core machine: one retrieve took 5.3 s with 2 torch threads and
    # 1.7 s with 1. An operator's own OMP_NUM_THREADS wins.
    threads_per_worker: int | None = None

    @classmethod
    def of(cls, section: Any, name: str, host: str | None = None, port: int | None = None,
           workers: int | None = None) -> "ServerOptions":
        """A service's serving settings (its [site] or [gateway] section: host, port, workers,
        tls_cert, tls_key) with command-line overrides."""
        return cls(host=host or section.host, port=port if port is not None else section.port,
                   workers=workers if workers is not None else section.workers,
                   threads=getattr(section, "threads", 1),
                   tls_cert=section.tls_cert, tls_key=section.tls_key, name=name)

    def validate(self) -> None:
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or not 1 <= self.workers <= MAX_WORKERS:
            raise ConfigError(f"--workers must be an integer in 1..{MAX_WORKERS}, not {self.workers!r}")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or not 1 <= self.threads <= MAX_THREADS:
            raise ConfigError(f"threads (requests per worker) must be an integer in 1..{MAX_THREADS}, not {self.threads!r}")
        if not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise ConfigError(f"port must be 0..65535, not {self.port!r}")
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ConfigError("TLS needs both tls_cert and tls_key (PEM files), or neither")
        for what, path in (("tls_cert", self.tls_cert), ("tls_key", self.tls_key)):
            if path and not Path(path).is_file():
                raise ConfigError(f"{what}: {path} is not a readable file")

    def compute_threads(self) -> int:
        return self.threads_per_worker or max(1, usable_cpus() // self.workers)

    @property
    def scheme(self) -> str:
        return "https" if self.tls_cert else "http"

    @property
    def bind(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def behind_proxies(wsgi_app: WSGIApp, hops: int, setting: str) -> WSGIApp:
    """`wsgi_app` trusting `hops` reverse proxies' X-Forwarded-Proto/-Host/-Port/-For (0: none).

    Why: behind a TLS-terminating proxy the app sees http://127.0.0.1:port, but RFC 9421
    signatures cover the https:// URL the client used; only a proxy the operator declared may say
    what that URL was (anyone else could forge the headers)."""
    from werkzeug.middleware.proxy_fix import ProxyFix

    if isinstance(hops, bool) or not isinstance(hops, int) or hops < 0:
        raise ConfigError(f"{setting} must be a whole number of trusted proxies (0: none), not {hops!r}")
    if hops == 0:
        return wsgi_app
    return ProxyFix(wsgi_app, x_for=hops, x_proto=hops, x_host=hops, x_port=hops)


def gunicorn_logger() -> type:
    """gunicorn's logger, writing its own lines (a worker booting, exiting, timing out) in the
    process's hansa format. Why: with `hansa --log-json` every other line on stderr is JSON; a log
    shipper that meets gunicorn's bracketed text between them drops or mangles exactly the lines
    that say a worker died."""
    from gunicorn.glogging import Logger

    class HansaFormat(Logger):  # type: ignore[misc]
        def setup(self, cfg: Any) -> None:
            super().setup(cfg)
            for handler in self.error_log.handlers:
                handler.setFormatter(logs.formatter())

    return HansaFormat


def gunicorn_settings(options: ServerOptions) -> dict[str, Any]:
    """The gunicorn settings hansa runs with (one place, so tests and docs can read them)."""
    settings: dict[str, Any] = {
        "bind": [options.bind],
        "workers": options.workers,
        # sync: one request per process at a time (the site: CPU-bound, its store access serialized);
        # gthread: `threads` requests at once per process (the gateway: mostly waiting on sites)
        "worker_class": "gthread" if options.threads > 1 else "sync",
        "threads": options.threads,
        "preload_app": False,  # each worker opens its own stores (see the module docstring)
        "timeout": options.timeout_s,
        "graceful_timeout": 30,
        "accesslog": None,  # the apps log one structured event per request
        "errorlog": "-",
        "loglevel": "info",
        "proc_name": options.name,
        "control_socket_disable": True,  # a shared default socket path would collide between services
        "logger_class": gunicorn_logger(),
    }
    if options.tls_cert:
        settings.update({"certfile": options.tls_cert, "keyfile": options.tls_key})
    return settings


def serve(open_app: AppOpener, options: ServerOptions, *, on_ready: Callable[[], None] | None = None) -> None:
    """Serve until SIGINT/SIGTERM. With several workers, Prometheus metrics run in multiprocess mode.

    `on_ready` runs in the master once the socket is bound (the CLI prints the URL there)."""
    from gunicorn.app.base import BaseApplication

    options.validate()
    metrics_dir = metrics.multiprocess_dir(options.name) if options.workers > 1 else None
    for var in THREAD_VARS:  # inherited by the workers, which import the compute libraries after the fork
        os.environ.setdefault(var, str(options.compute_threads()))

    class _Application(BaseApplication):  # type: ignore[misc]
        def __init__(self) -> None:
            self._opened: AbstractContextManager[WSGIApp] | None = None
            super().__init__()

        def load_config(self) -> None:
            for key, value in gunicorn_settings(options).items():
                self.cfg.set(key, value)
            self.cfg.set("worker_exit", self._worker_exit)
            self.cfg.set("child_exit", lambda server, worker: metrics.mark_worker_dead(worker.pid))
            if on_ready is not None:
                self.cfg.set("when_ready", lambda server: on_ready())

        def load(self) -> WSGIApp:  # in the worker, after the fork
            self._opened = open_app()
            return self._opened.__enter__()

        def _worker_exit(self, server: Any, worker: Any) -> None:
            if self._opened is not None:
                opened, self._opened = self._opened, None
                opened.__exit__(None, None, None)

    try:
        _Application().run()
    finally:
        if metrics_dir is not None:
            metrics.remove_multiprocess_dir(metrics_dir)
