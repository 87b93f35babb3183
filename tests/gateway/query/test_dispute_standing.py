"""Standing (issue 32): a member with no confirmed record cannot win or tie a contradiction against
a site that has one. On the adversarial bench's fit split every answer a liar reached came from its
first disputes, before dispute breadth had three opponents: one against one left unresolved (both
sentences in the answer), and two colluders holding the same doctored copy outvoting one honest
holder. Fast tier: a real gateway whose sites are scripted and sign their replies
(tests/gateway/query/test_dispute_breadth.py's federation). On real sites over HTTP:
scripts/bench_adversarial.py (benchmarks/adversarial_standing.json)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from hansa.gateway.query.conflicts import resolve
from hansa.gateway.query.fusion import fuse
from hansa.gateway.query.reading import ReadingStage
from hansa.gateway.query.reliability import Observation, SiteReliability
from tests.fakes import WordReader
from tests.gateway.query.test_dispute_breadth import FACTS, LIARS, altered, ask, conflict, federation, lost, statement
from tests.gateway.query.test_fusion_trust import LOURDES, QUESTION, site
from tests.gateway.test_fast_gateway import FakeFederation


@pytest.fixture(params=[2.0, 0.0], ids=["standing", "off"])
def fed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FakeFederation]:
    """Honest sites that earned a record (three confirmations each, as the reader or another site
    gives them on the questions their own text answers); the liars are new."""
    f = federation(tmp_path, dispute_standing=request.param)
    assert f.service.reliability is not None
    f.service.reliability.observe({s: Observation(successes=3.0) for s in FACTS})
    yield f
    f.service.close()


def test_a_new_member_cannot_tie_a_site_with_a_record(fed: FakeFederation) -> None:
    on = fed.service.cfg.dispute_standing > 0
    body = ask(fed, "bridges", "liar")  # its first dispute: breadth knows nothing of it yet
    found, lie = conflict(body), altered(FACTS["bridges"][1])
    if on:
        assert not found["unresolved"] and found["sides"][0]["sites"] == ["bridges"]
        assert "no confirmed record yet" in found["reason"] and lie not in body["answer"]
        assert "1857 (liar)" in body["answer"] and "1850 is kept because" in body["answer"]
        assert lost(fed, "liar") == 1 and lost(fed, "bridges") == 0
    else:  # one source against one of nearly equal weight: left open, the lie offered as the other answer
        assert found["unresolved"] and "/ 1857 (liar)" in body["answer"] and lost(fed, "liar") == 0


def test_colluders_without_a_record_do_not_outvote_a_site_with_one(fed: FakeFederation) -> None:
    on = fed.service.cfg.dispute_standing > 0
    body = ask(fed, "bridges", *LIARS)
    winner = conflict(body)["sides"][0]["sites"]
    if on:
        assert winner == ["bridges"] and body["answer"].startswith(FACTS["bridges"][1])
        assert lost(fed, "bridges") == 0 and all(lost(fed, c) == 1 for c in LIARS)
    else:
        assert winner == sorted(LIARS) and body["answer"].startswith(altered(FACTS["bridges"][1]))
        assert lost(fed, "bridges") == 1


def test_where_nobody_has_a_record_nothing_changes() -> None:
    text = FACTS["bridges"][1]
    one = [statement(0, "honest", text, 0.8), statement(1, "liar", altered(text), 0.85)]
    assert resolve(one, unproven={"honest", "liar"}).conflicts[0].unresolved
    settled = resolve(one, unproven={"liar"})
    assert settled.conflicts[0].winner.sites == ("honest",) and settled.rejected == {1}
    assert settled.lost == {"liar": 1} and settled.won == {"honest": 1}
    # two sites with a record disputing: weight decides, as before (a stale copy is not a liar)
    assert resolve(one).conflicts[0].unresolved


def test_standing_counts_confirmations_held_not_the_prior() -> None:
    now = [1000.0]
    rel = SiteReliability(None, standing=2.0, clock=lambda: now[0])
    rel.observe({"a": Observation(successes=1.0), "b": Observation(successes=2.0), "c": Observation(failures=3.0)})
    assert rel.unproven(["a", "b", "c", "new"]) == {"a", "c", "new"}
    now[0] += 1.0  # evidence decays from the moment it is earned: exactly two no longer reach two
    assert rel.unproven(["b"]) == {"b"}
    assert SiteReliability(None).unproven(["a", "new"]) == set()  # 0: off
    with pytest.raises(ValueError):
        SiteReliability(None, standing=-1.0)


def test_the_reader_confirms_no_copied_sentence(embedder) -> None:
    """Which copy of a public sentence is the original the reader cannot tell: a member holding
    only copies of others' text earns no standing from whichever copy fusion keeps."""
    q = embedder.embed_one(QUESTION)
    rel = SiteReliability(None)
    reading = ReadingStage(WordReader(), floor=0.2)
    fused = fuse(q, [site("a", 0.9, [(LOURDES, "grotto", 0.6)]), site("copy", 0.9, [(LOURDES, "grotto-copy", 0.6)])],
                 embedder, reliability=rel, reading=reading, question=QUESTION)
    assert fused.sentences and rel.record("a").successes == 0 and rel.record("copy").successes == 0
    fuse(q, [site("a", 0.9, [(LOURDES, "grotto", 0.6)])], embedder, reliability=rel, reading=reading, question=QUESTION)
    assert rel.record("a").successes == 1  # its own sentence, read alone, is confirmed
