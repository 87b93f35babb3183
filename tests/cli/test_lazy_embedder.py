"""Commands that never embed must not pay for the model: no torch, no ONNX Runtime, no weights.

Each `hansa` command is a fresh process, so importing torch (seconds, ~1 GB) in `install`,
`status` or `gateway sites` was the whole cost of those commands. Checked in a child process,
as a person runs them, on both local backends.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import json, sys
from hansa.cli import main
commands = json.loads(sys.argv[1])
for args in commands:
    main(args, standalone_mode=False)
heavy = ("torch", "transformers", "sentence_transformers", "onnxruntime", "tokenizers")
print("HEAVY=" + json.dumps([m for m in heavy if m in sys.modules]))
"""

COMMANDS = [
    ["site", "install"],
    ["site", "status"],
    ["gateway", "federation", "init", "--threshold", "1", "--keys", "1", "--gateway", "http://127.0.0.1:8700"],
    ["gateway", "sites"],
    ["gateway", "identity"],
]


@pytest.mark.parametrize("backend", ["sentence-transformers", "onnx"])
def test_commands_that_do_not_embed_load_no_model(backend: str, tmp_path: Path) -> None:
    env = {"HANSA_HOME": str(tmp_path), "HANSA_SITE_SITE_ID": "lazy-site", "HANSA_EMBEDDER_BACKEND": backend,
           "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(COMMANDS)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "collections: chunks, summaries" in proc.stdout  # install really created the vector store
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("HEAVY=")][-1]
    assert json.loads(line[len("HEAVY="):]) == []
