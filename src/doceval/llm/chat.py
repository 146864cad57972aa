"""The chat client (one per role): cache, budget reservation, retries and usage accounting around one completion;
and TemplatedChat, what the OpenAI answerer and judge share.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from doceval.common.redact import redact_url
from doceval.llm.cache import ResponseCache, cache_key, open_cache, release_cache
from doceval.llm.config import LLMConfig, make_openai_client
from doceval.llm.errors import LLMError, _Malformed
from doceval.llm.ledger import Ledger
from doceval.llm.prompts import PromptTemplate
from doceval.llm.retries import RetryPolicy, call_with_retries


@dataclass(frozen=True)
class ChatResult:
    content: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None
    cached: bool
    cost_usd: float = 0.0


def estimate_prompt_tokens(messages: Sequence[Mapping[str, str]]) -> int:
    """A deliberately generous estimate for the budget: ~3 characters per token plus per-message overhead."""
    return sum(math.ceil(len(m.get("content", "")) / 3) + 8 for m in messages)


class ChatClient:
    """Chat completions for one role, with cache, retries, a concurrency bound and accounting.

    The concurrency bound is a semaphore around each HTTP attempt, so the number of requests in flight never
    exceeds ``cfg.max_concurrency`` however many threads call :meth:`complete`.
    """

    def __init__(
        self,
        cfg: LLMConfig,
        role: str,
        *,
        ledger: Ledger | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.cfg = cfg
        self.role = role
        self.ledger = ledger or Ledger()
        self._sleep = sleep
        self._client = make_openai_client(cfg.base_url, cfg.api_key_env, cfg.timeout_s)
        self._slots = threading.BoundedSemaphore(cfg.max_concurrency)
        self.cache: ResponseCache | None = open_cache(cfg.cache_path) if cfg.cache_path else None
        self.policy = RetryPolicy(cfg.max_retries, cfg.retry_base_delay_s, cfg.retry_max_delay_s)

    def __repr__(self) -> str:
        base_url = None if self.cfg.base_url is None else redact_url(self.cfg.base_url)
        return f"ChatClient(role={self.role!r}, model={self.cfg.model!r}, base_url={base_url!r})"

    def use_ledger(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def params(self, messages: Sequence[Mapping[str, str]], template_id: str | None = None) -> dict[str, Any]:
        """Every parameter that shapes the reply; the cache key is their hash."""
        return {
            "base_url": (self.cfg.base_url or "https://api.openai.com/v1").rstrip("/"),
            "model": self.cfg.model,
            "messages": [dict(m) for m in messages],
            "temperature": self.cfg.temperature,
            "max_tokens": self.cfg.max_tokens,
            "seed": self.cfg.seed,
            "response_format": dict(self.cfg.response_format) if self.cfg.response_format else None,
            "template": template_id,
        }

    def cost(self, prompt_tokens: float, completion_tokens: float) -> float:
        return self.cfg.cost_usd(prompt_tokens, completion_tokens)

    def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        template_id: str | None = None,
        cache_if: Callable[[str], bool] | None = None,
    ) -> ChatResult:
        """One chat completion; ``cache_if(content)`` False keeps a reply out of the cache (unparsable)."""
        params = self.params(messages, template_id)
        key = cache_key(params)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.ledger.record(self.role, cache_hits=1)
                return ChatResult(
                    content=str(hit["content"]),
                    prompt_tokens=int(hit.get("prompt_tokens", 0)),
                    completion_tokens=int(hit.get("completion_tokens", 0)),
                    finish_reason=hit.get("finish_reason"),
                    cached=True,
                )
            self.ledger.record(self.role, cache_misses=1)

        estimate = self.cost(estimate_prompt_tokens(messages), self.cfg.max_tokens)
        self.ledger.reserve(estimate)  # raises BudgetExceeded before anything is sent
        try:
            content, prompt_tokens, completion_tokens, finish = call_with_retries(
                lambda: self._send(params),
                self.policy,
                what=f"{self.role} call to {self.cfg.model}",
                sleep=self._sleep,
                on_attempt=lambda: self.ledger.record(self.role, requests=1),
                on_retry=lambda: self.ledger.record(self.role, retries=1),
            )
        except LLMError:
            self.ledger.record(self.role, errors=1)
            raise
        finally:
            self.ledger.release(estimate)
        cost = self.cost(prompt_tokens, completion_tokens)
        self.ledger.record(
            self.role, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost_usd=cost
        )
        if self.cache is not None and (cache_if is None or cache_if(content)):
            self.cache.put(
                key,
                {
                    "content": content,
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "finish_reason": finish,
                    "model": self.cfg.model,
                    # what `eval --dry-run` estimates completions from (llm.cache.observed_completions)
                    "template": template_id,
                },
            )
        return ChatResult(content, prompt_tokens, completion_tokens, finish, cached=False, cost_usd=cost)

    def _send(self, params: Mapping[str, Any]) -> tuple[str, int, int, str | None]:
        extra: dict[str, Any] = {}
        if params["seed"] is not None:
            extra["seed"] = params["seed"]
        if params["response_format"] is not None:
            extra["response_format"] = params["response_format"]
        with self._slots:
            try:
                resp = self._client.chat.completions.create(
                    model=params["model"],
                    messages=params["messages"],
                    temperature=params["temperature"],
                    max_tokens=params["max_tokens"],
                    timeout=self.cfg.timeout_s,
                    **extra,
                )
            except RecursionError:  # the client's JSON parser, on a reply nested 100k levels deep
                raise _Malformed("reply JSON nested too deep to read") from None
        choices = getattr(resp, "choices", None)
        if not choices or choices[0].message is None or choices[0].message.content is None:
            raise _Malformed("reply has no choices[0].message.content")
        usage = getattr(resp, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        return choices[0].message.content, prompt_tokens, completion_tokens, choices[0].finish_reason

    def close(self) -> None:
        if self.cache is not None:
            release_cache(self.cache)
            self.cache = None
        self._client.close()


class TemplatedChat:
    """What the OpenAI answerer and judge share: a config, a prompt template, and a chat client for one role."""

    def __init__(self, cfg: LLMConfig, template: PromptTemplate, role: str) -> None:
        self.cfg = cfg
        self.template = template
        self.client = ChatClient(cfg, role)

    def __repr__(self) -> str:  # never the key: only the model and template identify it
        return f"{type(self).__name__}(model={self.cfg.model!r}, template={self.template.template_id!r})"

    def use_ledger(self, ledger: Ledger) -> None:
        self.client.use_ledger(ledger)
