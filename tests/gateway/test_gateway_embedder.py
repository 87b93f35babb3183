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


def test_a_gateway_on_bge_routes_with_bges_cosine_scale_unless_the_operator_set_it(tmp_path: Path) -> None:
    """site_margin and lexical_weight are in the embedder's cosine units (adapters/embedder/scales.toml):
    left out of the configuration they follow the model the gateway runs, set they stay as set."""
    from hansa.adapters.embedder.scale import scale_for
    from hansa.gateway.query.learned.router import open_router

    bge, minilm = scale_for("BAAI/bge-small-en-v1.5"), scale_for("sentence-transformers/all-MiniLM-L6-v2")
    env = {"HANSA_HOME": str(tmp_path / "bge"), "HANSA_EMBEDDER_MODEL": "bge-small-en-v1.5-q"}
    with Gateway.open(load_config(env=env)) as gw:
        assert gw.embedder.model_id == "BAAI/bge-small-en-v1.5"
        assert (gw.cfg.site_margin, gw.cfg.lexical_weight) == (bge.site_margin, bge.lexical_weight)
        assert gw.engine.cfg.site_margin == bge.site_margin  # what the default router selects with
        assert open_router(gw.cfg, gw.index, tmp_path, embedder=gw.embedder).margin == bge.summary_margin
    with Gateway.open(load_config(env={**env, "HANSA_HOME": str(tmp_path / "set"), "HANSA_GATEWAY_SITE_MARGIN": "0.4"})) as gw:
        assert (gw.cfg.site_margin, gw.cfg.lexical_weight) == (0.4, bge.lexical_weight)
    with Gateway.open(load_config(env={"HANSA_HOME": str(tmp_path / "minilm")})) as gw:
        assert (gw.cfg.site_margin, gw.cfg.lexical_weight) == (minilm.site_margin, minilm.lexical_weight)
        assert open_router(gw.cfg, gw.index, tmp_path, embedder=gw.embedder).margin == minilm.summary_margin == 0.24
