"""The LLM port: chat completion, nothing more. Prompts live with the stage that uses them."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Mapping, Sequence


class LLM(ABC):
    model_id: str

    @abstractmethod
    def complete(self, messages: Sequence[Mapping[str, str]], *, max_tokens: int = 512, temperature: float = 0.0) -> str:
        """The assistant's text. Raises BackendError on transport failure or timeout."""
