"""The walls between hansa's rooms, read from the source (no import is executed).

gateway and plugin (the site adapter) stand side by side over sync, adapters and core: neither
imports the other, so a change on one side never reaches into the other. core imports no other
room; sync (the wire and trust formats) no adapter. federation (a whole federation in one process)
is the one room that wires plugin and gateway together: none of them imports it, and it imports
neither evaluation nor the command line. Nothing below the command line imports it: every click
command lives under cli/.

Inside the gateway, the one module that holds federation private keys (gateway.trust.admin) is imported
by nothing that serves requests: only the command line and the in-process federation sign.

The gateway's own rooms are layered, each importing only those below it (GATEWAY_ALLOWED): the
routing index (gateway/index) at the bottom; trust (gateway/trust) over it; the query pipeline
(gateway/query) over both, reaching trust only through the registry and sites only through the
transport port (gateway/client.py, transport.py, which import no room); the composition
root (gateway/service.py) over all of those; the HTTP surface (gateway/http) on top. So no cycle runs
between rooms, and the test that says so reads the same imports.
"""
from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
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


KEY_HOLDER = "trust.admin"
GATEWAY = REPO / "gateway"
# A gateway room is a sub-package of gateway/ or a module at its top level; what each may import of
# the others (its own modules always). Rooms not named here (service, metrics, recent_queries:
# the composition root and what it records) may import any room but the HTTP surface.
PORT = {"client", "transport"}
GATEWAY_ALLOWED: dict[str, set[str]] = {
    "index": set(),
    "trust": {"index"},
    "query": {"index", "trust.registry"} | PORT,
    **{port: PORT for port in PORT},
}
ABOVE_ALL = "http"


def gateway_modules() -> dict[str, Path]:
    """Every gateway module by its dotted name under hansa.gateway ("query.fusion", "service")."""
    out = {}
    for path in sorted(GATEWAY.rglob("*.py")):
        parts = path.relative_to(GATEWAY).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def gateway_imports(path: Path, modules: dict[str, Path]) -> list[tuple[int, str]]:
    """The gateway modules `path` imports, by dotted name under hansa.gateway; `from P import name`
    counts as importing P.name when that is a module (`from hansa.gateway.trust import admin`)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hansa.gateway"):
            base = node.module.removeprefix("hansa.gateway").lstrip(".")
            for alias in node.names:
                sub = f"{base}.{alias.name}".lstrip(".")
                out.append((node.lineno, sub if sub in modules else base))
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, a.name.removeprefix("hansa.gateway").lstrip("."))
                       for a in node.names if a.name.startswith("hansa.gateway"))
    return out


def room_of(module: str) -> str:
    return module.split(".")[0]


def _allowed(room: str, target: str) -> bool:
    if room_of(target) == room:
        return True
    if room not in GATEWAY_ALLOWED:
        return room == ABOVE_ALL or room_of(target) != ABOVE_ALL
    return any(target == a or target.startswith(a + ".") for a in GATEWAY_ALLOWED[room])


def test_each_gateway_room_imports_only_the_rooms_below_it() -> None:
    modules = gateway_modules()
    crossings = []
    for name, path in modules.items():
        room = room_of(name)
        for line, target in gateway_imports(path, modules):
            if target and not _allowed(room, target):
                crossings.append(f"{path.relative_to(REPO).as_posix()}:{line} imports hansa.gateway.{target}")
    assert not crossings, "\n".join(crossings)


def test_no_import_cycle_runs_between_gateway_rooms() -> None:
    """Every import counts, also those inside functions or under TYPE_CHECKING: a cycle that only
    a lazy import closes is still two rooms that cannot be read one without the other."""
    modules = gateway_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps = graph.setdefault(room_of(name), set())
        deps.update(room_of(t) for _, t in gateway_imports(path, modules) if t and room_of(t) != room_of(name))
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        pytest.fail(f"an import cycle between gateway rooms: {exc.args[1]}")
    assert {"index", "trust", "query", "http", "service"} <= set(order)


def test_the_gateway_scan_sees_its_rooms() -> None:
    """The scan itself works: the composition root imports each room below the HTTP surface."""
    modules = gateway_modules()
    found = {room_of(t) for _, t in gateway_imports(GATEWAY / "service.py", modules)}
    assert {"index", "trust", "query", "client", "transport"} <= found
    assert ("trust.admin" in {t for _, t in gateway_imports(REPO / "cli" / "gateway.py", modules)})


def test_nothing_that_serves_requests_imports_the_key_holding_admin_module() -> None:
    modules = gateway_modules()
    crossings = []
    for name, path in modules.items():
        for line, target in gateway_imports(path, modules):
            if target == KEY_HOLDER and name != KEY_HOLDER:
                crossings.append(f"{path.relative_to(REPO).as_posix()}:{line} imports hansa.gateway.{KEY_HOLDER}")
    assert not crossings, "\n".join(crossings)


def test_gateway_packages_re_export_nothing() -> None:
    """A package `__init__` that re-exports its modules makes importing any one of them load them all
    (importing `query.claims` from the HTTP room used to load the whole engine)."""
    importing = [init.relative_to(REPO).as_posix() for init in sorted(GATEWAY.rglob("__init__.py"))
                 if imports(init)]
    assert not importing, f"package __init__ files that import modules: {importing}"
