"""DVC stage `retrieve`: cache the top-K candidates of every golden entry, no floor (retrieve once, decide many),
and bm25's ranking of each beside them (the evaluate stage's trade-off compares the two)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from doceval.common.hints import rerun
from doceval.common.io import atomic_dir, jsonl_line, write_json_atomic
from doceval.config import schema
from doceval.errors import UsageError
from doceval.harness.candidate_set import BM25_RANKINGS, CANDIDATES, EXACT, META, CandidateSet
from doceval.harness.candidates import bm25_rankings, compute_candidates
from doceval.inputs.configured import refuse_stage_overlap
from doceval.inputs.corpus import load_corpus
from doceval.inputs.golden import GoldenEntry
from doceval.inputs.scope import load_checked_golden
from doceval.system.retrievers.base import SCORE_DECIMALS

if TYPE_CHECKING:
    from doceval.config.schema import Config


def run(cfg: Config, progress: bool = True) -> CandidateSet:
    """Write ``<runs>/candidates/{candidates.jsonl,meta.json}`` for every golden entry (all splits)."""
    out = Path(cfg.paths.runs) / "candidates"
    refuse_stage_overlap(cfg, [("the candidate cache (paths.runs)", out)], without=("candidates",))
    corpus = load_corpus(Path(cfg.paths.docs))
    golden_path = Path(cfg.golden)
    entries, golden_md5, _ = load_checked_golden(golden_path, corpus, allow_drafts=cfg.allow_drafts)
    cands = compute_candidates(cfg, corpus, entries, golden_path, golden_md5, progress)
    if cands.errors:  # the cache has no place for a failed call: it would read as a refusal
        first = next(iter(cands.errors.items()))
        raise UsageError(
            f"retrieve: the retriever failed on {len(cands.errors)} entries (first {first[0]}: {first[1]}); "
            f"fix it and rerun {rerun('retrieve')} (`doceval eval` records such failures per entry instead)"
        )
    exact = None
    search = cands.meta.get("search") or {}
    if not search.get("exact", True):
        # The same index searched exactly, for the report's "ANN vs exact" (one more pass over the golden set).
        store = cfg.store
        assert isinstance(store, schema.StoreQdrantEdge)  # the only store that searches approximately
        twin = dataclasses.replace(
            cfg, store=dataclasses.replace(store, search=dataclasses.replace(store.search, exact=True))
        )
        exact = compute_candidates(twin, corpus, entries, golden_path, golden_md5, progress)
        cands.meta["exact_candidates"] = EXACT
    bm25 = bm25_rankings(entries, corpus, cands.depth)  # the evaluate stage's trade-off, read from here
    with atomic_dir(out) as tmp:
        _write(tmp / CANDIDATES, entries, cands)
        if exact is not None:
            _write(tmp / EXACT, entries, exact)
        with (tmp / BM25_RANKINGS).open("w", encoding="utf-8") as fh:
            fh.writelines(jsonl_line({"id": e.id, "ranked": bm25[e.id]}) for e in entries)
        write_json_atomic(tmp / META, cands.meta)
    print(
        json.dumps({"entries": len(entries), "retriever": cands.meta["retriever"]["name"], "K": cands.depth})
    )
    return cands


def _write(path: Path, entries: Sequence[GoldenEntry], cands: CandidateSet) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for entry in entries:
            record = {
                "id": entry.id,
                "router": cands.routed[entry.id],
                "candidates": [[d, round(s, SCORE_DECIMALS)] for d, s in cands.ranked[entry.id]],
            }
            fh.write(jsonl_line(record))
