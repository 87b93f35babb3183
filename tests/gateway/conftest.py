"""Fixtures for the gateway tests: the real embedder, loaded once per session (it takes seconds)."""
from __future__ import annotations

import pytest

from hansa.adapters.embedder.sentence_transformers import SentenceTransformerEmbedder


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder("all-MiniLM-L6-v2")
