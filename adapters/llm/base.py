"""The LLM port: chat completion, nothing more. Prompts live with the stage that uses them.

`complete` returns the text; `chat` also returns the tokens spent, as the endpoint reported them
(`usage`), so budgets and traces carry real counts. A backend that cannot report usage inherits
`chat`, which estimates from words and says so (`estimated: True`).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Mapping, Sequence


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    estimated: bool  # True: counted as words, the endpoint reported no usage

    def tokens_json(self) -> dict[str, Any]:
        return {"prompt": self.prompt_tokens, "completion": self.completion_tokens,
                "total": self.prompt_tokens + self.completion_tokens, "estimated": self.estimated}


def estimate_tokens(messages: Sequence[Mapping[str, str]], text: str) -> tuple[int, int]:
    """Words as a stand-in for tokens (an under-estimate for BPE vocabularies): only used when an
    endpoint reports no usage, and then marked as estimated."""
    return sum(len(str(m.get("content", "")).split()) for m in messages), len(text.split())


class LLM(ABC):
    model_id: str

    @abstractmethod
    def complete(self, messages: Sequence[Mapping[str, str]], *, max_tokens: int = 512, temperature: float = 0.0) -> str:
        """The assistant's text. Raises BackendError on transport failure or timeout."""

    def chat(self, messages: Sequence[Mapping[str, str]], *, max_tokens: int = 512, temperature: float = 0.0) -> Completion:
        """The assistant's text and the tokens spent (estimated here; backends override with usage)."""
        return completion_of(self, messages, max_tokens=max_tokens, temperature=temperature)


def completion_of(llm: Any, messages: Sequence[Mapping[str, str]], *, max_tokens: int = 512,
                  temperature: float = 0.0) -> Completion:
    """`llm.chat(...)` when the object has it, else `llm.complete(...)` with estimated tokens: any
    object with a `complete` method (a test double of the port) can stand in for an LLM."""
    chat = getattr(type(llm), "chat", None)
    if chat is not None and chat is not LLM.chat:
        return llm.chat(messages, max_tokens=max_tokens, temperature=temperature)
    text = llm.complete(messages, max_tokens=max_tokens, temperature=temperature)
    prompt, completion = estimate_tokens(messages, text)
    return Completion(text, prompt, completion, estimated=True)
