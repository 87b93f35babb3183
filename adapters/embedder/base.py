"""The embedder port.

`model_id`, `model_sha256` and `dim` travel with every published summary: the gateway compares
them with its own embedder and refuses a publication whose vectors live in another space.

Queries and passages are embedded by separate calls because some models are trained with a
prefix on each side (e5's `query: ` / `passage: `): callers say which they embed, the model's
recipe (catalog.py) says what that means.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Sequence

import numpy as np

from hansa.core.errors import InputError


class Embedder(ABC):
    model_id: str  # e.g. "BAAI/bge-small-en-v1.5"
    dim: int
    # sha256 of the files that compute the vectors (the ONNX graph); "" where no file is known
    # (a served model): two members share a space only when model_id and this both match.
    model_sha256: str = ""
    # (query, passage) texts the model prepends (catalog.py): part of what a vector means, so the
    # embedding cache keys by them (cached.embedder_identity); ("", "") for models without.
    prefixes: tuple[str, str] = ("", "")

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Texts to be found (passages, sentences, summaries): float32 array of shape (len(texts),
        dim), each row L2-normalized (so IP == cosine)."""

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Texts that search (questions): the same as `embed` for symmetric models."""
        return self.embed(texts)

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_queries([text])[0]

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
