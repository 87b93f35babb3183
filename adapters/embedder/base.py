"""The embedder port.

`model_id` and `dim` travel with every published summary: the gateway compares them with its own
embedder and refuses a publication whose vectors live in another space.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Sequence

import numpy as np


class Embedder(ABC):
    model_id: str  # e.g. "sentence-transformers/all-MiniLM-L6-v2"
    dim: int

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dim), each row L2-normalized (so IP == cosine)."""

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]
