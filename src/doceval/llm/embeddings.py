"""Embeddings through an OpenAI-compatible endpoint (the `embedder=openai` option), batched, with the same
retries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from doceval.errors import UsageError
from doceval.llm.concurrency import map_concurrent
from doceval.llm.config import DEFAULT_API_KEY_ENV, make_openai_client
from doceval.llm.errors import _Malformed
from doceval.llm.retries import RetryPolicy, call_with_retries


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
        parts = map_concurrent(one, batches, int(client_cfg.get("max_concurrency") or 4))
    finally:
        client.close()
    vectors = np.concatenate(parts, axis=0)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32)
