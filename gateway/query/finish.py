"""The time a question's deadline keeps back for the gateway's own work after a round of calls.

Why: `site_timeout_s` is the user's wait for a round, counted from when the gateway began working
toward it; routing already comes out of it (engine.py). What follows the round did not: waking the
waiting thread, assessing, fusing. On an idle gateway that is a few milliseconds, but on busy cores
(the load drill's 4 workers on 2 cores) it took up to ~150 ms, added to every question that waited
for a hung site. So each process records how long that work took for its recent questions, and a
round stops waiting that much earlier: the 95th percentile of the last `WINDOW` samples, once it
has `MIN_SAMPLES`, never more than `[gateway] finish_reserve_max_ms` (0 turns it off). A site that
answers within that last stretch of the deadline is not waited for.

Samples come only from questions whose last round cut a call at its deadline: theirs is the
finishing that adds to the deadline, while a question whose sites all answered early ends before
it anyway (and its finishing is longer: fusion embeds the last answer's sentences, which a round
still waiting on a slower site has embedded already, gateway.query.fusion.measure_early). A sample runs from
the round's deadline to the answer being fused, so a thread the machine woke late counts as the
gateway's own time too; an LLM's synthesis is not counted (it has its own timeout).
"""
from __future__ import annotations

import threading
from collections import deque

WINDOW = 256  # recent questions cut at a deadline; one slow burst fades after this many
QUANTILE = 0.95
MIN_SAMPLES = 8  # fewer say too little about this machine's load; nothing is kept back until then


class FinishReserve:
    """Recent finishing times of this process's questions, and the reserve they call for."""

    def __init__(self, max_ms: float, window: int = WINDOW) -> None:
        if max_ms < 0:
            raise ValueError("finish_reserve_max_ms must be 0 (off) or positive")
        self.max_ms = float(max_ms)
        self._samples: deque[float] = deque(maxlen=window)
        self._lock = threading.Lock()

    def record(self, ms: float) -> None:
        if self.max_ms > 0:
            with self._lock:
                self._samples.append(max(float(ms), 0.0))

    def reserve_ms(self) -> float:
        """What a round keeps back now (0 before `MIN_SAMPLES` questions cut at a deadline)."""
        if self.max_ms <= 0:
            return 0.0
        with self._lock:
            if len(self._samples) < MIN_SAMPLES:
                return 0.0
            samples = sorted(self._samples)
        return min(samples[min(int(QUANTILE * len(samples)), len(samples) - 1)], self.max_ms)
