"""evaluation.runner.gateway_held_bytes: what `hansa eval` reports the gateway holds, by part."""
from __future__ import annotations

from datetime import timedelta

import numpy as np

from hansa.core.jsonsafe import dumps
from hansa.evaluation.runner import gateway_held_bytes
from hansa.gateway.index.durable import HeadFile
from hansa.gateway.index.summaries import SummaryIndex
from hansa.sync.keys import SiteIdentity
from hansa.sync.publication import build_publication, open_publication
from hansa.sync.terms import TermSketch
from hansa.sync.vectors import encode_vector
from hansa.sync.wire import EmbeddingSpace, Richness, SummaryRecord

SPACE = EmbeddingSpace("test-model", 384)


def _publish(index: SummaryIndex, site: str, n: int, terms: TermSketch | None) -> None:
    me = SiteIdentity.generate()
    rng = np.random.default_rng(len(site))
    records = [SummaryRecord(f"c{i}", 1, encode_vector(rng.normal(size=384).astype(np.float32)), Richness(3, 2, 1))
               for i in range(n)]
    envelope = build_publication(me, site, 1, SPACE, records, timedelta(hours=1), terms=terms)
    index.commit(index.plan(open_publication(envelope, site, [me.public_key], SPACE), None))


def test_held_bytes_count_a_byte_per_dimension_and_split_terms_from_the_rest_of_the_head() -> None:
    index = SummaryIndex(None, SPACE)
    terms = TermSketch.from_documents([(f"d{i}", "rivers lyon rhone saone mediterranean") for i in range(3)])
    _publish(index, "with-terms", 10, terms)
    _publish(index, "plain", 5, None)
    held = gateway_held_bytes(index)
    assert held["vectors"] == 15 * 384  # int8 codes: one byte a dimension (float32 held 4)
    heads = {s: HeadFile.of(index.current(s).stored()).to_json() for s in ("with-terms", "plain")}
    assert held["terms"] == len(dumps(heads["with-terms"]["terms"])) > 0
    assert held["head"] + held["terms"] == sum(len(dumps(h)) for h in heads.values())
    assert held["total"] == held["vectors"] + held["terms"] + held["head"]
