"""Errors a user can act on.

Every failure that reaches a person (CLI) or a client (HTTP) is a `HansaError` whose message says
what was wrong and what to do; anything else is a bug and surfaces as such.
"""
from __future__ import annotations


class HansaError(Exception):
    """Base of every error hansa raises on purpose; `http_status` is what an API answers with."""

    http_status = 400


class ConfigError(HansaError):
    """The configuration (file or environment) is invalid or incomplete."""


class InputError(HansaError):
    """A document, file or request the user gave us cannot be used (malformed, binary, empty...)."""


class BackendError(HansaError):
    """A real component (Neo4j, GDS, Milvus, the embedder, the LLM) is missing or refused the call."""

    http_status = 503


class VerificationError(HansaError):
    """A signature, envelope, key or publication failed verification: nothing was stored."""

    http_status = 403


class ConflictError(HansaError):
    """The request is well-formed but conflicts with stored state (replay, rollback, duplicate)."""

    http_status = 409


class UnsupportedMediaType(HansaError):
    """A request body sent as something other than the JSON the endpoint reads."""

    http_status = 415


class NotFoundError(HansaError):
    http_status = 404
