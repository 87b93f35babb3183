"""`hansa site reembed` on a real site (embedded graph, Milvus Lite): a planned embedder change.

The site is built with the default embedder, then configured with e5-small-v2 (int8): until the
re-embed finishes the site refuses to work in either space; afterwards every vector is the new
model's, site.json names it, the next publication carries it, and an interrupted run leaves the
old record in place and finishes when run again.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hansa.adapters.embedder.catalog import MODELS
from hansa.core.errors import ConfigError
from hansa.plugin.communities import build_communities
from hansa.plugin.ingest import ingest_paths
from hansa.plugin.install import check_site_file, install_site
from hansa.plugin.reembed import reembed
from hansa.plugin.site import CHUNKS, SENTENCES, SUMMARIES, SiteContext

from tests.plugin.conftest import site_config, write_corpus

NEW = "e5-small-v2-q"


class Interrupted(Exception):
    pass


def _built(root: Path) -> Path:
    home = root / "home"
    with SiteContext.open(site_config(home)) as ctx:
        install_site(ctx)
        ingest_paths(ctx, [write_corpus(root / "docs")])
        build_communities(ctx)
    return home


def test_reembed_rewrites_every_vector_and_records_the_new_space(tmp_path: Path) -> None:
    home = _built(tmp_path)
    with SiteContext.open(site_config(home, HANSA_EMBEDDER_MODEL=NEW)) as ctx:
        with pytest.raises(ConfigError, match="hansa site reembed"):
            check_site_file(ctx)  # every job that reads vectors refuses the mixed state
        with pytest.raises(Interrupted):  # a crash after the first page: site.json still names the old space
            reembed(ctx, on_page=lambda done: (_ for _ in ()).throw(Interrupted()))
        with pytest.raises(ConfigError):
            check_site_file(ctx)
        result = reembed(ctx)
        assert result.chunks == ctx.graph.stats().chunks > 0 and result.summaries == ctx.graph.stats().communities > 0
        assert result.after.model_sha256 == MODELS[NEW].graph.sha256 != result.before.model_sha256
        check_site_file(ctx)  # the site works again, in the new space
        page = ctx.graph.chunk_texts(limit=5)
        stored = ctx.vectors.get(CHUNKS, [cid for cid, _, _ in page])
        fresh = ctx.embedder.embed([text for _, _, text in page])
        old = MODELS["all-MiniLM-L6-v2"]
        for (cid, _, _), vector in zip(page, fresh):
            # int8 graphs quantize activations per batch, so another batch moves a vector slightly
            # (catalog.py); a MiniLM vector against e5's would be unrelated (cosine near 0)
            assert float(np.dot(stored[cid], vector)) > 0.99, old.name
        assert ctx.vectors.count(SENTENCES) == result.sentences and ctx.vectors.count(SUMMARIES) == result.summaries
        assert reembed(ctx).chunks == 0  # already done: nothing to do
    recorded = json.loads((home / "site.json").read_text())
    assert recorded["embedding"]["model_sha256"] == MODELS[NEW].graph.sha256
    assert recorded["embedding"]["model_id"] == "intfloat/e5-small-v2"
