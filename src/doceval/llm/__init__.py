"""OpenAI-compatible LLM access: client factory, retries, bounded concurrency, response cache, accounting.

This is the only package that imports ``openai``. Everything that talks to a model (answerer, judge,
embedder) goes through it, so retries, caching, cost accounting and the budget behave the same everywhere.

- The ``openai`` client runs with ``max_retries=0``; the retry loop is ours, so every attempt is counted and
  the backoff is testable.
- Responses are cached in sqlite under a key that hashes every generation parameter (and the prompt
  template's id + hash). Failed calls are never cached.
- A :class:`Ledger` accumulates per-role usage (tokens, requests, cache hits, errors, cost) and enforces an
  optional budget *before* a call that could exceed it.
- The API key is read from the environment at client construction and never stored in configs, cache keys,
  results, log messages, exception messages or reprs.
"""

from __future__ import annotations

from doceval.llm.cache import ResponseCache, cache_key
from doceval.llm.chat import ChatClient, ChatResult, TemplatedChat, estimate_prompt_tokens
from doceval.llm.concurrency import iter_concurrent, map_concurrent
from doceval.llm.config import DEFAULT_API_KEY_ENV, LLMConfig, make_openai_client, resolve_api_key
from doceval.llm.embeddings import embed_texts
from doceval.llm.errors import LOCAL_PLACEHOLDER_KEY, BudgetExceeded, LLMError
from doceval.llm.ledger import Ledger, RoleUsage, usage_scope
from doceval.llm.prompts import PromptTemplate
from doceval.llm.retries import RetryPolicy, call_with_retries

__all__ = [
    "BudgetExceeded",
    "ChatClient",
    "ChatResult",
    "DEFAULT_API_KEY_ENV",
    "LLMConfig",
    "LLMError",
    "LOCAL_PLACEHOLDER_KEY",
    "Ledger",
    "PromptTemplate",
    "ResponseCache",
    "RetryPolicy",
    "RoleUsage",
    "TemplatedChat",
    "cache_key",
    "call_with_retries",
    "embed_texts",
    "estimate_prompt_tokens",
    "iter_concurrent",
    "make_openai_client",
    "map_concurrent",
    "resolve_api_key",
    "usage_scope",
]
