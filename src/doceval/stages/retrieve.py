"""DVC stage `retrieve`: cache the top-K candidates of every golden entry, no floor (retrieve once, decide many)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from doceval.common.io import atomic_dir, write_json_atomic
from doceval.harness.candidates import CANDIDATES, META, CandidateSet, compute_candidates
from doceval.inputs.corpus import load_corpus
from doceval.inputs.scope import load_checked_golden


def run(params: Mapping[str, Any], progress: bool = True) -> CandidateSet:
    """Write ``<runs>/candidates/{candidates.jsonl,meta.json}`` for every golden entry (all splits)."""
    corpus = load_corpus(Path(params["paths"]["docs"]))
    golden_path = Path(params["golden"])
    entries, golden_md5, _ = load_checked_golden(golden_path, corpus)
    cands = compute_candidates(params, corpus, entries, golden_path, golden_md5, progress)
    out = Path(params["paths"]["runs"]) / "candidates"
    with atomic_dir(out) as tmp:
        with (tmp / CANDIDATES).open("w", encoding="utf-8") as fh:
            for entry in entries:
                record = {
                    "id": entry.id,
                    "router": cands.routed[entry.id],
                    "candidates": [[d, round(s, 6)] for d, s in cands.ranked[entry.id]],
                }
                fh.write(json.dumps(record) + "\n")
        write_json_atomic(tmp / META, cands.meta)
    print(
        json.dumps({"entries": len(entries), "retriever": cands.meta["retriever"]["name"], "K": cands.depth})
    )
    return cands
