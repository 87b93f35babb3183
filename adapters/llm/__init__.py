"""The LLM port: any OpenAI-compatible endpoint, or none (every stage has an extractive path)."""
from hansa.adapters.llm.base import LLM

__all__ = ["LLM", "open_llm"]


def open_llm(cfg):  # cfg: hansa.core.config.Config -> LLM | None
    """None when no endpoint is configured: callers then use their extractive/NLP mode."""
    if not cfg.llm.base_url:
        return None
    from hansa.adapters.llm.openai_compat import OpenAICompatibleLLM

    return OpenAICompatibleLLM(cfg.llm.base_url, model=cfg.llm.model, api_key=cfg.llm.api_key, timeout_s=cfg.llm.timeout_s)
