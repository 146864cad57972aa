"""DVC stage `calibrate`: floors on the calibration split -> eval/calibration (floors.json, curves, plot)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval import tracking
from doceval.common.io import atomic_dir, sha256_file, write_json_atomic
from doceval.config import schema
from doceval.errors import UsageError
from doceval.harness.calibrate import calibrate, overlap_notes, plot_calibration, write_curves
from doceval.harness.candidate_cache import check_candidates, load_candidates
from doceval.harness.candidate_set import CANDIDATES
from doceval.harness.evaluate import evaluate
from doceval.harness.floors import Floors
from doceval.harness.plan import EvalOptions, load_inputs, needs_corpus
from doceval.harness.summary import pipeline_record
from doceval.inputs.configured import refuse_stage_overlap
from doceval.inputs.golden import select_split
from doceval.scoring.registry import names

if TYPE_CHECKING:
    from doceval.config.schema import Config


def run(cfg: Config, progress: bool = True) -> dict[str, Any]:
    """floors.json + curves + plot into eval/calibration; the calibration split scored with them."""
    out = Path(cfg.paths.eval) / "calibration"
    refuse_stage_overlap(cfg, [("the calibration folder (paths.eval)", out)], without=("floors",))
    tracking.check_configured(cfg)
    opts = EvalOptions(progress=progress)
    corpus, all_entries, golden_path, golden_md5 = load_inputs(cfg, opts, needs_corpus(cfg, opts))
    split = cfg.calibration.split
    entries = select_split(all_entries, split, golden_path)
    runs = Path(cfg.paths.runs)
    cands = load_candidates(runs)
    check_candidates(
        cands,
        all_entries,
        golden_md5,
        cfg.retriever,
        cfg.k,
        corpus=corpus,
        index_dir=Path(cfg.paths.index),
        store_cfg=cfg.store,
    )
    if cands.meta.get("scored") is False:
        retriever = cfg.retriever
        named: str = retriever.name
        if isinstance(retriever, schema.RetrieverFunction) and retriever.target:
            named = retriever.target
        raise UsageError(
            f"calibrate: retriever {named} returns ids "
            "without scores, so there is no floor to calibrate; sweep its own evidence bar instead, e.g. "
            "`doceval sweep -m +retriever.kwargs.min_score=1,2,3` on the calibration split, then run the best "
            "value once on test"
        )
    # Without a doceval corpus, the libraries are the golden set's own pins.
    libraries = corpus.libraries if corpus is not None else sorted({e.library for e in all_entries})
    artifact = calibrate(
        cfg, entries, cands, libraries, golden_md5, sha256_file(runs / "candidates" / CANDIDATES), corpus
    )
    # The calibration split scored with its own floors: recorded apart, never the headline.
    floors = Floors(
        artifact["global"],
        dict(artifact["per_library"]),
        source=f"calibrated:{out / 'floors.json'}",
        provenance=artifact["provenance"],
    )
    summary = evaluate(cfg, EvalOptions(split=split, candidates=cands, progress=progress, floors=floors))
    # Every file into a temporary sibling, swapped in whole: a killed or failed calibrate leaves the previous
    # eval/calibration (or none), never new floors beside old curves.
    with atomic_dir(out) as tmp:
        write_json_atomic(tmp / "floors.json", artifact)
        write_curves(artifact, tmp / "curves")
        plot_calibration(artifact, tmp / "floors.png")
        write_json_atomic(tmp / "summary.json", pipeline_record(summary))  # MLflow gets the whole summary
    for note in overlap_notes(artifact):
        print("note:", note)
    print(
        json.dumps(
            {
                "global": artifact["global"],
                "per_library": artifact["per_library"],
                **{m: summary.metrics.value(m) for m in names("short")},
            }
        )
    )
    return {"artifact": artifact, "summary": summary, "out": out}


def track(cfg: Config, result: Mapping[str, Any]) -> str | None:
    out: Path = result["out"]
    return tracking.log_configured_run(
        cfg,
        result["summary"],
        {"floors.json": out / "floors.json", "floors.png": out / "floors.png"},
        run_name="calibrate",  # the title says split calibration; the label says which stage
        tags={"stage": "calibrate"},
    )
