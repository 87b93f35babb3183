"""Diagnostic checks: a named step that passes or fails with what it found and how to fix it.

Why one shape: `hansa site doctor` gathers checks from the graph store, the vector store, the
embedder and the site's own files; each adapter knows its own failure modes, the doctor only
prints them. A chain of checks stops at the first failure (`run_chain`): when Neo4j cannot be
reached, "GDS present" is not known, and saying "skipped" is true where "failed" would mislead.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar, Iterable, Literal, Sequence

from hansa.core.errors import HansaError
from hansa.core.model import FORBID, Wire

PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclass(frozen=True)
class Check(Wire):
    """One line of `hansa site doctor`; `to_json` is what `--json` prints."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "check"

    name: str
    status: Literal["pass", "fail", "skip"]  # PASS, FAIL or SKIP (not run: an earlier check it depends on failed)
    detail: str  # what was found (or the error)
    hint: str = ""  # how to fix it; empty when it passed

    @property
    def failed(self) -> bool:
        return self.status == FAIL


@dataclass(frozen=True)
class Step:
    """One check of a chain: `run` returns what it found, or raises HansaError (a failure whose
    message is the detail); `hint` is the fix shown with a failure."""

    name: str
    run: Callable[[], str]
    hint: str


def run_chain(steps: Iterable[Step]) -> list[Check]:
    """Run the steps in order; after the first failure the rest are SKIP."""
    out: list[Check] = []
    failed: str | None = None
    for step in steps:
        if failed is not None:
            out.append(Check(step.name, SKIP, f"not checked: {failed} failed"))
            continue
        try:
            out.append(Check(step.name, PASS, step.run()))
        except HansaError as exc:
            out.append(Check(step.name, FAIL, " ".join(str(exc).split()), step.hint))  # one line per check
            failed = step.name
    return out


def skipped(names: Sequence[str], why: str) -> list[Check]:
    return [Check(name, SKIP, f"not checked: {why}") for name in names]
