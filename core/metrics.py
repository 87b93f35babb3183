"""Prometheus plumbing shared by the site and the gateway: the `/metrics` body, one process or many.

Why prometheus_client's multiprocess mode: with N gunicorn workers each process counts its own
requests, and a scrape lands on one of them at random. In multiprocess mode every worker writes its
samples to files in one directory and any worker's `/metrics` sums them all. The mode is chosen by
`PROMETHEUS_MULTIPROC_DIR` when prometheus_client is first imported, so the server sets it up
(`multiprocess_dir`) before forking workers and before anything imports the client; the metric
definitions (plugin/metrics.py, gateway metrics later) are imported in the workers.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from hansa.core.errors import ConfigError

ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def multiprocess_dir(name: str) -> Path:
    """A fresh, empty directory for this server's worker samples, set in the environment.

    Fresh per start: the client's documentation requires that the directory be wiped between runs
    (old files would be summed into new counts)."""
    if "prometheus_client" in sys.modules and not os.environ.get(ENV):
        raise ConfigError("prometheus_client was imported before multiprocess metrics were set up; "
                          "start the server before importing the app's metrics")
    path = Path(tempfile.mkdtemp(prefix=f"{name}-metrics-"))
    os.environ[ENV] = str(path)
    return path


def remove_multiprocess_dir(path: Path) -> None:
    if os.environ.get(ENV) == str(path):
        del os.environ[ENV]
    shutil.rmtree(path, ignore_errors=True)


def mark_worker_dead(pid: int) -> None:
    """Called by the server's master when a worker exits: its live-gauge samples stop counting."""
    if os.environ.get(ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)


def render() -> bytes:
    """The text exposition of every metric of this service: all workers' in multiprocess mode."""
    from prometheus_client import REGISTRY, CollectorRegistry, generate_latest

    if os.environ.get(ENV):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry)
    return generate_latest(REGISTRY)
