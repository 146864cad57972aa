"""OpenAI-compatible LLM access: client factory, retries, bounded concurrency, response cache, accounting.

This is the only module that imports ``openai``. Everything that talks to a model (answerer, judge,
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

import contextlib
import contextvars
import hashlib
import json
import logging
import math
import os
import random
import re
import sqlite3
import string
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, fields
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import numpy as np
import openai

from doceval.errors import UsageError

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

ROLES = ("answerer", "judge")
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
# Local servers (vLLM, Ollama, llama.cpp) ignore the key, but the client refuses to start without one.
LOCAL_PLACEHOLDER_KEY = "not-needed"


# ============================================================================================== errors


class LLMError(Exception):
    """A call that failed for good: a non-retryable error, or retries exhausted. The message is redacted."""

    def __init__(self, message: str, *, kind: str, attempts: int, status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind  # "rate_limit", "server", "timeout", "connection", "malformed", "client"
        self.attempts = attempts
        self.status = status


class BudgetExceeded(Exception):
    """Raised before a call whose estimated cost would take spending over the budget."""

    def __init__(self, spent_usd: float, estimate_usd: float, budget_usd: float) -> None:
        super().__init__(
            f"LLM budget of ${budget_usd:.4f} reached: ${spent_usd:.4f} spent or reserved, "
            f"the next call could cost up to ${estimate_usd:.4f}"
        )
        self.spent_usd = spent_usd
        self.estimate_usd = estimate_usd
        self.budget_usd = budget_usd


class _Malformed(Exception):
    """A 2xx reply whose body is not the expected shape (treated like a transient server fault)."""


_KEYLIKE = re.compile(r"(sk-|Bearer\s+)[A-Za-z0-9_\-.*]{4,}")


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Remove API keys from text: the given secrets verbatim, and anything shaped like ``sk-...``."""
    for secret in secrets:
        if secret and len(secret) >= 4 and secret != LOCAL_PLACEHOLDER_KEY:
            text = text.replace(secret, "***")
    return _KEYLIKE.sub(r"\1***", text)


# ============================================================================================== config

_CONFIG_CONTROL_KEYS = ("name", "template")  # used by the answerer/judge factories, not by the client


@dataclass(frozen=True)
class LLMConfig:
    """Client and generation settings shared by the answerer and the judge (one instance per role)."""

    model: str
    base_url: str | None = None
    api_key_env: str = DEFAULT_API_KEY_ENV
    temperature: float = 0.0
    max_tokens: int = 512
    seed: int | None = None
    response_format: Mapping[str, Any] | None = None
    timeout_s: float = 60.0
    max_retries: int = 5
    retry_base_delay_s: float = 1.0
    retry_max_delay_s: float = 30.0
    max_concurrency: int = 8
    price_per_1k_prompt: float = 0.0
    price_per_1k_completion: float = 0.0
    cache_path: str | None = "data/cache/llm.sqlite"

    @classmethod
    def from_mapping(cls, cfg: Mapping[str, Any], section: str) -> LLMConfig:
        """Validate a config block (e.g. ``answerer``); errors name ``section.key`` and the fix."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(cfg) - known - set(_CONFIG_CONTROL_KEYS))
        if unknown:
            raise UsageError(
                f"{section}: unknown key(s) {', '.join(unknown)}; "
                f"allowed: {', '.join(sorted(known))}, name, template"
            )
        if not cfg.get("model"):
            raise UsageError(f"{section}.model: required for an OpenAI-compatible model (e.g. gpt-4o-mini)")
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name == "cache_path" and f.name in cfg and not cfg[f.name]:
                values[f.name] = None  # explicitly off
                continue
            if f.name not in cfg or cfg[f.name] is None:
                continue
            raw = cfg[f.name]
            try:
                if f.name in ("temperature", "timeout_s", "retry_base_delay_s", "retry_max_delay_s") or (
                    f.name.startswith("price_")
                ):
                    values[f.name] = float(raw)
                elif f.name in ("max_tokens", "seed", "max_retries", "max_concurrency"):
                    if isinstance(raw, bool) or int(raw) != raw:
                        raise ValueError(raw)
                    values[f.name] = int(raw)
                elif f.name == "response_format":
                    if not isinstance(raw, Mapping):
                        raise ValueError(raw)
                    values[f.name] = dict(raw)
                else:
                    values[f.name] = str(raw)
            except (TypeError, ValueError):
                raise UsageError(f"{section}.{f.name}: invalid value {raw!r} (expected {f.type})") from None
        out = cls(**values)
        for name in ("max_tokens", "max_concurrency"):
            if getattr(out, name) < 1:
                raise UsageError(f"{section}.{name}: must be >= 1 (got {getattr(out, name)})")
        for name in ("max_retries", "timeout_s", "price_per_1k_prompt", "price_per_1k_completion"):
            if getattr(out, name) < 0:
                raise UsageError(f"{section}.{name}: must be >= 0 (got {getattr(out, name)})")
        return out

    def public_dict(self) -> dict[str, Any]:
        """The config as recorded in a run (holds the key's env var name, never the key)."""
        return asdict(self)


def _uses_openai_host(base_url: str | None) -> bool:
    if not base_url:
        return True
    host = (urlsplit(base_url).hostname or "").lower()
    return host == "openai.com" or host.endswith(".openai.com")


def resolve_api_key(base_url: str | None, api_key_env: str = DEFAULT_API_KEY_ENV) -> str:
    """The key from ``$api_key_env``; a placeholder for local servers; a UsageError for api.openai.com."""
    key = os.environ.get(api_key_env, "")
    if key:
        return key
    if _uses_openai_host(base_url):
        raise UsageError(
            f"the environment variable {api_key_env} is not set; export your API key there "
            "(or point base_url at a local OpenAI-compatible server, which needs no key)"
        )
    return LOCAL_PLACEHOLDER_KEY


def make_openai_client(
    base_url: str | None, api_key_env: str = DEFAULT_API_KEY_ENV, timeout_s: float = 60.0
) -> openai.OpenAI:
    """An ``openai.OpenAI`` client with its own retries off (ours are counted and testable)."""
    return openai.OpenAI(
        api_key=resolve_api_key(base_url, api_key_env),
        base_url=base_url or None,
        timeout=timeout_s,
        max_retries=0,
    )


# ============================================================================================== prompts


@dataclass(frozen=True)
class PromptTemplate:
    """A ``$placeholder`` template (``string.Template``) with optional ``[system]`` / ``[user]`` sections.

    ``template_id`` (file name + content hash) is part of the cache key: an edited template misses the cache.
    """

    name: str
    text: str

    @property
    def template_id(self) -> str:
        return f"{self.name}:{hashlib.sha256(self.text.encode()).hexdigest()[:16]}"

    @classmethod
    def load(cls, name_or_path: str) -> PromptTemplate:
        """A shipped template's bare name (``answer.txt``), else a file path (``./answer.txt`` for a local one).

        A bare name prefers the shipped file, so a stray file of that name in the working directory cannot
        silently replace the prompt.
        """
        path = Path(name_or_path)
        if "/" not in name_or_path and os.sep not in name_or_path:
            shipped = resources.files("doceval").joinpath("prompts", name_or_path)
            if shipped.is_file():
                return cls(name_or_path, shipped.read_text(encoding="utf-8"))
        if path.is_file():
            return cls(path.name, path.read_text(encoding="utf-8"))
        raise UsageError(
            f"template {name_or_path!r}: not a file and not a shipped template "
            "(shipped: answer.txt, judge.txt)"
        )

    def render(self, **values: str) -> list[dict[str, str]]:
        try:
            text = string.Template(self.text).substitute(values)
        except KeyError as exc:
            raise UsageError(
                f"template {self.name}: unknown placeholder ${exc.args[0]}; available: "
                + ", ".join(f"${k}" for k in sorted(values))
            ) from None
        except ValueError as exc:  # a lone '$'
            raise UsageError(f"template {self.name}: {exc}; write a literal dollar sign as $$") from None
        sections = re.split(r"^\[(system|user)\]\s*$", text, flags=re.M)
        if len(sections) == 1:
            return [{"role": "user", "content": text.strip()}]
        messages = []
        for role, content in zip(sections[1::2], sections[2::2], strict=True):
            if content.strip():
                messages.append({"role": role, "content": content.strip()})
        return messages


# ============================================================================================== ledger


@dataclass
class RoleUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0  # HTTP attempts sent, retries included
    retries: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    errors: int = 0  # calls that failed for good
    cost_usd: float = 0.0

    def add(self, **deltas: float) -> None:
        for key, value in deltas.items():
            setattr(self, key, getattr(self, key) + value)

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


_SCOPE: contextvars.ContextVar[dict[str, RoleUsage] | None] = contextvars.ContextVar(
    "doceval_llm_scope", default=None
)


@contextlib.contextmanager
def usage_scope() -> Iterator[dict[str, RoleUsage]]:
    """Collect the usage of the LLM calls made in this block by this thread (per-entry accounting)."""
    scope: dict[str, RoleUsage] = {}
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


class Ledger:
    """Thread-safe per-role usage totals plus an optional budget in USD.

    Before a call, :meth:`reserve` holds the call's worst-case cost (estimated prompt tokens + max_tokens);
    the reservation is released when the call settles, so concurrent calls cannot overshoot together.
    """

    def __init__(self, budget_usd: float | None = None, spent_usd: float = 0.0) -> None:
        self.budget_usd = budget_usd
        self._spent_before = spent_usd  # e.g. cost of entries resumed from a journal
        self._reserved = 0.0
        self._roles: dict[str, RoleUsage] = {}
        self._lock = threading.Lock()

    def record(self, role: str, **deltas: float) -> None:
        with self._lock:
            self._roles.setdefault(role, RoleUsage()).add(**deltas)
        scope = _SCOPE.get()
        if scope is not None:
            scope.setdefault(role, RoleUsage()).add(**deltas)

    @property
    def spent_usd(self) -> float:
        with self._lock:
            return self._spent_before + sum(u.cost_usd for u in self._roles.values())

    def reserve(self, estimate_usd: float) -> None:
        with self._lock:
            if self.budget_usd is not None:
                committed = (
                    self._spent_before + sum(u.cost_usd for u in self._roles.values()) + self._reserved
                )
                if committed + estimate_usd > self.budget_usd + 1e-12:
                    raise BudgetExceeded(committed, estimate_usd, self.budget_usd)
            self._reserved += estimate_usd

    def release(self, estimate_usd: float) -> None:
        with self._lock:
            self._reserved = max(0.0, self._reserved - estimate_usd)

    def snapshot(self) -> dict[str, dict[str, float]]:
        with self._lock:
            return {role: usage.as_dict() for role, usage in sorted(self._roles.items())}

    def cache_stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "hits": sum(u.cache_hits for u in self._roles.values()),
                "misses": sum(u.cache_misses for u in self._roles.values()),
            }


# ============================================================================================== cache


def cache_key(params: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of every generation parameter."""
    canonical = json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ResponseCache:
    """Content-addressed sqlite cache of successful completions (``key -> JSON``), shared across threads."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path), timeout=30, check_same_thread=False)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")  # readers in other processes don't block writers
            # No fsync per commit: a cache that loses its last entries on power loss costs only a re-ask,
            # while an fsync under the lock would serialise every concurrent call for milliseconds.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS responses "
                "(key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL)"
            )
            self._db.commit()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
        value: dict[str, Any] = json.loads(row[0])
        return value

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses (key, value, created) VALUES (?, ?, ?)",
                (key, json.dumps(value, ensure_ascii=False), time.time()),
            )
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses}

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r})"


# ============================================================================================== retries


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 5
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Exponential backoff with jitter (50-100% of the step), at least the server's Retry-After."""
        step = min(self.max_delay_s, self.base_delay_s * (2**attempt))
        delay = step * (0.5 + random.random() / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_delay_s))
        return delay


def _classify(exc: BaseException) -> tuple[str, int | None] | None:
    """(kind, status) for retryable failures, None for failures a retry cannot fix."""
    if isinstance(exc, openai.APITimeoutError):
        return "timeout", None
    if isinstance(exc, openai.APIConnectionError):
        return "connection", None
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if status == 429:
            return "rate_limit", status
        if status >= 500 or status == 408:
            return "server", status
        return None
    if isinstance(exc, json.JSONDecodeError | openai.APIResponseValidationError | _Malformed):
        return "malformed", None
    return None


def _retry_after(exc: BaseException) -> float | None:
    if not isinstance(exc, openai.APIStatusError):
        return None
    value = exc.response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _describe(exc: BaseException, secrets: Sequence[str]) -> str:
    status = getattr(exc, "status_code", None)
    head = type(exc).__name__ + (f" (HTTP {status})" if status else "")
    return redact(f"{head}: {str(exc)[:300]}", secrets)


def call_with_retries(
    call: Callable[[], T],
    policy: RetryPolicy,
    *,
    what: str,
    secrets: Sequence[str] = (),
    sleep: Callable[[float], None] = time.sleep,
    on_attempt: Callable[[], None] | None = None,
    on_retry: Callable[[], None] | None = None,
) -> T:
    """Run ``call``, retrying 429, 5xx, timeouts, connection errors and malformed bodies.

    Raises :class:`LLMError` (redacted) when retries run out or the error is one a retry cannot fix.
    """
    attempt = 0
    while True:
        if on_attempt:
            on_attempt()
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 - classified below; unknown errors are re-raised
            kind_status = _classify(exc)
            if kind_status is None:
                if isinstance(exc, openai.OpenAIError):
                    raise LLMError(
                        f"{what} failed: {_describe(exc, secrets)}",
                        kind="client",
                        attempts=attempt + 1,
                        status=getattr(exc, "status_code", None),
                    ) from None  # the original may quote a (masked) key
                raise
            kind, status = kind_status
            if attempt >= policy.max_retries:
                raise LLMError(
                    f"{what} failed after {attempt + 1} attempt(s): {_describe(exc, secrets)}",
                    kind=kind,
                    attempts=attempt + 1,
                    status=status,
                ) from None
            delay = policy.delay(attempt, _retry_after(exc))
            log.warning(
                "%s: %s; retry %d/%d in %.2fs",
                what,
                _describe(exc, secrets),
                attempt + 1,
                policy.max_retries,
                delay,
            )
            if on_retry:
                on_retry()
            sleep(delay)
            attempt += 1


# ============================================================================================== concurrency


def iter_concurrent(
    fn: Callable[[T], R], items: Iterable[T], max_concurrency: int
) -> Generator[tuple[int, R], None, None]:
    """Yield ``(index, fn(item))`` in completion order with at most ``max_concurrency`` calls in flight.

    Items are submitted lazily, so closing the iterator early (budget stop, error) starts nothing new; calls
    already in flight finish before the iterator closes. An exception from ``fn`` propagates.
    """
    if max_concurrency <= 1:
        for i, item in enumerate(items):
            yield i, fn(item)
        return
    source = iter(enumerate(items))
    with ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="doceval-llm") as pool:
        pending: dict[Future[R], int] = {}

        def fill() -> None:
            while len(pending) < max_concurrency:
                nxt = next(source, None)
                if nxt is None:
                    return
                pending[pool.submit(fn, nxt[1])] = nxt[0]

        fill()
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                index = pending.pop(fut)
                yield index, fut.result()
            fill()


def map_concurrent(fn: Callable[[T], R], items: Iterable[T], max_concurrency: int) -> list[R]:
    """``[fn(x) for x in items]`` on a thread pool of ``max_concurrency``, results in input order."""
    results: dict[int, R] = {}
    with contextlib.closing(iter_concurrent(fn, items, max_concurrency)) as it:
        for index, value in it:
            results[index] = value
    return [results[i] for i in range(len(results))]


# ============================================================================================== chat


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
        self.cache = ResponseCache(cfg.cache_path) if cfg.cache_path else None
        self.policy = RetryPolicy(cfg.max_retries, cfg.retry_base_delay_s, cfg.retry_max_delay_s)

    def __repr__(self) -> str:
        return f"ChatClient(role={self.role!r}, model={self.cfg.model!r}, base_url={self.cfg.base_url!r})"

    def use_ledger(self, ledger: Ledger) -> None:
        self.ledger = ledger

    @property
    def _secrets(self) -> list[str]:
        return [str(self._client.api_key)]

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
        return (
            prompt_tokens * self.cfg.price_per_1k_prompt
            + completion_tokens * self.cfg.price_per_1k_completion
        ) / 1000.0

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
                secrets=self._secrets,
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
            resp = self._client.chat.completions.create(
                model=params["model"],
                messages=params["messages"],
                temperature=params["temperature"],
                max_tokens=params["max_tokens"],
                timeout=self.cfg.timeout_s,
                **extra,
            )
        choices = getattr(resp, "choices", None)
        if not choices or choices[0].message is None or choices[0].message.content is None:
            raise _Malformed("reply has no choices[0].message.content")
        usage = getattr(resp, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        return choices[0].message.content, prompt_tokens, completion_tokens, choices[0].finish_reason

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
        self._client.close()


# ============================================================================================== embeddings


def embed_texts(
    client_cfg: Mapping[str, Any], model: str, texts: Sequence[str], batch_size: int = 64
) -> np.ndarray:
    """Embed ``texts`` with an OpenAI-compatible ``/v1/embeddings`` endpoint: float32 (n, dim), L2-normalised.

    ``client_cfg`` keys used (others are ignored): base_url, api_key_env, timeout_s, max_retries,
    retry_base_delay_s, retry_max_delay_s, max_concurrency (batches in flight), dim (for an empty input).
    """
    if not texts:
        return np.zeros((0, int(client_cfg.get("dim") or 0)), dtype=np.float32)
    if batch_size < 1:
        raise UsageError(f"embedder.batch_size: must be >= 1 (got {batch_size})")
    base_url = client_cfg.get("base_url") or None
    client = make_openai_client(
        base_url,
        str(client_cfg.get("api_key_env") or DEFAULT_API_KEY_ENV),
        float(client_cfg.get("timeout_s") or 60.0),
    )
    policy = RetryPolicy(
        int(client_cfg.get("max_retries", 5)),
        float(client_cfg.get("retry_base_delay_s", 1.0)),
        float(client_cfg.get("retry_max_delay_s", 30.0)),
    )
    secrets = [str(client.api_key)]
    batches = [list(texts[i : i + batch_size]) for i in range(0, len(texts), batch_size)]

    def one(batch: list[str]) -> np.ndarray:
        def send() -> np.ndarray:
            resp = client.embeddings.create(model=model, input=batch)
            data = sorted(resp.data, key=lambda d: d.index)  # servers may return any order
            if [d.index for d in data] != list(range(len(batch))):
                raise _Malformed(f"expected {len(batch)} embeddings indexed 0..{len(batch) - 1}")
            return np.asarray([d.embedding for d in data], dtype=np.float32)

        return call_with_retries(send, policy, what=f"embedding call to {model}", secrets=secrets)

    try:
        parts = map_concurrent(one, batches, int(client_cfg.get("max_concurrency") or 4))
    finally:
        client.close()
    vectors = np.concatenate(parts, axis=0)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32)


__all__ = [
    "ROLES",
    "BudgetExceeded",
    "ChatClient",
    "ChatResult",
    "LLMConfig",
    "LLMError",
    "Ledger",
    "PromptTemplate",
    "ResponseCache",
    "RetryPolicy",
    "RoleUsage",
    "cache_key",
    "call_with_retries",
    "embed_texts",
    "estimate_prompt_tokens",
    "iter_concurrent",
    "make_openai_client",
    "map_concurrent",
    "redact",
    "resolve_api_key",
    "usage_scope",
]


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
