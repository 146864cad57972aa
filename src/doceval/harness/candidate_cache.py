"""The candidate cache read back: what the retrieve stage wrote (the write side is in
:mod:`doceval.harness.candidates`), loaded whole or refused as damaged, and checked against what a run needs
(retriever, corpus, index, golden set, depth, follow-up rewrites) before any number is computed from it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from doceval.common.hints import rerun, stage_command
from doceval.common.io import iter_jsonl, read_json
from doceval.config import schema
from doceval.config.objects import config_dict
from doceval.errors import UsageError
from doceval.harness.candidate_set import BM25_RANKINGS, CANDIDATES, META, CandidateSet
from doceval.harness.candidates import retriever_fingerprint, search_of
from doceval.inputs.corpus import Corpus
from doceval.inputs.golden import GoldenEntry
from doceval.system.retrievers import Ranked, needs_index

if TYPE_CHECKING:
    pass


def load_candidates(runs_dir: Path, name: str = CANDIDATES) -> CandidateSet:
    """The candidate cache as the retrieve stage wrote it. It is an output: a damaged file (a line cut short, a
    record of the wrong shape) means rerun the stage, never edit it. Whether it is whole and matches what is
    evaluated is :func:`check_candidates`' job. ``name=EXACT``: the exact-search twin of an approximate search."""
    folder = runs_dir / "candidates"
    command = stage_command("retrieve")
    meta = read_json(folder / META, "candidate cache metadata", rerun=command)
    if not isinstance(meta, dict) or not isinstance(meta.get("candidates_k"), int):
        raise UsageError(f"{folder / META}: not candidate cache metadata; rerun `{command}`")
    path = folder / name
    if not path.is_file():
        raise UsageError(f"{path}: candidate cache not found; rerun `{command}`")
    ranked: dict[str, Ranked] = {}
    routed: dict[str, str | None] = {}
    for lineno, rec in iter_jsonl(path, rerun=command):
        try:
            ranked[str(rec["id"])] = [(str(d), float(s)) for d, s in rec["candidates"]]
            router = rec.get("router")
            routed[str(rec["id"])] = None if router is None else str(router)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise UsageError(
                f"{path}:{lineno}: not a candidate record ({type(exc).__name__}: {exc}); the cache is damaged; "
                f"rerun `{command}`"
            ) from exc
    bm25 = _load_bm25(folder / BM25_RANKINGS, command) if name == CANDIDATES else None
    return CandidateSet(meta, ranked, routed, bm25=bm25)


def _load_bm25(path: Path, command: str) -> dict[str, list[str]] | None:
    """The cached bm25 rankings, or None when this cache has none (written before they were cached)."""
    if not path.is_file():
        return None
    out: dict[str, list[str]] = {}
    for lineno, rec in iter_jsonl(path, rerun=command):
        if not isinstance(rec, dict) or not isinstance(rec.get("ranked"), list) or "id" not in rec:
            raise UsageError(
                f"{path}:{lineno}: not a bm25 ranking record; the cache is damaged; rerun `{command}`"
            )
        out[str(rec["id"])] = [str(d) for d in rec["ranked"]]
    return out


def _check_turn_queries(
    cands: CandidateSet, rewrite: str | None, memory_reset: bool, standalone: bool = False
) -> None:
    """Conversation turns retrieved with another query rewrite, with(out) the reset of needs_memory turns, or
    with(out) their standalone rewrites, are another system's candidates."""
    if bool(cands.meta.get("standalone")) != standalone:
        raise UsageError(
            "candidate cache retrieved needs_memory turns "
            f"{'by' if cands.meta.get('standalone') else 'without'} their standalone rewrites, and this run asks "
            f"them {'so' if standalone else 'otherwise'} (--memory-reset standalone); rerun {rerun('retrieve')}"
        )
    cached_reset = cands.meta.get("memory_reset") == "needs_memory"
    if cached_reset != memory_reset:
        raise UsageError(
            "candidate cache retrieved needs_memory turns "
            f"{'without' if cached_reset else 'with'} their conversation's context, and this run asks them "
            f"{'without' if memory_reset else 'with'} it (--memory-reset); rerun {rerun('retrieve')}"
        )
    if rewrite is not None and cands.meta.get("rewrite") != rewrite:
        raise UsageError(
            f"candidate cache retrieved conversation turns with memory.rewrite={cands.meta.get('rewrite')}, "
            f"not {rewrite}; rerun {rerun('retrieve')}"
        )


def check_candidates(
    cands: CandidateSet,
    entries: Sequence[GoldenEntry],
    golden_md5: str,
    retriever_cfg: schema.Retriever,
    k: int,
    corpus: Corpus | None = None,
    index_dir: Path | None = None,
    store_cfg: schema.Store | None = None,
    rewrite: str | None = None,
    memory_reset: bool = False,
    standalone: bool = False,
) -> None:
    """Loud errors when the cache does not match what is being evaluated, or is not whole (fewer records than
    its ``meta.json`` counts).

    With ``corpus``, the cache must have been retrieved from that corpus (its manifest's ``content_hash``); with
    ``index_dir`` and a retriever that reads the index (dense, hybrid), from that index (its manifest's
    ``content_hash``); with ``store_cfg``, with the requested search (store.search); with ``rewrite``, a golden
    set's conversation turns with that query rewrite (memory.rewrite). A cache from another corpus, index,
    search or rewrite holds another system's candidates; so does one whose needs_memory turns were (or were
    not) retrieved without their conversation's context when ``memory_reset`` says otherwise."""
    if any(e.conversation is not None for e in entries):
        _check_turn_queries(cands, rewrite, memory_reset, standalone)
    if cands.meta.get("golden_md5") != golden_md5:
        raise UsageError(
            f"candidate cache was built from another golden set (md5 differs); rerun {rerun('retrieve')}"
        )
    if cands.meta.get("retriever_fingerprint") != retriever_fingerprint(retriever_cfg):
        raise UsageError(
            f"candidate cache holds retriever {cands.meta.get('retriever')}, not {config_dict(retriever_cfg)}; "
            f"rerun {rerun('retrieve')} for this retriever"
        )
    if corpus is not None:
        current = corpus.manifest.get("content_hash")
        recorded = cands.meta.get("corpus_hash")
        if recorded != current:
            raise UsageError(
                f"candidate cache was retrieved from another corpus (corpus_hash {_short(recorded)}, "
                f"{corpus.root}/manifest.json says {_short(current)}); rerun {rerun('retrieve')}"
            )
    if index_dir is not None and needs_index(retriever_cfg.name):
        current_index = _manifest_hash(index_dir / "manifest.json")
        recorded_index = cands.meta.get("index_hash")
        if recorded_index != current_index:
            now = (
                f"{index_dir}/manifest.json says {_short(current_index)}"
                if current_index
                else f"{index_dir} has no manifest"
            )
            raise UsageError(
                f"candidate cache was retrieved from another index (index_hash {_short(recorded_index)}, {now}); "
                f"rerun {rerun('retrieve')}"
            )
    if store_cfg is not None and needs_index(retriever_cfg.name):
        wanted = search_of(retriever_cfg, store_cfg)
        recorded_search = cands.meta.get("search")
        if recorded_search != wanted:
            raise UsageError(
                f"candidate cache was retrieved with another search ({recorded_search}, requested {wanted}); "
                f"rerun {rerun('retrieve')}"
            )
    recorded_entries = cands.meta.get("entries")
    if isinstance(recorded_entries, int) and len(cands.ranked) != recorded_entries:
        raise UsageError(
            f"candidate cache holds {len(cands.ranked)} entries, meta.json says {recorded_entries} (cut short?); "
            f"rerun {rerun('retrieve')}"
        )
    if k > cands.depth:
        raise UsageError(
            f"k={k} exceeds the cached depth candidates_k={cands.depth}; raise candidates_k and retrieve"
        )
    missing = [e.id for e in entries if e.id not in cands.ranked]
    if missing:
        raise UsageError(f"candidate cache lacks entries {missing[:5]}...; rerun {rerun('retrieve')}")


def _short(digest: object) -> str:
    return f"{digest[:12]}..." if isinstance(digest, str) else str(digest)


def _manifest_hash(path: Path) -> str | None:
    """A manifest's ``content_hash``, or None when there is no readable one (the cache is stale either way)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get("content_hash") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None
