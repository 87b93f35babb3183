"""End to end: a document deleted at a site is never cited by the gateway again, and an
uninstalled site is withdrawn from routing by its own signed publication.

Two real sites (embedded graph, Milvus Lite, the packaged embedder) serve over loopback and publish
signed summaries to a real gateway (federation.local.LocalFederation). One site deletes a document,
refreshes its communities (seeded Leiden) and publishes: a delta with tombstones. The gateway's
index then holds exactly the site's current summaries, and no answer cites the deleted document."""
from __future__ import annotations

from typing import Iterator

import pytest

import requests

from hansa.core.errors import HansaError
from hansa.federation.local import LocalFederation
from hansa.plugin.deletion import delete_documents, refresh_communities
from hansa.plugin.publish import publish_summaries
from hansa.plugin.uninstall import uninstall_site

DOCS = {
    "north": [
        {"id": "volcano", "title": "Mount Teravik", "text": "Mount Teravik is a stratovolcano on the Hallgrim Peninsula. "
         "The Hallgrim Volcano Observatory watches Mount Teravik with twelve seismometers. Volcanologist Ingrid Saeter "
         "leads the Hallgrim Volcano Observatory. The Hallgrim Volcano Observatory publishes a monthly bulletin."},
        {"id": "lighthouse", "title": "Brightwater Lighthouse", "text": "The Brightwater Lighthouse stands on Karsholm "
         "Island. Engineer Margaret Ellison designed the Brightwater Lighthouse in 1874. The Karsholm Harbour Trust owns "
         "the Brightwater Lighthouse and opens its lamp room on summer weekends."},
        {"id": "roastery", "title": "Kettle Ridge Roasters", "text": "Kettle Ridge Roasters roasts coffee in Ashford "
         "Vale. Head roaster Daniel Okafor roasts the Yirgacheffe beans at Kettle Ridge Roasters for eleven minutes. "
         "Kettle Ridge Roasters ships its coffee in compostable bags."},
    ],
    "south": [
        {"id": "orchestra", "title": "Lindenfeld Chamber Orchestra", "text": "The Lindenfeld Chamber Orchestra was "
         "founded in 1951 by Helena Marchetti. The Lindenfeld Chamber Orchestra performs in the Rosengarten Concert Hall. "
         "Helena Marchetti led the Lindenfeld Chamber Orchestra for twenty-seven years."},
        {"id": "observatory-visit", "title": "Visiting volcanoes", "text": "Hikers who visit a volcano observatory need a "
         "permit. Volcano observatories measure sulphur dioxide near the crater rim. A volcano observatory warns "
         "hikers when gas levels rise."},
    ],
}
QUESTIONS = ("Who leads the Hallgrim Volcano Observatory?", "What does the Hallgrim Volcano Observatory watch?")


@pytest.fixture(scope="module")
def fed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalFederation]:
    with LocalFederation(tmp_path_factory.mktemp("withdrawal"), DOCS) as federation:
        yield federation


def _cited(fed: LocalFederation, question: str) -> set[tuple[str, str]]:
    resp = fed.query({"question": question, "top_k_sites": 2})
    assert resp.status_code == 200, resp.text
    return {(c["site_id"], c["doc_id"]) for c in resp.json()["citations"]}


def test_a_deleted_document_is_never_cited_again(fed: LocalFederation) -> None:
    assert ("north", "volcano") in _cited(fed, QUESTIONS[0])
    north = fed.sites["north"].ctx
    index = fed.gateway_service.index
    before = set(index.current("north").rows)
    held = {c.id for c in north.graph.communities() if "volcano" in c.doc_ids}
    assert held and held <= before

    assert delete_documents(north, ["volcano"]).deleted == ("volcano",)
    refresh_communities(north)
    result = publish_summaries(north, fed.gateway_url)
    assert result.retired >= 1 and not result.full  # a delta with tombstones

    current = {c.id for c in north.graph.communities()}
    assert set(index.current("north").rows) == current  # the gateway holds exactly what the site holds
    assert not held & current
    for question in QUESTIONS:
        assert ("north", "volcano") not in _cited(fed, question)
    assert ("north", "lighthouse") in _cited(fed, "Who designed the Brightwater Lighthouse?")


def test_an_uninstalled_site_withdraws_and_the_gateway_stops_routing_to_it(fed: LocalFederation) -> None:
    """Issue 32: `hansa site uninstall` on a serving site left it routable until an admin revoked
    it. Now it first signs a publication holding no summary; the gateway honours it at once."""
    question = "Who founded the Lindenfeld Chamber Orchestra?"
    first = fed.query({"question": question, "top_k_sites": 2}).json()
    assert "south" in first["trace"]["sites_called"]

    result = uninstall_site(fed.sites["south"].ctx)  # while it serves
    assert result.withdrawn_sequence is not None and result.collections

    view = {s["site_id"]: s for s in requests.get(f"{fed.gateway_url}/v1/sites", timeout=30).json()["sites"]}
    assert view["south"]["withdrawn"] is True and view["south"]["routable"] is False
    assert view["south"]["status"] == "active" and view["south"]["summary_count"] == 0  # no admin step
    assert view["south"]["last_sequence"] == result.withdrawn_sequence
    assert view["north"]["routable"] is True
    assert fed.gateway_service.index.sites(["south"]) == {}  # its summaries are gone from the index
    trace = fed.query({"question": question, "top_k_sites": 2}).json()["trace"]
    assert "south" not in trace["sites_called"] and "south" not in {s["site_id"] for s in trace["sites_considered"]}
    assert {"site_id": "south", "reason": "withdrawn (its publication holds no summary)"} in trace["sites_excluded"]


def test_an_uninstall_that_cannot_withdraw_removes_nothing(tmp_path_factory: pytest.TempPathFactory) -> None:
    with LocalFederation(tmp_path_factory.mktemp("unreachable"), {"solo": DOCS["north"]}) as federation:
        ctx = federation.sites["solo"].ctx
        with pytest.raises(HansaError, match="nothing was removed.*--no-withdraw"):
            uninstall_site(ctx, gateway_url="http://127.0.0.1:9", withdraw=True)
        assert ctx.graph.installed_site() == "solo" and ctx.graph.communities()  # the site is whole
        assert federation.registry.get("solo").is_routable(federation.registry.clock())  # and still serves its gateway
