"""Stage: synthesize — the fused evidence written as an answer by an LLM, when one is configured.

Contract: `synthesize_answer(llm, request, fused) -> Synthesis` (gateway.query.synthesis): with no LLM
the extractive answer stands and nothing is recorded; with one, the model sees only the fused
sentences, every sentence it writes is checked against the cited evidence, and the extractive
answer stands when none survives, when the LLM fails, or when the query's token budget cannot pay
for the prompt. The trace's `synthesis` says which answer was used, what was dropped and the
tokens spent (the endpoint's `usage`, or words marked `estimated`); the engine times it as the
`synthesize` stage and counts its tokens in `budget.spent.tokens`.

Why here and not in the HTTP adapter: `hansa eval`, the CLI and every in-process caller get the
same answer the HTTP API serves, and a token budget is enforced where the other budgets are.
"""
from __future__ import annotations

from typing import Any

from hansa.gateway.query.request import QueryRequest
from hansa.gateway.query.fusion import FusedAnswer
from hansa.gateway.query.synthesis import Synthesis, synthesize


def synthesize_answer(llm: Any, request: QueryRequest, fused: FusedAnswer) -> Synthesis:
    return synthesize(llm, request.question, fused, token_budget=request.budget.tokens)


def tokens_spent(synthesis: Synthesis | None) -> int:
    tokens = (synthesis.trace.get("tokens") or {}) if synthesis is not None else {}
    return int(tokens.get("total", tokens.get("prompt", 0) + tokens.get("completion", 0)))
