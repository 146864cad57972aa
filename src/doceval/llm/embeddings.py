"""Embeddings through an OpenAI-compatible endpoint (the `embedder=openai` option), batched, with the same
retries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np

from doceval.errors import UsageError
from doceval.llm.concurrency import map_concurrent
from doceval.llm.config import DEFAULT_API_KEY_ENV, make_openai_client
from doceval.llm.errors import _Malformed
from doceval.llm.retries import RetryPolicy, call_with_retries

T = TypeVar("T")

# What an unset (None) setting of embed_texts means.
_TIMEOUT_S = 60.0
_MAX_RETRIES = 5
_RETRY_BASE_DELAY_S = 1.0
_RETRY_MAX_DELAY_S = 30.0
_MAX_CONCURRENCY = 4  # batches in flight


def _or(value: T | None, fallback: T) -> T:
    return fallback if value is None else value


def embed_texts(
    model: str,
    texts: Sequence[str],
    batch_size: int = 64,
    *,
    base_url: str | None = None,
    api_key_env: str | None = None,
    dim: int | None = None,
    timeout_s: float | None = None,
    max_retries: int | None = None,
    retry_base_delay_s: float | None = None,
    retry_max_delay_s: float | None = None,
    max_concurrency: int | None = None,
) -> np.ndarray:
    """Embed ``texts`` with ``model`` on an OpenAI-compatible ``/v1/embeddings`` endpoint: float32 (n, dim),
    L2-normalised.

    The client settings are the ``embedder`` block's; None (unset) is the default of this module: base_url
    api.openai.com, api_key_env $OPENAI_API_KEY, timeout_s 60, max_retries 5, retry delays 1 s to 30 s,
    max_concurrency 4 batches in flight, dim 0 (only used for an empty input).
    """
    if not texts:
        return np.zeros((0, _or(dim, 0)), dtype=np.float32)
    if batch_size < 1:
        raise UsageError(f"embedder.batch_size: must be >= 1 (got {batch_size})")
    client = make_openai_client(
        base_url or None, api_key_env or DEFAULT_API_KEY_ENV, float(_or(timeout_s, _TIMEOUT_S))
    )
    policy = RetryPolicy(
        _or(max_retries, _MAX_RETRIES),
        float(_or(retry_base_delay_s, _RETRY_BASE_DELAY_S)),
        float(_or(retry_max_delay_s, _RETRY_MAX_DELAY_S)),
    )
    batches = [list(texts[i : i + batch_size]) for i in range(0, len(texts), batch_size)]

    def one(batch: list[str]) -> np.ndarray:
        def send() -> np.ndarray:
            resp = client.embeddings.create(model=model, input=batch)
            data = sorted(resp.data, key=lambda d: d.index)  # servers may return any order
            if [d.index for d in data] != list(range(len(batch))):
                raise _Malformed(f"expected {len(batch)} embeddings indexed 0..{len(batch) - 1}")
            return np.asarray([d.embedding for d in data], dtype=np.float32)

        return call_with_retries(send, policy, what=f"embedding call to {model}")

    try:
        parts = map_concurrent(one, batches, _or(max_concurrency, _MAX_CONCURRENCY))
    finally:
        client.close()
    vectors = np.concatenate(parts, axis=0)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32)
