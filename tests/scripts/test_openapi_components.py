"""The OpenAPI components of the wire types are generated from the models: CI fails, with a diff,
when a committed document differs from what scripts/openapi_components.py writes."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "openapi_components.py"
DOCUMENTS = ("plugin/openapi.json", "gateway/http/openapi.json")


def check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), "--check", "--root", str(root)],
                          capture_output=True, text=True, timeout=120)


def test_the_committed_documents_are_what_the_models_say() -> None:
    proc = check(REPO)
    assert proc.returncode == 0, f"stale OpenAPI components; run python scripts/openapi_components.py\n{proc.stdout}"


def test_a_hand_edited_component_fails_the_check_with_a_diff(tmp_path: Path) -> None:
    for relative in DOCUMENTS:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / relative, tmp_path / relative)
    site = tmp_path / "plugin/openapi.json"
    text = site.read_text(encoding="utf-8")
    spoiled = text.replace('"confidence": {"maximum": 1.0, "minimum": 0.0, "type": "number"}',
                           '"confidence": {"maximum": 2.0, "minimum": 0.0, "type": "number"}')
    assert spoiled != text, "the test's anchor must be in the document"
    site.write_text(spoiled, encoding="utf-8")
    proc = check(tmp_path)
    assert proc.returncode == 1
    assert '-          "confidence": {"maximum": 2.0' in proc.stdout and "plugin/openapi.json (from the models)" in proc.stdout
    assert subprocess.run([sys.executable, str(SCRIPT), "--root", str(tmp_path)], timeout=120).returncode == 0
    assert site.read_text(encoding="utf-8") == text and check(tmp_path).returncode == 0
