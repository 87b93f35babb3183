"""Last resort (issue 32): a broadly disputed site's sentences fill an answer only where no other
site's sentence answers. On the adversarial bench's report split a liar broadly disputed for many
questions still reached an answer with an altered sentence nobody contradicted: the honest holder,
asked, offered other sentences of its document, so there was no contradiction to settle. Fast tier:
a real gateway whose sites are scripted and sign their replies (test_dispute_breadth.py's sites). On
real sites over HTTP: scripts/bench_adversarial.py (benchmarks/adversarial_unopposed.json)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from hansa.gateway.query.conduct import SiteConduct
from hansa.gateway.query.fusion import fuse
from hansa.sync.wire import PartialAnswer
from tests.fakes import Reply
from tests.gateway.query.test_dispute_breadth import FACTS, KEYS, altered, ask, reply
from tests.gateway.query.test_fusion_trust import GROTTO, LOURDES, QUESTION, site
from tests.gateway.test_fast_gateway import FakeFederation, open_gateway

# a second question about the bridges site's document; the honest holder offers its one sentence,
# which answers it, and the liar a sentence of its own that contradicts nothing anyone offered
BUILDER_Q = "Who completed the Alder bridge over the Wey?"
UNOPPOSED = "The Alder bridge over the Wey was completed by the Harrow company of engineers."


def liar_reply(request: Any) -> PartialAnswer:
    """Its altered copy of the fact asked about; for BUILDER_Q a sentence no site contradicts."""
    if request.question == BUILDER_Q:
        return reply("liar", UNOPPOSED, "copy-builder").answer  # type: ignore[return-value]
    held = next(s for s, (q, _) in FACTS.items() if q == request.question)
    return reply("liar", altered(FACTS[held][1]), f"copy-{held}").answer  # type: ignore[return-value]


@pytest.fixture(params=[True, False], ids=["last-resort", "off"])
def fed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FakeFederation]:
    replies = {s: reply(s, text, s) for s, (_, text) in FACTS.items()}
    replies["liar"] = Reply(liar_reply)
    summaries = {s: text for s, (_, text) in FACTS.items()}
    summaries["liar"] = " ".join(altered(t) for _, t in FACTS.values())
    f = open_gateway(tmp_path, replies, summaries, keys=KEYS, reader="none", disputed_last_resort=request.param)
    yield f
    f.service.close()


def test_a_broadly_disputed_sites_unopposed_sentence_is_not_added_to_an_answered_question(fed: FakeFederation) -> None:
    on = fed.service.cfg.disputed_last_resort
    for held in FACTS:  # it contradicts four distinct sites: broadly disputed
        ask(fed, held, "liar")
    assert "liar" in fed.service.conduct.broadly_disputed()
    body = fed.query({"question": BUILDER_Q, "sites": ["bridges", "liar"]}).get_json()
    assert not body.get("conflicts") and body["answer"].startswith(FACTS["bridges"][1])  # nothing to settle
    used = {c["site_id"] for c in body["citations"] if c["used"]}
    if on:
        assert UNOPPOSED not in body["answer"] and used == {"bridges"}
    else:
        assert UNOPPOSED in body["answer"] and used == {"bridges", "liar"}
    # where nobody else answers, its sentence is still used: breadth is not a quarantine
    alone = fed.query({"question": BUILDER_Q, "sites": ["liar"]}).get_json()
    assert alone["answer"].startswith(UNOPPOSED)


def disputed_b(last_resort: bool) -> SiteConduct:
    """A record in which "b" contradicted three distinct sites: broadly disputed."""
    conduct = SiteConduct(last_resort=last_resort)
    conduct.record_disputes([("b", "x"), ("b", "y"), ("b", "z")])
    assert set(conduct.broadly_disputed()) == {"b"}
    return conduct


def test_fusion_uses_a_broadly_disputed_site_only_where_nobody_else_answers(embedder) -> None:
    q = embedder.embed_one(QUESTION)
    a, b = site("a", 0.9, [(LOURDES, "grotto", 0.6)]), site("b", 0.9, [(GROTTO, "basilica", 0.6)])
    def used(calls: list, conduct: SiteConduct | None) -> set[str]:
        return {s.site_id for s in fuse(q, calls, embedder, conduct=conduct, question=QUESTION).sentences}
    assert used([a, b], disputed_b(True)) == {"a"}
    assert used([b], disputed_b(True)) == {"b"}
    assert used([a, b], disputed_b(False)) == used([a, b], SiteConduct()) == used([a, b], None) == {"a", "b"}
