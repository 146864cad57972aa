"""Retrieve once, decide many: the top-K candidates of every golden entry with raw scores and no floor.

Any (floor, k <= K) is then evaluated exactly from this cache without opening the index, which is what makes
calibration sweeps fast and lets parallel sweep jobs run while the embedded Qdrant store allows one process.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from doceval.common.hints import rerun
from doceval.common.journal import Journal
from doceval.common.progress import iterate
from doceval.config import schema
from doceval.config.compose import SOURCE_CONF
from doceval.config.objects import config_dict
from doceval.config.validate import validate_block
from doceval.errors import UsageError
from doceval.harness.candidate_set import CandidateSet
from doceval.harness.retrieval_journal import in_entry_order, journal_answer, journal_for, resume_retrievals
from doceval.harness.stops import ErrorLimits, abandoned_stop, errors_stop
from doceval.index.build import check_index
from doceval.index.embed import make_embedder
from doceval.index.store import VectorStore, store_subdir
from doceval.index.store.search import search_record
from doceval.inputs.corpus import Corpus
from doceval.inputs.golden import GoldenEntry
from doceval.system.docchat.conversation import TurnQuery, follow_conversation, versions_by_library
from doceval.system.retrievers import Retriever, make_retriever, needs_index
from doceval.system.retrievers.bm25 import BM25Retriever
from doceval.system.retrievers.function import FunctionRetriever

if TYPE_CHECKING:
    from doceval.config.schema import Config

log = logging.getLogger(__name__)


def retriever_fingerprint(retriever: schema.Retriever) -> str:
    """16 hex digits of the retriever block as recorded (the cache key of the candidates)."""
    return hashlib.sha256(json.dumps(config_dict(retriever), sort_keys=True).encode()).hexdigest()[:16]


def route_pin(library: str, version: str, corpus: Corpus) -> str | None:
    """The router for one pin (a follow-up's is the pin its conversation moved to)."""
    if f"{library}@{version}" in corpus.partitions:
        return None
    if library in corpus.libraries:
        known = ", ".join(p.split("@", 1)[1] for p in corpus.pins if p.startswith(library + "@"))
        return f"router: {library} {version} is not indexed (indexed versions: {known})"
    return f"router: library {library!r} is not indexed"


def turn_queries(
    entries: Sequence[GoldenEntry], corpus: Corpus | None, rewrite: str, memory_reset: bool = False
) -> dict[str, TurnQuery]:
    """What doceval's agent retrieves for each turn of a conversation (entry id -> query and followed pin),
    from the questions alone: the pin starts at the conversation's starting pin and follows the versions of
    the corpus (without one, the golden set's pins); ``rewrite`` is ``memory.rewrite``. ``memory_reset``
    (``--memory-reset needs_memory``): a needs_memory turn is asked without the conversation's context.
    Single-question entries are absent: they are retrieved as they always were."""
    turns: dict[str, list[GoldenEntry]] = {}
    for entry in entries:
        if entry.conversation is not None:
            turns.setdefault(entry.conversation, []).append(entry)
    if not turns:
        return {}
    versions = versions_by_library(corpus.pins if corpus is not None else {e.pin for e in entries})
    out: dict[str, TurnQuery] = {}
    for conversation in turns.values():
        ordered = sorted(conversation, key=lambda e: e.turn)
        start = ordered[0].start_pin or (ordered[0].library, ordered[0].version)
        reset = [memory_reset and e.needs_memory for e in ordered]
        followed = follow_conversation([e.question for e in ordered], start, versions, rewrite, reset)
        for e, query, was_reset in zip(ordered, followed, reset, strict=True):
            # A reset turn is asked at the pin its probe carries: the starting pin, or for a standalone
            # rewrite (doceval.inputs.standalone) the turn's own.
            own = e.start_pin if was_reset and e.start_pin is not None else None
            out[e.id] = query if own is None else TurnQuery(query.query, *own)
    return out


def bm25_rankings(entries: Sequence[GoldenEntry], corpus: Corpus, depth: int) -> dict[str, list[str]]:
    """bm25's ranked document ids per entry (the second ranking the agreement and fused signals need), with
    the k1 and b of conf/retriever/bm25.yaml as doceval ships it, whatever retriever is configured."""
    block = shipped_bm25()
    bm25 = BM25Retriever(corpus, k1=float(block.k1), b=float(block.b))
    pins = set(corpus.pins)
    out: dict[str, list[str]] = {}
    for e in entries:
        pin = f"{e.library}@{e.version}"
        out[e.id] = (
            [d for d, _ in bm25.retrieve(e.question, e.library, e.version, depth)] if pin in pins else []
        )
    return out


@functools.cache
def shipped_bm25() -> schema.RetrieverBM25:
    """The ``retriever`` block of conf/retriever/bm25.yaml shipped with doceval (its defaults live there only)."""
    path = SOURCE_CONF / "retriever" / "bm25.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return validate_block(schema.RetrieverBM25, data, str(path), "retriever")


@contextlib.contextmanager
def open_retriever(cfg: Config, corpus: Corpus | None) -> Iterator[Retriever]:
    """The configured retriever; dense and hybrid open the index (checked against the corpus) for the block.
    A user's retriever function needs no corpus (``corpus`` None)."""
    retriever = cfg.retriever
    if not needs_index(retriever.name):
        yield make_retriever(retriever, corpus)
        return
    if corpus is None:
        raise UsageError(f"retriever={retriever.name} needs the docs corpus; run {rerun('docs')} first")
    index_dir = Path(cfg.paths.index)
    # The manifest is checked here; the store itself is verified as it opens (expect=), in one open.
    manifest = check_index(index_dir, corpus, cfg.store, verify_store=False)
    embedder = make_embedder(cfg.embedder, Path(cfg.paths.cache) / "embeddings.sqlite")
    if embedder.fingerprint != manifest["model"]:
        raise UsageError(
            f"{index_dir}: index built with {manifest['model']}, but embedder is {embedder.fingerprint}; "
            f"rerun {rerun('index')}"
        )
    subdir = store_subdir(cfg.store.name)
    store_path = index_dir / subdir if subdir else None
    with VectorStore(cfg.store, path=store_path, expect=manifest["partitions"]) as store:
        yield make_retriever(retriever, corpus, store=store, embedder=embedder)


def retrieve_all(
    entries: Sequence[GoldenEntry],
    retriever: Retriever,
    corpus: Corpus | None,
    depth: int,
    progress: bool = True,
    limits: ErrorLimits | None = None,
    turns: Mapping[str, TurnQuery] | None = None,
    remote: tuple[schema.EngineRay, Callable[[], Retriever]] | None = None,
    journal: Path | None = None,
) -> CandidateSet:
    """Top-``depth`` per entry, and the router's verdict (no router without a doceval corpus: the user's
    retriever sees every question). ``meta`` is left empty for the caller. ``turns``: a conversation turn's
    query and followed pin (:func:`turn_queries`), used in place of its question and labels.

    A user's retriever function is the system under test: whatever goes wrong in one call (an exception, a
    SystemExit, a timeout, a result of the wrong shape) is that entry's system error, and past ``limits``
    no further entry is asked. A built-in retriever's failure is doceval's own and propagates. ``remote``
    (engine=ray, a user's retriever only): the calls run on Ray actors, each building its retriever with the
    callable given (:mod:`doceval.harness.remote`). ``journal`` (a user's retriever only): its answers are
    journaled there, and those already there are not asked again (:mod:`doceval.harness.retrieval_journal`)."""
    limits = limits or ErrorLimits()
    user = isinstance(retriever, FunctionRetriever)
    out = CandidateSet({}, {}, {}, journal=journal if user else None)
    turns = turns or {}
    resume_retrievals(out.journal, entries, out, retriever)
    entries_asked = [e for e in entries if e.id not in out.ranked]
    with Journal(out.journal) as written:
        if user and remote is not None:
            # lazy: ray (~1 s) loads only for engine=ray
            from doceval.harness.remote import retrieve_on_ray

            asks = {e.id: turns.get(e.id) or TurnQuery(e.question, e.library, e.version) for e in entries}
            retrieve_on_ray(
                entries_asked, retriever, remote[1], asks, depth, remote[0], limits, progress, (out, written)
            )
        else:
            _retrieve_here(entries_asked, retriever, corpus, depth, progress, limits, turns, out, written)
    return in_entry_order(out, entries)


def _retrieve_here(
    entries: Sequence[GoldenEntry],
    retriever: Retriever,
    corpus: Corpus | None,
    depth: int,
    progress: bool,
    limits: ErrorLimits,
    turns: Mapping[str, TurnQuery],
    out: CandidateSet,
    written: Journal,
) -> None:
    """:func:`retrieve_all`'s loop in this process, filling ``out`` (and journaling a user's answers)."""
    # lazy: start-up (the user-system errors, ~60 ms, load only when retrieval runs live)
    from doceval.system.external.agents import system_error_text

    user = isinstance(retriever, FunctionRetriever)
    for entry in iterate(entries, f"retrieve ({retriever.name})", "q", enabled=progress):
        ask = turns.get(entry.id) or TurnQuery(entry.question, entry.library, entry.version)
        reason = None if corpus is None else route_pin(ask.library, ask.version, corpus)
        out.routed[entry.id] = reason
        start, t0 = time.time(), time.perf_counter()
        try:
            out.ranked[entry.id] = (
                [] if reason else retriever.retrieve(ask.query, ask.library, ask.version, depth)
            )
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - only the user's code: its exit code is never doceval's
            if not user:
                raise
            out.ranked[entry.id] = []
            out.errors[entry.id] = system_error_text(exc)
            log.warning("%s: %s", entry.id, out.errors[entry.id])
            out.stopped = errors_stop(len(out.errors), limits.max_errors) or abandoned_stop(
                retriever, limits.max_abandoned
            )
            if out.stopped is not None:
                log.error("stopping: %s", out.stopped)
                break
        finally:
            if user and not reason:
                out.timings[entry.id] = (start, time.perf_counter() - t0)
        if user and entry.id not in out.errors and written.active:
            journal_answer(written, entry.id, out.ranked[entry.id], out.timings.get(entry.id), retriever)


def _remote(
    cfg: Config, make: Callable[[], Retriever]
) -> tuple[schema.EngineRay, Callable[[], Retriever]] | None:
    """engine=ray: the engine and how each actor builds a user's retriever (from its config block, by import
    path; an object from the Python API travels pickled). None (engine=local): it is called here."""
    return (cfg.engine, make) if isinstance(cfg.engine, schema.EngineRay) else None


def compute_candidates(
    cfg: Config,
    corpus: Corpus | None,
    entries: Sequence[GoldenEntry],
    golden_path: Path,
    golden_md5: str,
    progress: bool = True,
    retriever: Retriever | None = None,
    limits: ErrorLimits | None = None,
    memory_reset: bool = False,
    standalone: bool = False,
    journal: tuple[Path | None, bool, bool] | None = None,
) -> CandidateSet:
    """Retrieve the top-K of every entry with the configured retriever (or ``retriever``, a user's object from
    the Python API) and record what they came from. A user's function's failures are per-entry errors
    (:func:`retrieve_all`, ``limits``). ``memory_reset``: needs_memory turns retrieved without the
    conversation's context (:func:`turn_queries`); ``standalone``: the entries carry their standalone rewrites
    (doceval.inputs.standalone), recorded so no other run takes these candidates for its own. ``journal``: (a
    sweep point's folder or None, --resume, --fresh) to journal a user's function
    (:mod:`doceval.harness.retrieval_journal`)."""
    depth = cfg.candidates_k
    if depth < cfg.k:
        raise UsageError(f"candidates_k={depth} must be >= k={cfg.k} (retrieve once, cut at any k <= K)")
    turns = turn_queries(entries, corpus, cfg.memory.rewrite, memory_reset)
    if retriever is not None:
        given = retriever
        cands = retrieve_all(
            entries,
            given,
            corpus,
            depth,
            progress,
            limits,
            turns,
            _remote(cfg, lambda: given),
            journal_for(cfg, given, entries, golden_md5, journal),
        )
    else:
        with open_retriever(cfg, corpus) as retriever:
            build: Callable[[], Retriever] = lambda: retriever  # noqa: E731 - a built-in one is never remote
            if isinstance(cfg.retriever, schema.RetrieverFunction):
                build = functools.partial(FunctionRetriever.from_config, cfg.retriever)
            cands = retrieve_all(
                entries,
                retriever,
                corpus,
                depth,
                progress,
                limits,
                turns,
                _remote(cfg, build),
                journal_for(cfg, retriever, entries, golden_md5, journal),
            )
    describe = getattr(retriever, "describe", None)
    index = None if corpus is None else _index_manifest(Path(cfg.paths.index))
    cands.meta = {
        "retriever": config_dict(cfg.retriever),
        "retriever_fingerprint": retriever_fingerprint(cfg.retriever),
        **score_range_record(retriever.score_range),
        "candidates_k": depth,
        "golden": str(golden_path),
        "golden_md5": golden_md5,
        "corpus_hash": None if corpus is None else corpus.manifest["content_hash"],
        "index_hash": None if index is None else str(index.get("content_hash")),
        # Which search produced them (store, exact or HNSW and its parameters): summaries and the report say it.
        "search": search_of(cfg.retriever, cfg.store),
        # Which embedder built the index (model, and the precision and device `auto` chose): the summary says it.
        "embedder": _embedder_of(cfg.retriever, index),
        "entries": len(entries),
        # A retriever returning bare ids has no scores: floors and calibration do not apply to it.
        "scored": getattr(retriever, "scored", True) is not False,
        "system": describe() if callable(describe) else {"retriever": cfg.retriever.name},
        # How conversation turns were retrieved (memory.rewrite); absent when the golden set has none.
        **({"rewrite": cfg.memory.rewrite} if turns else {}),
        # Needs_memory turns retrieved without their conversation's context (--memory-reset needs_memory).
        **({"memory_reset": "needs_memory"} if turns and memory_reset else {}),
        **({"standalone": True} if turns and standalone else {}),
    }
    return cands


UNBOUNDED = "a null bound: the retriever's scores have no bound on that side"


def score_range_record(bounds: Sequence[float]) -> dict[str, Any]:
    """The retriever's score range as strict JSON: an infinite bound (bm25's top, a user function's both) is
    null, with ``score_range_note`` saying what null means."""
    record = [float(b) if math.isfinite(b) else None for b in bounds]
    return {"score_range": record, **({"score_range_note": UNBOUNDED} if None in record else {})}


def score_range_of(meta: Mapping[str, Any]) -> tuple[float, float]:
    """``(low, high)`` from a candidate cache's metadata: null (or an older cache's -Infinity/Infinity) is no
    bound on that side."""
    low, high = meta["score_range"]
    return (-math.inf if low is None else float(low), math.inf if high is None else float(high))


def search_of(retriever: schema.Retriever, store: schema.Store) -> dict[str, Any] | None:
    if not needs_index(retriever.name):
        return None
    return search_record(store)


def _embedder_of(retriever: schema.Retriever, index: dict[str, Any] | None) -> dict[str, Any] | None:
    if index is None or not needs_index(retriever.name):
        return None
    return {"model": index.get("model"), **(index.get("embedder") or {})}


def _index_manifest(index_dir: Path) -> dict[str, Any] | None:
    manifest = index_dir / "manifest.json"
    if not manifest.is_file():
        return None
    recorded: dict[str, Any] = json.loads(manifest.read_text())
    return recorded
