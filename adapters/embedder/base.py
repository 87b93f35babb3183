"""The embedder port.

`model_id` and `dim` travel with every published summary: the gateway compares them with its own
embedder and refuses a publication whose vectors live in another space.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Sequence

import numpy as np

from hansa.core.errors import InputError


class Embedder(ABC):
    model_id: str  # e.g. "sentence-transformers/all-MiniLM-L6-v2"
    dim: int

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dim), each row L2-normalized (so IP == cosine)."""

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def warm(self) -> None:
        """Load the model now (backends load it on the first vector): a job that reports its own
        rate calls this first, so start-up is not counted as embedding time."""
        self.embed(["warm-up"])


def checked_texts(texts: Sequence[str]) -> list[str]:
    """The texts as a list, or an InputError naming the first that is not a string: every backend
    refuses the same inputs the same way (a bare string would otherwise embed character by character)."""
    if isinstance(texts, str):
        raise InputError("embed() takes a sequence of strings, not one string: use embed_one()")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InputError(f"text #{i} to embed is a {type(text).__name__}, not a string")
    return texts


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """float32, C-contiguous, each row L2-normalized in float32 (a zero row stays zero)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(vectors / norms, dtype=np.float32)
