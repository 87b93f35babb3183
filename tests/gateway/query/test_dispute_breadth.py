"""Dispute breadth (issue 32): a member that alters copies of many sites' text disputes with many
distinct sites, an honest one only with the few that lie about its text. Fast tier: a real gateway
whose sites are scripted, each reply signed with the site's own key and verified by the gateway
(tests/fakes.py ScriptedSiteTransport). The same attacks on real sites over HTTP:
scripts/bench_adversarial.py (benchmarks/adversarial_breadth.json)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

import pytest

from hansa.gateway.query.claims import extract_claims
from hansa.gateway.query.conduct import SiteConduct, broad_sites
from hansa.gateway.query.conflicts import Statement, resolve
from hansa.gateway.query.reliability import LOST
from hansa.sync.keys import SiteIdentity
from hansa.sync.wire import Citation, PartialAnswer
from tests.fakes import Reply
from tests.gateway.test_fast_gateway import FakeFederation, open_gateway

# one fact per honest site: (question, its sentence)
FACTS = {
    "bridges": ("When was the Alder bridge over the Wey completed?",
                "The Alder bridge over the Wey was completed in 1850 by the county engineers."),
    "mills": ("When did the Brook mill on the Test close?",
              "The Brook mill on the Test river closed in 1911 after a long strike."),
    "canals": ("When was the Cole canal to the harbour opened?",
               "The Cole canal to the harbour was opened in 1794 to carry coal."),
    "abbeys": ("When was the Dunmore abbey in the valley founded?",
               "The Dunmore abbey in the western valley was founded in 1132 by monks."),
}
LIARS = ("liar", "accomplice")
STALE = "stale"
KEYS = {site: SiteIdentity.generate() for site in (*FACTS, *LIARS, STALE)}


def altered(text: str) -> str:
    """The bench's lie: every year 7 later (scripts/bench_adversarial.py `altered`)."""
    return re.sub(r"\b(1\d{3})\b", lambda m: str(int(m.group(1)) + 7), text)


def reply(site_id: str, text: str, doc_id: str) -> Reply:
    return Reply(PartialAnswer(site_id, text, (Citation(site_id, doc_id, doc_id.title(), 0.9),), 0.8, ((text, doc_id),)))


def liar(site_id: str) -> Reply:
    """Answers every question with its altered copy of the fact asked about."""
    def answer(request: Any) -> PartialAnswer:
        site = next(s for s, (q, _) in FACTS.items() if q == request.question)
        return reply(site_id, altered(FACTS[site][1]), f"copy-{site}").answer  # type: ignore[return-value]
    return Reply(answer)


def federation(root: Path, **cfg: Any) -> FakeFederation:
    """Honest sites holding one fact each; two liars holding every fact altered; a stale site
    holding the Alder bridge's date as an older source gave it."""
    replies = {site: reply(site, text, site) for site, (_, text) in FACTS.items()}
    replies.update({s: liar(s) for s in LIARS})
    replies[STALE] = reply(STALE, FACTS["bridges"][1].replace("1850", "1849"), "old-bridges")
    summaries = {site: text for site, (_, text) in FACTS.items()}
    summaries.update({s: " ".join(altered(t) for _, t in FACTS.values()) for s in LIARS})
    summaries[STALE] = FACTS["bridges"][1]
    return open_gateway(root, replies, summaries, keys=KEYS, reader="none", **cfg)


@pytest.fixture(params=[3, 0], ids=["breadth", "off"])
def fed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FakeFederation]:
    f = federation(tmp_path, dispute_breadth=request.param)
    yield f
    f.service.close()


def ask(fed: FakeFederation, site: str, *others: str) -> dict[str, Any]:
    body = fed.query({"question": FACTS[site][0], "sites": [site, *others]}).get_json()
    assert "answer" in body, body
    return body


def conflict(body: dict[str, Any]) -> dict[str, Any]:
    (found,) = body["conflicts"]
    return found


def views(fed: FakeFederation) -> dict[str, dict[str, Any]]:
    return {s["site_id"]: s.get("conduct", {}) for s in fed.service.sites_view()["sites"]}


def lost(fed: FakeFederation, site: str) -> float:
    assert fed.service.reliability is not None
    return fed.service.reliability.record(site).failure_kinds.get(LOST, 0.0)


def test_a_member_altering_many_sites_text_is_outweighed_once_it_disputes_three(fed: FakeFederation) -> None:
    on = fed.service.cfg.dispute_breadth > 0
    bodies = {site: ask(fed, site, "liar") for site in FACTS}
    for site in list(FACTS)[:2]:  # one against one, nothing known yet: a disclosed dispute, neither side kept
        assert conflict(bodies[site])["unresolved"]
    for site in list(FACTS)[2:]:  # its third distinct opponent settles the dispute it is in against it
        found = conflict(bodies[site])
        if on:
            assert not found["unresolved"] and found["sides"][0]["sites"] == [site]
            assert "broadly disputed" in found["reason"] and "is kept because" in bodies[site]["answer"]
            assert bodies[site]["answer"].startswith(FACTS[site][1])
            assert altered(FACTS[site][1]) not in bodies[site]["answer"]
        else:  # the lie is still offered as one of two equal answers
            assert found["unresolved"] and altered(FACTS[site][1]) in bodies[site]["answer"]
    seen = views(fed)
    assert seen["liar"]["disputed_with"] == sorted(FACTS) and seen["liar"]["broadly_disputed"] is on
    for site in FACTS:  # an honest site disputed by one liar is neither broad nor charged
        assert seen[site]["disputed_with"] == ["liar"] and not seen[site]["broadly_disputed"]
        assert lost(fed, site) == 0
    assert lost(fed, "liar") == (2 if on else 0)  # it stood against a site that counts, and lost


def test_colluders_agreeing_with_each_other_do_not_outvote_an_honest_site(fed: FakeFederation) -> None:
    on = fed.service.cfg.dispute_breadth > 0
    bodies = [ask(fed, site, *LIARS) for site in FACTS]
    # two colluders against one honest holder: they outvote it while nothing is known of them
    first = bodies[0]
    assert conflict(first)["sides"][0]["sites"] == sorted(LIARS)
    assert "more independent sites state it (2 against 1)" in first["answer"]
    assert first["answer"].startswith(altered(FACTS["bridges"][1]))
    last, body = list(FACTS)[-1], bodies[-1]
    if on:
        assert body["answer"].startswith(FACTS[last][1]) and altered(FACTS[last][1]) not in body["answer"]
        assert "broadly disputed" in conflict(body)["reason"] and lost(fed, last) == 0
        assert all(views(fed)[c]["broadly_disputed"] for c in LIARS)
    else:
        assert body["answer"].startswith(altered(FACTS[last][1])) and lost(fed, last) == 1
    for site, seen in views(fed).items():  # two colluders disputing it make no honest site broad
        if site in FACTS:
            assert seen["disputed_with"] == sorted(LIARS) and not seen["broadly_disputed"]


def test_a_stale_site_disputing_one_other_site_is_not_punished(tmp_path: Path) -> None:
    fed = federation(tmp_path)
    try:
        for site in list(FACTS)[1:]:  # the liar becomes broad on other sites' text
            ask(fed, site, "liar")
        assert conflict(ask(fed, "bridges", STALE))["unresolved"]  # an older figure, against one honest site
        body = ask(fed, "bridges", STALE, "liar")  # and against the broad liar too
        assert "1857 (liar)" in body["answer"] and not body["answer"].startswith(altered(FACTS["bridges"][1]))
        seen = views(fed)
        assert seen[STALE]["disputed_with"] == ["bridges", "liar"] and seen["liar"]["broadly_disputed"]
        assert not seen[STALE]["broadly_disputed"] and not seen["bridges"]["broadly_disputed"]
        assert lost(fed, STALE) == 0 and lost(fed, "bridges") == 0
    finally:
        fed.service.close()


# -- the rule itself ------------------------------------------------------------------------------
HONEST = [f"h{i}" for i in range(10)]


def test_the_fewest_sites_that_explain_the_disputes_are_broad() -> None:
    assert broad_sites([("L", h) for h in HONEST[:3]], HONEST) == {"L": 3}
    assert broad_sites([("L", h) for h in HONEST[:2]], HONEST) == {}  # two disputes: could be stale data
    # colluders: every honest site they dispute has two opponents, and the first one taken explains one of them
    colluders = [(c, h) for c in ("C1", "C2") for h in HONEST[:4]]
    assert broad_sites(colluders, HONEST) == {"C1": 4, "C2": 4}
    assert broad_sites([(c, h) for c in ("C1", "C2") for h in HONEST[:1]], HONEST) == {}
    # a federation whose honest sites often disagree raises the bar: each disputes two others
    noisy = [(HONEST[i], HONEST[(i + 1) % 10]) for i in range(10)]
    assert broad_sites(noisy, HONEST) == {}
    assert broad_sites(noisy + [("L", h) for h in HONEST[:5]], HONEST) == {}  # 5 < 3 x the others' median 2
    assert broad_sites(noisy + [("L", h) for h in HONEST[:6]], HONEST) == {"L": 6}
    assert broad_sites([("L", h) for h in HONEST], HONEST, breadth=0) == {}  # off


def test_disputes_persist_across_a_restart_and_fade_after_their_memory(tmp_path: Path) -> None:
    now = [1000.0]
    conduct = SiteConduct.open(tmp_path, dispute_memory_s=3600.0, clock=lambda: now[0])
    conduct.record_disputes([("L", h) for h in HONEST[:3]] + [("h0", "h0")])
    conduct.close()
    again = SiteConduct.open(tmp_path, dispute_memory_s=3600.0, clock=lambda: now[0])
    try:
        assert again.broadly_disputed() == {"L": 3}
        assert again.view()["h0"].disputed_with == ("L",)
        assert again.broadly_disputed([("L", "h3")]) == {"L": 4}  # an answer's own disputes count
        now[0] += 3601.0
        assert again.broadly_disputed() == {} and again.view().get("L") is None
    finally:
        again.close()


def statement(key: int, site: str, text: str, weight: float = 0.8) -> Statement:
    return Statement(key, site, f"{site}-doc", text, weight, extract_claims(text))


def test_a_broad_sites_side_counts_for_nothing_against_a_site_that_is_not() -> None:
    text = FACTS["bridges"][1]
    one = [statement(0, "honest", text, 0.8), statement(1, "liar", altered(text), 0.85)]
    assert resolve(one).conflicts[0].unresolved  # one against one: nothing says which is right
    settled = resolve(one, broad={"liar"})
    (conflict,) = settled.conflicts
    assert not conflict.unresolved and conflict.winner.sites == ("honest",) and settled.rejected == {1}
    assert settled.lost == {"liar": 1} and settled.won == {"honest": 1}
    two = one + [statement(2, "accomplice", altered(text), 0.9)]
    assert resolve(two).conflicts[0].winner.sites == ("accomplice", "liar")  # two copies outvote one holder
    settled = resolve(two, broad={"liar", "accomplice"})
    assert settled.conflicts[0].winner.sites == ("honest",) and settled.lost == {"liar": 1, "accomplice": 1}
    assert settled.disputes() == {("honest", "liar"), ("accomplice", "honest")}
