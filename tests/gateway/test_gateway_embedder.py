"""The embedder a gateway opens for itself keeps its embeddings ([gateway] embedding_memo_entries):
fusion embeds the sentences sites answer with, and the same documents answer again and again, so
the second embedding of a text must cost no model call. One the caller passes stays as given."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from hansa.adapters.embedder.memo import MemoEmbedder
from hansa.core.config import load_config
from hansa.gateway.service import Gateway


def test_a_gateway_opened_from_config_memoizes_its_embeddings(tmp_path: Path) -> None:
    cfg = load_config(env={"HANSA_HOME": str(tmp_path), "HANSA_GATEWAY_EMBEDDING_MEMO_ENTRIES": "64"})
    with Gateway.open(cfg) as gw:
        assert isinstance(gw.embedder, MemoEmbedder) and gw.engine.embedder is gw.embedder
        first = gw.embedder.embed(["The Rhone flows through Lyon.", "Bees make honey."])
        misses = gw.embedder.misses
        again = gw.embedder.embed(["Bees make honey."])
        assert gw.embedder.misses == misses and gw.embedder.hits >= 1
        np.testing.assert_array_equal(again[0], first[1])


def test_zero_entries_turn_the_memo_off(tmp_path: Path) -> None:
    cfg = load_config(env={"HANSA_HOME": str(tmp_path), "HANSA_GATEWAY_EMBEDDING_MEMO_ENTRIES": "0"})
    with Gateway.open(cfg) as gw:
        assert not isinstance(gw.embedder, MemoEmbedder)
