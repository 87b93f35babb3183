"""The walls between hansa's rooms, read from the source (no import is executed).

gateway and plugin (the site adapter) stand side by side over sync, adapters and core: neither
imports the other, so a change on one side never reaches into the other. core imports no other
room; sync (the wire and trust formats) no adapter. federation (a whole federation in one process)
is the one room that wires plugin and gateway together: none of them imports it, and it imports
neither evaluation nor the command line. Nothing below the command line imports it: every click
command lives under cli/.

Inside the gateway, the one module that holds federation private keys (gateway.admin) is imported
by nothing that serves requests: only the command line and the in-process federation sign.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOMS = ("core", "adapters", "cypher", "sync", "plugin", "gateway", "federation", "evaluation", "cli")
FORBIDDEN = {
    "core": {"adapters", "sync", "plugin", "gateway", "federation", "evaluation", "cli"},
    "adapters": {"sync", "plugin", "gateway", "federation", "evaluation", "cli"},
    "sync": {"adapters", "plugin", "gateway", "federation", "evaluation", "cli"},
    "plugin": {"gateway", "federation", "evaluation", "cli"},
    "gateway": {"plugin", "federation", "evaluation", "cli"},
    "federation": {"evaluation", "cli"},
    "evaluation": {"cli"},
}


def imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hansa."):
            out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names if a.name.startswith("hansa."))
    return out


@pytest.mark.parametrize("room", sorted(FORBIDDEN))
def test_no_room_reaches_through_its_walls(room: str) -> None:
    crossings = []
    for path in sorted((REPO / room).rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        for line, module in imports(path):
            target = module.split(".")[1]
            if target in FORBIDDEN[room]:
                crossings.append(f"{rel}:{line} imports {module}")
    assert not crossings, "\n".join(crossings)


def test_the_scan_sees_imports() -> None:
    """The scan itself works: it finds the gateway's import of the wire formats."""
    found = {m for _, m in imports(REPO / "gateway" / "service.py")}
    assert "hansa.sync.wire" in found


KEY_HOLDER = "hansa.gateway.admin"


def test_nothing_that_serves_requests_imports_the_key_holding_admin_module() -> None:
    crossings = []
    for path in sorted((REPO / "gateway").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        for line, module in imports(path):
            if module == KEY_HOLDER and rel != "gateway/admin.py":
                crossings.append(f"{rel}:{line} imports {module}")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):  # `from hansa.gateway import admin`
            if isinstance(node, ast.ImportFrom) and node.module == "hansa.gateway" and any(
                a.name == "admin" for a in node.names
            ):
                crossings.append(f"{rel}:{node.lineno} imports {KEY_HOLDER}")
    assert not crossings, "\n".join(crossings)
