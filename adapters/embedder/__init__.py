"""The embedder port and sentence-transformers (offline) behind it."""
from hansa.adapters.embedder.base import Embedder

__all__ = ["Embedder", "open_embedder"]


def open_embedder(cfg):  # cfg: hansa.core.config.Config
    from hansa.adapters.embedder.sentence_transformers import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(
        cfg.embedder.model, device=cfg.embedder.device, batch_size=cfg.embedder.batch_size, precision=cfg.embedder.precision
    )
