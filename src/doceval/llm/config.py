"""config."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any
from urllib.parse import urlsplit

import openai

from doceval.errors import UsageError
from doceval.llm.errors import LOCAL_PLACEHOLDER_KEY

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"


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
