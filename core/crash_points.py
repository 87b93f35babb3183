"""Named crash points for the `kill -9` drills (tests/crash/): a process can be made to die at one
exact step, so a drill proves what a restart finds after a crash *there*.

Why a hook and not a timer: killing a process "after it printed progress" is racy on a loaded
machine and cannot hit the narrow windows that matter (vectors written, graph not yet committed).
With `HANSA_TEST_CRASH_AT=<point>` (or `<point>@<n>`: at the n-th time the point is reached) the
process sends itself SIGKILL there: exactly what `kill -9` does from outside — no `finally`, no
`atexit`, no flush, no buffered write completes. The variable exists for the drills only; unset
(always, in production) a crash point costs one dictionary lookup.
"""
from __future__ import annotations

import os
import signal
from collections import Counter

ENV = "HANSA_TEST_CRASH_AT"
_reached: Counter[str] = Counter()


def crash_point(name: str) -> None:
    """Die by SIGKILL here when HANSA_TEST_CRASH_AT names this point (and its hit count)."""
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    point, _, nth = wanted.partition("@")
    if point != name:
        return
    _reached[name] += 1
    if _reached[name] == (int(nth) if nth else 1):
        os.kill(os.getpid(), signal.SIGKILL)
