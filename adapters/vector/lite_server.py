"""A Milvus Lite *server* on loopback, started and stopped from Python.

Why: Milvus Lite embedded allows one process per data directory, so anything with several
processes over one site's vectors (site workers, two gateways, the serving benchmark) needs a
server. `milvus-lite server` (shipped with pymilvus[milvus-lite], nothing else to install) is one;
this starts it as a child process, waits until it answers, and stops it, for tests, benchmarks
and trials. Production runs Milvus standalone or a cluster instead and only sets the URI.
"""
from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hansa.core.errors import BackendError

START_TIMEOUT_S = 60.0


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS says is free now (a race with other processes is possible, and rare)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class LiteServer:
    """`with LiteServer(data_dir) as uri:` a running `milvus-lite server` on 127.0.0.1."""

    def __init__(self, data_dir: Path | str, port: int | None = None, host: str = "127.0.0.1") -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port or free_port(host)
        self.uri = f"http://{host}:{self.port}"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = self.data_dir.parent / f"{self.data_dir.name}.server.log"

    def start(self, timeout_s: float = START_TIMEOUT_S) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self._log, "wb") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(self.data_dir),
                 "--host", self.host, "--port", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BackendError(f"milvus-lite server exited with {self._proc.returncode}: {self._tail()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=1.0):
                    return self.uri
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise BackendError(f"milvus-lite server did not listen on {self.uri} within {timeout_s:.0f} s: {self._tail()}")

    def _tail(self) -> str:
        try:
            return self._log.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def stop(self, timeout_s: float = 20.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout_s)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
