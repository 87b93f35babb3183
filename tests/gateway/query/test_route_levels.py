"""Routing through community levels ([gateway] route_levels): two sites publish a hierarchy with
parent links into a real summary index; "finest" routes on level 0 alone, "all" lets a site's
coarse summary vote too. The same real index shows what a routing discount changes: the hits
every router ranks."""
from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from hansa.core.config import load_config
from hansa.core.errors import ConfigError
from hansa.gateway.index.ann import AnnIndex
from hansa.gateway.query.route import SummaryRouter, route
from hansa.gateway.index.summaries import SummaryIndex
from hansa.sync.keys import SiteIdentity
from hansa.sync.publication import build_publication, open_publication
from hansa.sync.vectors import encode_vector
from hansa.sync.wire import EmbeddingSpace, Richness, SummaryRecord

TTL = timedelta(hours=1)
QUESTION = "When did the Normans conquer England?"


def _publish(index: SummaryIndex, space: EmbeddingSpace, site_id: str, records: list[SummaryRecord]) -> None:
    me = SiteIdentity.generate()
    pub = open_publication(build_publication(me, site_id, 1, space, records, TTL), site_id, [me.public_key], space)
    index.commit(index.plan(pub, None))


def _record(sid: str, vector: np.ndarray, level: int = 0, parent: str | None = None) -> SummaryRecord:
    return SummaryRecord(sid, 1, encode_vector(vector.astype(np.float32)), Richness(3, 2, 1), level=level, parent=parent)


@pytest.fixture
def index(embedder) -> SummaryIndex:
    """Site "fine": a level-0 summary fairly close to the question; site "coarse": level-0
    summaries farther off under a level-1 parent that matches the question closely."""
    space = EmbeddingSpace.of(embedder)
    q = embedder.embed_query(QUESTION)
    rng = np.random.default_rng(7)

    def near(weight: float) -> np.ndarray:
        v = weight * q + (1 - weight) * rng.standard_normal(q.shape[0]).astype(np.float32) / np.sqrt(q.shape[0])
        return v / np.linalg.norm(v)

    index = SummaryIndex(None, space, ann=AnnIndex(space.dim))
    _publish(index, space, "fine", [_record("f0", near(0.8)), _record("f1", near(0.1))])
    _publish(index, space, "coarse", [_record("k0", near(0.5), parent="kp"), _record("k1", near(0.45), parent="kp"),
                                      _record("kp", near(0.97), level=1)])
    return index


def _routed(embedder, index: SummaryIndex, levels: str) -> list[str]:
    routing = route(QUESTION, embedder=embedder, index=index, records={}, routable={"fine", "coarse"}, top_m=16,
                    k=1, router=SummaryRouter(lexical_weight=0.0), levels=levels)
    return [s.site_id for s in routing.considered]


def test_levels_reach_the_index_and_steer_routing(embedder, index: SummaryIndex) -> None:
    hits = index.search(embedder.embed_query(QUESTION), 16)
    assert {(h.summary_id, h.level) for h in hits} == {("f0", 0), ("f1", 0), ("k0", 0), ("k1", 0), ("kp", 1)}
    assert _routed(embedder, index, "finest") == ["fine", "coarse"]  # level 0 alone: f0 is the best summary
    assert _routed(embedder, index, "all") == ["coarse", "fine"]  # the coarse parent votes too


def test_route_levels_is_configurable_and_checked(tmp_path) -> None:
    assert load_config(env={"HANSA_HOME": str(tmp_path)}).gateway.route_levels == "finest"
    assert load_config(env={"HANSA_HOME": str(tmp_path), "HANSA_GATEWAY_ROUTE_LEVELS": "all"}).gateway.route_levels == "all"
    with pytest.raises(ConfigError, match="route_levels"):
        load_config(env={"HANSA_HOME": str(tmp_path), "HANSA_GATEWAY_ROUTE_LEVELS": "coarsest"})


class _Reversing(SummaryRouter):
    """The summary router, keeping the hits it was given and ranking the sites in reverse: a router
    whose order is its own and not the summary score's, as the learned router's is not."""

    def __init__(self) -> None:
        super().__init__(lexical_weight=0.0)
        self.seen: list = []
        self.ranked: list = []

    def rank(self, question_vector, hits, routable, lexical=None):  # type: ignore[no-untyped-def]
        self.seen = list(hits)
        self.ranked = list(reversed(super().rank(question_vector, hits, routable, lexical=lexical)))
        return self.ranked


def test_a_discount_lowers_the_hits_every_router_ranks_and_the_routers_order_stands(embedder, index: SummaryIndex) -> None:
    router = _Reversing()

    def ask(discounts: dict[str, float] | None):  # type: ignore[no-untyped-def]
        return route(QUESTION, embedder=embedder, index=index, records={}, routable={"fine", "coarse"}, top_m=16,
                     k=2, router=router, discounts=discounts, levels="finest")

    ask(None)
    published = {h.summary_id: h.score for h in router.seen}
    routing = ask({"fine": 0.3})
    seen = {h.summary_id: h.score for h in router.seen}
    assert seen["f0"] == pytest.approx(published["f0"] - 0.3) and seen["k0"] == published["k0"]
    assert [h.score for h in router.seen] == sorted(seen.values(), reverse=True)  # best first again
    assert routing.considered == router.ranked  # the router's order, not re-sorted by a discounted score
    assert {h.summary_id: h.score for h in routing.hits} == published  # conduct reads what was published
