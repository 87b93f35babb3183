"""Fixtures for the gateway tests: the real embedder, loaded once per session (it takes seconds),
and a small real federation (two sites built from the bundled sample, a gateway they published to)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from hansa.adapters.embedder.sentence_transformers import SentenceTransformerEmbedder
from hansa.cli.demo import bundled_sample
from hansa.cli.federation import LocalFederation

FEDERATION_SITES = ("clapnq", "govt")
PASSAGES_PER_SITE = 6


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder("all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalFederation]:
    """Two real sites (embedded graph, Milvus Lite, the packaged embedder, Leiden communities)
    serving over loopback, enrolled in a gateway they published signed summaries to. Tests may add
    API keys and read state; they must not revoke or republish its sites."""
    passages, _ = bundled_sample()
    docs: dict[str, list[dict[str, str]]] = {site: [] for site in FEDERATION_SITES}
    for p in passages:
        if p["site"] in docs and len(docs[p["site"]]) < PASSAGES_PER_SITE:
            docs[p["site"]].append({"id": p["id"], "title": p["title"], "text": p["text"]})
    root: Path = tmp_path_factory.mktemp("federation")
    with LocalFederation(root, docs) as fed:
        yield fed
