"""A `hansa ... serve` process as the serving tests run it: started in its own process group with
its output in a file, waited for until /v1/health answers, stopped with its workers."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

BOOT_TIMEOUT_S = 300.0  # gunicorn workers each load the embedder


def hansa(*args: str) -> list[str]:
    return [sys.executable, "-c", "from hansa.cli import main; main()", "--log-json", *args]


def start(args: list[str], home: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "HANSA_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    with open(log, "wb") as fh:
        return subprocess.Popen(hansa(*args), env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)


def wait_healthy(proc: subprocess.Popen[bytes], url: str, log: Path, verify: str | bool = True,
                 timeout_s: float = BOOT_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        assert proc.poll() is None, f"serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"not healthy in {timeout_s} s:\n{log.read_text()[-3000:]}"
        try:
            if requests.get(f"{url}/v1/health", verify=verify, timeout=5).status_code == 200:
                return
        except (requests.ConnectionError, requests.Timeout):  # listening, but no worker has booted yet
            pass
        time.sleep(0.5)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the whole group (gunicorn and its workers), SIGKILL after a minute."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
