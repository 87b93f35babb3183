"""evaluation.shared_calls: each (site, request) pair reaches its site once per run; later asks get
the verified answer back after the time the site took. The inner transport here is a fake of our
own SiteTransport port (it counts calls); the eval smoke test runs the real one over HTTP."""
from __future__ import annotations

from typing import Sequence

from hansa.evaluation.shared_calls import SharedSiteCalls
from hansa.gateway.client import ERROR, OK, SiteCall, SiteTarget, per_target
from hansa.sync.wire import PartialAnswer, RetrieveRequest


class CountingTransport:
    """Answers every site ok (or `failing` ones with an error) after `latency_ms`, counting calls."""

    def __init__(self, latency_ms: float = 40.0, failing: Sequence[str] = ()) -> None:
        self.latency_ms = latency_ms
        self.failing = set(failing)
        self.asked: list[tuple[str, RetrieveRequest]] = []

    def call(self, targets: Sequence[SiteTarget], request: RetrieveRequest | Sequence[RetrieveRequest],
             timeout_s: float, *, max_response_bytes: int = 0, on_answer=None) -> list[SiteCall]:  # type: ignore[no-untyped-def]
        out = []
        for t, r in zip(targets, per_target(request, len(targets))):
            self.asked.append((t.site_id, r))
            if t.site_id in self.failing:
                out.append(SiteCall(t.site_id, ERROR, self.latency_ms, 10, 0, error="boom"))
            else:
                answer = PartialAnswer(site_id=t.site_id, answer=f"{t.site_id}: {r.question}", citations=(), confidence=0.5)
                out.append(SiteCall(t.site_id, OK, self.latency_ms, 10, 100, answer=answer))
        return out


def targets(*ids: str) -> list[SiteTarget]:
    return [SiteTarget(i, f"http://{i}.test", ("key",)) for i in ids]


def shared(inner: CountingTransport, **kw: int) -> tuple[SharedSiteCalls, list[float]]:
    slept: list[float] = []
    return SharedSiteCalls(inner, sleep=slept.append, **kw), slept


def test_a_pair_asked_again_is_replayed_after_the_time_the_site_took() -> None:
    inner = CountingTransport(latency_ms=40.0)
    calls, slept = shared(inner)
    q = RetrieveRequest("who built the bridge?")
    first = calls.call(targets("a", "b"), q, 5.0)
    again = calls.call(targets("b", "c"), q, 5.0)
    assert [s for s, _ in inner.asked] == ["a", "b", "c"]  # b reached its site once
    assert again[0] == first[1] and again[0].answer is first[1].answer
    assert [c.site_id for c in again] == ["b", "c"] and again[1].status == OK
    assert (calls.asked, calls.replayed) == (3, 1)
    assert len(slept) == 1 and 0 < slept[0] <= 0.040  # the round lasts as long as the replayed call took


def test_another_question_mode_or_top_k_is_a_new_pair() -> None:
    inner = CountingTransport()
    calls, _ = shared(inner)
    for r in (RetrieveRequest("q1"), RetrieveRequest("q2"), RetrieveRequest("q1", mode="global"),
              RetrieveRequest("q1", top_k=5), RetrieveRequest("q1")):
        calls.call(targets("a"), r, 5.0)
    assert len(inner.asked) == 4 and calls.replayed == 1


def test_failures_are_asked_again_and_per_site_requests_keep_their_order() -> None:
    inner = CountingTransport(failing=["bad"])
    calls, _ = shared(inner)
    requests = [RetrieveRequest("q", mode="global"), RetrieveRequest("q")]
    calls.call(targets("bad", "ok"), requests, 5.0)
    out = calls.call(targets("bad", "ok"), requests, 5.0)
    assert [s for s, _ in inner.asked] == ["bad", "ok", "bad"]
    assert [c.status for c in out] == [ERROR, OK] and out[1].answer is not None and out[1].answer.answer == "ok: q"


def test_a_recorded_call_slower_than_this_deadline_is_asked_again() -> None:
    inner = CountingTransport(latency_ms=2_000.0)
    calls, slept = shared(inner)
    calls.call(targets("a"), RetrieveRequest("q"), 5.0)
    calls.call(targets("a"), RetrieveRequest("q"), 1.0)  # would have timed out: not replayed
    assert len(inner.asked) == 2 and slept == []


def test_the_oldest_answers_are_forgotten_beyond_max_entries() -> None:
    inner = CountingTransport()
    calls, _ = shared(inner, max_entries=2)
    for q in ("q1", "q2", "q3", "q1"):
        calls.call(targets("a"), RetrieveRequest(q), 5.0)
    assert len(inner.asked) == 4 and calls.replayed == 0
