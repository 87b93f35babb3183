"""A test's own connection to the session's Milvus server, opened the way the store opens one.

Tests that inspect or reset the server (drop collections, check it answers) need a client apart
from the store's: `dedicated=True` so closing it never closes a connection pymilvus shares with a
store under test, and the store's gRPC options (no idle pings to a loopback server), so the test
connection does not meet the GOAWAY the store avoids.
"""
from __future__ import annotations

from typing import Any


def server_client(uri: str, timeout: float = 30) -> Any:
    """A dedicated MilvusClient for `uri`; the caller closes it."""
    from pymilvus import MilvusClient

    from hansa.adapters.vector.milvus import grpc_options

    return MilvusClient(uri=uri, timeout=timeout, dedicated=True, **grpc_options(uri, embedded=False))
