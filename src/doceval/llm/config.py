"""LLM client configuration (one block per role) and the OpenAI client factory; the API key comes from the
environment only.
"""

from __future__ import annotations

import math
import operator
import os
import types
from collections.abc import Callable, Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Union, get_args, get_origin, get_type_hints
from urllib.parse import urlsplit

from doceval.common.redact import redact_url, register_secret, url_credentials
from doceval.errors import UsageError
from doceval.llm.errors import LOCAL_PLACEHOLDER_KEY

if TYPE_CHECKING:
    import openai

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"


# Keys of an answerer/judge block used by the answerer/judge factories, not by the client.
CONTROL_KEYS = ("name", "template")
_BOUNDS: dict[str, tuple[str, Callable[[Any, Any], bool]]] = {
    "ge": (">=", operator.ge),
    "gt": (">", operator.gt),
    "le": ("<=", operator.le),
}


def _base_type(hint: Any) -> Any:
    """``int | None`` -> int, ``Mapping[str, Any] | None`` -> Mapping."""
    options = get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)
    kind = next(a for a in options if a is not type(None))
    return get_origin(kind) or kind


def _is_a(value: Any, kind: Any) -> bool:
    """bool is not a number (``k: true`` is a typo, not 1); an int is a float."""
    if isinstance(value, bool):
        return kind is bool
    if kind is float:
        return isinstance(value, int | float) and not math.isnan(value)
    return isinstance(value, kind)


def _rules(default: Any = MISSING, **rules: Any) -> Any:
    """A field with its valid range (ge/gt/le) and an example, read by from_mapping below and by the config
    schema (doceval.config.schema), which validates the answerer/judge blocks with these very fields."""
    return field(default=default, metadata=rules)


@dataclass(frozen=True)
class LLMConfig:
    """Client and generation settings shared by the answerer and the judge (one instance per role)."""

    model: str = _rules(nonempty=True, example="gpt-4o-mini")
    base_url: str | None = _rules(None, example="http://127.0.0.1:11434/v1")
    api_key_env: str = _rules(DEFAULT_API_KEY_ENV, nonempty=True, example=DEFAULT_API_KEY_ENV)
    temperature: float = _rules(0.0, ge=0, le=2, example="0.0")
    max_tokens: int = _rules(512, ge=1, example="512")
    seed: int | None = None
    response_format: Mapping[str, Any] | None = None  # free-form: the API's own (config.schema.OPEN_MAPPINGS)
    timeout_s: float = _rules(60.0, gt=0, example="60")
    max_retries: int = _rules(5, ge=0, example="5")
    retry_base_delay_s: float = _rules(1.0, ge=0)
    retry_max_delay_s: float = _rules(30.0, ge=0)
    max_concurrency: int = _rules(8, ge=1, example="8")
    price_per_1k_prompt: float = _rules(0.0, ge=0)
    price_per_1k_completion: float = _rules(0.0, ge=0)
    # Providers quote prices per million tokens: set these instead of the per-1k ones (not both).
    price_per_1m_prompt: float | None = _rules(None, ge=0, example="0.15")
    price_per_1m_completion: float | None = _rules(None, ge=0, example="0.60")
    cache_path: str | None = "data/cache/llm.sqlite"  # null or "": no response cache

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], section: str) -> LLMConfig:
        """An LLMConfig from raw data: the client keys of an answerer/judge block (``section``), as composed or
        built in code; errors name ``section.key`` and the fix.

        The same rules as the config schema applies to a composed config (types from the annotations: a bool is
        not a number, an int is a float; ranges from the field metadata); ``name`` and ``template`` are ignored.
        """
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known - set(CONTROL_KEYS))
        if unknown:
            raise UsageError(
                f"{section}: unknown key(s) {', '.join(unknown)}; "
                f"allowed: {', '.join(sorted(known))}, {', '.join(CONTROL_KEYS)}"
            )
        if not data.get("model"):
            raise UsageError(f"{section}.model: required for an OpenAI-compatible model (e.g. gpt-4o-mini)")
        hints = get_type_hints(cls)
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name == "cache_path" and f.name in data and not data[f.name]:
                values[f.name] = None  # explicitly off
                continue
            if f.name not in data or data[f.name] is None:
                continue
            raw = data[f.name]
            kind = _base_type(hints[f.name])
            if not _is_a(raw, kind):
                shown = redact_url(raw) if isinstance(raw, str) else raw
                raise UsageError(f"{section}.{f.name}: invalid value {shown!r} (expected {kind.__name__})")
            for rule, (op, holds) in _BOUNDS.items():
                if rule in f.metadata and not holds(raw, f.metadata[rule]):
                    raise UsageError(f"{section}.{f.name}: must be {op} {f.metadata[rule]} (got {raw})")
            values[f.name] = float(raw) if kind is float else dict(raw) if kind is Mapping else raw
        for part in ("prompt", "completion"):
            per_1k, per_1m = values.get(f"price_per_1k_{part}"), values.get(f"price_per_1m_{part}")
            if per_1k and per_1m is not None:
                raise UsageError(
                    f"{section}.price_per_1k_{part}={per_1k:g} and {section}.price_per_1m_{part}={per_1m:g}: set one "
                    f"(a provider's price per million tokens goes in price_per_1m_{part}; per 1k it is 1000x smaller)"
                )
        return cls(**values)

    def cost_usd(self, prompt_tokens: float, completion_tokens: float) -> float:
        """What ``prompt_tokens`` and ``completion_tokens`` cost at the configured prices (per 1M when set, else
        per 1k; 0 when neither is)."""
        prompt = (
            self.price_per_1m_prompt / 1e6
            if self.price_per_1m_prompt is not None
            else (self.price_per_1k_prompt / 1e3)
        )
        completion = (
            self.price_per_1m_completion / 1e6
            if self.price_per_1m_completion is not None
            else (self.price_per_1k_completion / 1e3)
        )
        return prompt_tokens * prompt + completion_tokens * completion

    def public_dict(self) -> dict[str, Any]:
        """The config as recorded in a run (holds the key's env var name, never the key; the base_url's
        credentials masked)."""
        out = asdict(self)
        if self.base_url:
            out["base_url"] = redact_url(self.base_url)
        return out

    def __repr__(self) -> str:  # the generated one would show the base_url's credentials
        shown = ", ".join(f"{k}={v!r}" for k, v in self.public_dict().items())
        return f"{type(self).__name__}({shown})"


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
    import openai  # lazy: start-up budget (issue 26): ~0.7 s, and judge=none or answerer=extractive need none

    api_key = resolve_api_key(base_url, api_key_env)
    if api_key != LOCAL_PLACEHOLDER_KEY:
        register_secret(api_key)  # learned here: every writer and message masks it from now on
    if base_url:
        for credential in url_credentials(base_url):
            register_secret(credential)
    return openai.OpenAI(
        api_key=api_key,
        base_url=base_url or None,
        timeout=timeout_s,
        max_retries=0,
    )
