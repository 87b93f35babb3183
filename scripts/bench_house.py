"""How much of the house one default query walks through: product files, gateway files and
functions entered, and the worst cyclomatic complexity among the gateway functions it runs.

Why measured and kept: issue 33 asks that a query be one typed pipeline that fits on a screen
(<= 25 gateway files, <= 120 gateway functions, no function above CC 15 on the query path). Those
numbers drift with every change unless a script measures them the same way each time.

How: the bundled demo federation (`hansa demo`'s two sites, embedded default, built in a temporary
directory) answers one question unprofiled (imports, caches and the embedding memo warm up), then
the same default query over HTTP runs under a profile hook set on every thread (the gateway and
the sites serve from threads of this process). Every Python function entered whose code lives in
the hansa package counts (comprehensions and generator expressions do not); a function is (file,
first line). Complexity is radon's, computed for
each entered gateway function from its source.

    nice python scripts/bench_house.py [--out benchmarks/house_query.json] [--question "..."]
"""
from __future__ import annotations

import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402  (scripts/ is not a package)
from benchlib import Stopwatch, progress  # noqa: E402

TARGET_FILES = 25
TARGET_FUNCTIONS = 120
TARGET_CC = 15
NOT_PRODUCT = {"scripts", "tests", "build"}  # beside the package in a source checkout
# Comprehensions and generator expressions run as code objects of their own before Python 3.12
# (3.12 inlines comprehensions): they are not functions anyone wrote, so they are not counted.
COMPREHENSIONS = {"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"}


def _profiled(call: Any) -> set[tuple[str, str, int]]:
    """Every Python function `call` enters, on any thread, as (file, name, first line)."""
    seen: set[tuple[str, str, int]] = set()

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            seen.add((code.co_filename, code.co_qualname if hasattr(code, "co_qualname") else code.co_name,
                      code.co_firstlineno))

    threading.setprofile(hook)
    sys.setprofile(hook)
    try:
        call()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    return seen


def _complexity(path: Path) -> dict[int, tuple[str, int]]:
    """radon's cyclomatic complexity of every function and method in a file, by first line."""
    from radon.complexity import cc_visit

    out: dict[int, tuple[str, int]] = {}

    def walk(blocks: Any) -> None:
        for block in blocks:
            if hasattr(block, "methods"):  # a class: its methods are the functions
                walk(block.methods)
            else:
                out[block.lineno] = (block.fullname, block.complexity)
                walk(getattr(block, "closures", []))

    walk(cc_visit(path.read_text(encoding="utf-8")))
    return out


def measure(entered: set[tuple[str, str, int]], package: Path) -> dict[str, Any]:
    rel = lambda p: p.relative_to(package).as_posix()  # noqa: E731
    resolved = [(Path(f).resolve(), name, line) for f, name, line in entered if not f.startswith("<")]
    ours = [(p, name, line) for p, name, line in resolved
            if p.is_relative_to(package) and rel(p).split("/", 1)[0] not in NOT_PRODUCT]
    product = [(p, name, line) for p, name, line in ours if name.rsplit(".", 1)[-1] not in COMPREHENSIONS]
    gateway = [(p, name, line) for p, name, line in product if rel(p).startswith("gateway/")]
    by_room = Counter(rel(p).split("/", 1)[0] for p in {p for p, _, _ in product})
    ccs: list[tuple[int, str]] = []
    for path in sorted({p for p, _, _ in gateway}):
        table = _complexity(path)
        for p, name, line in gateway:
            if p == path and line in table:
                ccs.append((table[line][1], f"{rel(path)}:{line} {table[line][0]}"))
    ccs.sort(reverse=True)
    return {
        "product_files": len({p for p, _, _ in product}),
        "product_functions": len(product),
        "files_by_package": dict(sorted(by_room.items())),
        "query_gateway_files": len({p for p, _, _ in gateway}),
        "query_gateway_functions": len(gateway),
        "query_path_max_cc": ccs[0][0] if ccs else None,
        "query_path_functions_above_cc15": sum(1 for c, _ in ccs if c > TARGET_CC),
        "query_path_worst": [{"cc": c, "function": f} for c, f in ccs[:15]],
        "gateway_files": sorted(rel(p) for p in {p for p, _, _ in gateway}),
        # where the query's gateway functions live, most first: what folding rooms would shorten
        "gateway_functions_by_file": dict(Counter(rel(p) for p, _, _ in gateway).most_common()),
    }


def main() -> None:
    p = benchlib.parser("house", __doc__.splitlines()[0])
    p.add_argument("--question", default=None, help="the question asked (default: the demo's first)")
    args = benchlib.parse(p)
    report = benchlib.Report("house", args.smoke, libraries=("radon",))

    import hansa.core
    from hansa.cli.demo import bundled_sample
    from hansa.federation.local import LocalFederation

    package = Path(hansa.core.__file__).resolve().parents[1]  # an editable install makes `hansa` a namespace
    passages, questions = bundled_sample()
    question = args.question or questions[0]["question"]
    by_site: dict[str, list[dict[str, Any]]] = {}
    for doc in passages:
        by_site.setdefault(doc["site"], []).append(doc)
    report.params.update(question=question, sites=len(by_site), passages=len(passages), package=str(package))

    with tempfile.TemporaryDirectory(prefix="hansa-house-") as tmp, \
            LocalFederation(Path(tmp), by_site, progress=progress) as fed:
        progress("warm-up query (not profiled)")
        first = fed.query({"question": question}, timeout=120)
        if first.status_code != 200:
            raise SystemExit(f"the gateway answered {first.status_code}: {first.text[:300]}")
        progress("profiled query")
        with Stopwatch() as sw:
            entered = _profiled(lambda: fed.query({"question": question}, timeout=120).raise_for_status())
        report.results["profiled_query_seconds"] = round(sw.seconds, 3)
    results = measure(entered, package)
    report.results.update(results)
    report.target("query_gateway_files", f"<= {TARGET_FILES}", results["query_gateway_files"],
                  results["query_gateway_files"] <= TARGET_FILES)
    report.target("query_gateway_functions", f"<= {TARGET_FUNCTIONS}", results["query_gateway_functions"],
                  results["query_gateway_functions"] <= TARGET_FUNCTIONS)
    report.target("query_path_max_cc", f"<= {TARGET_CC}", results["query_path_max_cc"],
                  (results["query_path_max_cc"] or 0) <= TARGET_CC)
    report.emit(args.out)


if __name__ == "__main__":
    main()
