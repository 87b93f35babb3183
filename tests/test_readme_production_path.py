"""docs/production.md's production path on one host (it was the README's), run as written: the block
between `<!-- production-path:begin -->` and `<!-- production-path:end -->` goes to `bash -euo pipefail`
in a fresh folder holding `./docs`, with free ports in MILVUS_PORT, GATEWAY_PORT and SITE_PORT (the
block's own defaults are the documented ports, which another process may hold on a test machine).

Everything in it is real: `milvus-lite server`, `hansa gateway serve --workers 2` and `hansa site
serve --workers 2` (gunicorn), enrollment, publication, a question through `hansa query`, both
`/metrics` endpoints and the admin view. A renamed option, a changed default, a missing step or a
server that does not come up fails here, not at an operator's desk. The block stops its servers
on exit (its `trap`); the test checks that they are gone and kills the process group if not."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from hansa.adapters.vector.lite_server import free_port

from tests.test_readme_admin_path import DOCS, PRODUCTION_DOC, doc_block

RUN_TIMEOUT_S = 600


def production_path() -> str:
    return doc_block("production-path", PRODUCTION_DOC)


def test_the_block_serves_both_sides_with_workers_over_one_milvus_server() -> None:
    block = production_path()
    for needed in ("milvus-lite server", "gateway serve", "site serve", "--workers 2", "gateway enroll",
                   "site publish", "hansa query", "/metrics", "/admin/api/state", "trap "):
        assert needed in block, f"the production block lost {needed!r}"


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_the_readme_production_path_runs_as_written(tmp_path: Path) -> None:
    assert shutil.which("curl"), "the production block needs curl (scripts/test installs it)"
    (tmp_path / "docs").mkdir()
    for name, text in DOCS.items():
        (tmp_path / "docs" / name).write_text(text, encoding="utf-8")
    (tmp_path / "block.sh").write_text(production_path(), encoding="utf-8")
    ports = {name: free_port() for name in ("MILVUS_PORT", "GATEWAY_PORT", "SITE_PORT")}
    env = {k: v for k, v in os.environ.items() if not k.startswith("HANSA_")}  # only what the block sets
    env.update({name: str(port) for name, port in ports.items()})
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # hansa, milvus-lite, python
    proc = subprocess.Popen(["bash", "-euo", "pipefail", "block.sh"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"the production block ran past {RUN_TIMEOUT_S} s\n{out[-3000:]}\n{err[-3000:]}")
    logs = {name: (tmp_path / name).read_text(errors="replace")[-2000:] if (tmp_path / name).exists() else ""
            for name in ("milvus.log", "gateway.log", "site.log")}
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}\n{logs}"

    # the client's answer, cited from the site, and the per-site line
    assert "Engineer Margaret Ellison designed the Brightwater Lighthouse" in out, out
    assert "(site acme)" in out and "acme: ok" in out, out
    # both services counted the question
    assert 'hansa_gateway_queries_total{outcome="answered"} 1.0' in out, out
    assert re.search(r'^hansa_site_retrieve_requests_total\{status="200"\} [1-9]', out, re.M), out
    # the admin view (JSON, cut at 600 bytes by the block) shows the enrolled site
    admin = out[out.index('{"generated_at"'):]
    assert '"site_id":"acme"' in admin.replace(" ", ""), admin
    # two workers on each side: gunicorn logged each one booting, in the JSON the block asked for
    for name in ("gateway.log", "site.log"):
        boots = [line for line in (tmp_path / name).read_text(errors="replace").splitlines() if "Booting worker" in line]
        booted = {json.loads(line)["event"] for line in boots}  # not JSON: fails here
        assert len(booted) == 2, logs[name]

    # the block's trap stopped every server it started
    deadline = time.monotonic() + 60
    while any(listening(p) for p in ports.values()) and time.monotonic() < deadline:
        time.sleep(0.5)
    still = [name for name, port in ports.items() if listening(port)]
    if still:
        os.killpg(proc.pid, signal.SIGKILL)
    assert not still, f"left running after the block ended: {still}"
