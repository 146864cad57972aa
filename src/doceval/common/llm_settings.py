"""The LLM client settings of one role (the answerer's or the judge's), declared once: their keys, types and
valid ranges. Below both the configuration and the LLM client: :mod:`doceval.config.schema` validates an openai
answerer/judge block (and a ``--llm`` file) with these very fields, and :mod:`doceval.llm` runs a client from
them, so ``doceval.llm`` never imports ``doceval.config``.

No field has a default: every value comes from conf/ (``conf/answerer/openai.yaml``, ``conf/judge/openai.yaml``),
composed and validated before an LLMConfig is built. Fields are declared with the schema's own ``spec``
(:mod:`doceval.common.field_spec`: ``ge``/``gt``/``le``, ``nonempty``, ``example``, and ``not_with``: a key that
must stay unset, or 0, when this one is set).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from doceval.common.field_spec import spec
from doceval.common.redact import redact_url


def _per_million(part: str) -> str:
    return f"a provider's price per million tokens goes in price_per_1m_{part}; per 1k it is 1000x smaller"


@dataclass(frozen=True)
class LLMConfig:
    """Client and generation settings shared by the answerer and the judge (one instance per role)."""

    model: str = spec(nonempty=True, example="gpt-4o-mini")
    base_url: str | None = spec(example="http://127.0.0.1:11434/v1")  # null: api.openai.com
    api_key_env: str = spec(nonempty=True, example="OPENAI_API_KEY")
    temperature: float = spec(ge=0, le=2, example="0.0")
    max_tokens: int = spec(ge=1, example="512")
    seed: int | None = spec()
    # Free-form: the API's own options (listed in doceval.config.schema.OPEN_MAPPINGS).
    response_format: Mapping[str, Any] | None = spec()
    timeout_s: float = spec(gt=0, example="60")
    max_retries: int = spec(ge=0, example="5")
    retry_base_delay_s: float = spec(ge=0, example="1.0")
    retry_max_delay_s: float = spec(ge=0, example="30.0")
    max_concurrency: int = spec(ge=1, example="8")
    price_per_1k_prompt: float = spec(ge=0, example="0.0")
    price_per_1k_completion: float = spec(ge=0, example="0.0")
    # Providers quote prices per million tokens: set these instead of the per-1k ones (not both).
    price_per_1m_prompt: float | None = spec(
        ge=0, example="0.15", not_with="price_per_1k_prompt", why=_per_million("prompt")
    )
    price_per_1m_completion: float | None = spec(
        ge=0, example="0.60", not_with="price_per_1k_completion", why=_per_million("completion")
    )
    cache_path: str | None = spec(example="data/cache/llm.sqlite")  # null or "": no response cache

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
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.response_format is not None:  # a read-only mapping once built: recorded as a plain one
            out["response_format"] = dict(self.response_format)
        if self.base_url:
            out["base_url"] = redact_url(self.base_url)
        return out

    def __repr__(self) -> str:  # the generated one would show the base_url's credentials
        shown = ", ".join(f"{k}={v!r}" for k, v in self.public_dict().items())
        return f"{type(self).__name__}({shown})"
