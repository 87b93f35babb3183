"""End to end: a document deleted at a site is never cited by the gateway again.

Two real sites (embedded graph, Milvus Lite, the packaged embedder) serve over loopback and publish
signed summaries to a real gateway (cli.federation.LocalFederation). One site deletes a document,
refreshes its communities (seeded Leiden) and publishes: a delta with tombstones. The gateway's
index then holds exactly the site's current summaries, and no answer cites the deleted document."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from hansa.cli.federation import LocalFederation
from hansa.plugin.deletion import delete_documents, refresh_communities
from hansa.plugin.publish import publish_summaries

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
