"""The vector-store port and Milvus behind it (Lite by file path, a server by URI)."""
from hansa.adapters.vector.base import CollectionSpec, VectorStore

__all__ = ["CollectionSpec", "VectorStore"]
