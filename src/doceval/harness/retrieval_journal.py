"""The journal of a user's retriever function (docs/design.md section 7.3): one line per entry it was asked
about, durable before the entry counts, so a run stopped at any point (killed, a lost Ray node, --max-errors)
resumes without asking the function again for the entries it already answered. The journal rule is the
assistants': an interrupted run resumes, a finished run (``finished.json``, written by the evaluation once its
summary is built) is asked again unless ``--resume``, ``--fresh`` always starts over.

It lives in ``<paths.runs>/retrieval/<key>/retrieval.jsonl`` (a sweep point's in its own folder), ``key``
hashing what changes the function's answers: the retriever block, its source, the golden set, the entries asked,
the depth and how follow-ups are queried.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval.common.journal import Journal, JournalPlan, load_records, mark_finished, plan_journals
from doceval.config.objects import config_dict
from doceval.config.schema import Config
from doceval.system.retrievers.function import FunctionRetriever

if TYPE_CHECKING:
    from doceval.harness.candidate_set import CandidateSet
    from doceval.inputs.golden import GoldenEntry
    from doceval.system.retrievers.base import Ranked

JOURNAL = "retrieval.jsonl"


def retrieval_journal(
    cfg: Config,
    run_dir: Path | None,
    ids: Sequence[str],
    golden_md5: str,
    source: Mapping[str, Any],
    resume: bool,
    fresh: bool,
) -> Path:
    """The run's retrieval journal (the journal rule applied: journals set aside as it says). ``run_dir``: a
    sweep point's own folder, else the key's folder under ``paths.runs``; ``source``: the retriever's
    ``describe()`` (its code's sha256 keeps a changed function from resuming its old answers)."""
    if run_dir is not None:
        run_dir = run_dir / "retrieval"
    else:
        key = {
            "retriever": config_dict(cfg.retriever),
            "code": source.get("source_sha256"),
            "golden": golden_md5,
            "ids": list(ids),
            "depth": max(cfg.candidates_k, cfg.k),
            "rewrite": cfg.memory.rewrite,
        }
        digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
        run_dir = Path(cfg.paths.runs) / "retrieval" / digest
    path = run_dir / JOURNAL
    plan_journals(run_dir, [path], resume=resume, fresh=fresh)
    return path


def journal_for(
    cfg: Config,
    retriever: object,
    entries: Sequence[GoldenEntry],
    md5: str,
    how: tuple[Path | None, bool, bool] | None,
) -> Path | None:
    """A user's function's retrieval journal (``how``: a sweep point's folder or None, --resume, --fresh; None:
    no journal), else None (a built-in retriever is doceval's, cached by the retrieve stage)."""
    describe = getattr(retriever, "describe", None)
    if how is None or not isinstance(retriever, FunctionRetriever) or not callable(describe):
        return None
    return retrieval_journal(cfg, how[0], [e.id for e in entries], md5, describe(), how[1], how[2])


def journal_answer(
    journal: Journal,
    entry_id: str,
    ranked: Sequence[tuple[str, float]],
    timing: tuple[float, float] | None,
    retriever: object,
) -> None:
    """One answer of ``retriever`` (an error is not journaled: the rerun asks that entry again), with the form
    its answers take (bare ids or scored pairs, its ``scored``)."""
    scored = getattr(retriever, "scored", None)
    journal.append(
        {
            "id": entry_id,
            "ranked": [[d, s] for d, s in ranked],
            "scored": scored,
            "timing": list(timing) if timing is not None else None,
        }
    )


def _parse(data: dict[str, Any]) -> tuple[str, Ranked, tuple[float, float] | None, bool | None]:
    ranked = [(str(d), float(s)) for d, s in data["ranked"]]
    timing = data["timing"]
    scored = data["scored"]
    return (
        str(data["id"]),
        ranked,
        (float(timing[0]), float(timing[1])) if timing is not None else None,
        None if scored is None else bool(scored),
    )


def resume_retrievals(
    journal: Path | None, entries: Sequence[GoldenEntry], out: CandidateSet, retriever: object
) -> int:
    """Put the journaled answers for ``entries`` into ``out`` (and the function's id form, bare or scored, on
    ``retriever`` when it has none yet); returns how many entries they cover (0 without a journal)."""
    if journal is None:
        return 0
    wanted = {e.id for e in entries}
    resumed = 0
    for entry_id, ranked, timing, scored in load_records(journal, _parse, "retrieval journal"):
        if entry_id not in wanted or entry_id in out.ranked:
            continue
        out.ranked[entry_id], out.routed[entry_id] = ranked, None
        if timing is not None:
            out.timings[entry_id] = timing
        if scored is not None and getattr(retriever, "scored", None) is None:
            retriever.scored = scored  # type: ignore[attr-defined]  # the form the function answered in
        resumed += 1
    return resumed


def in_entry_order(out: CandidateSet, entries: Sequence[GoldenEntry]) -> CandidateSet:
    """The candidates keyed in entry order, as an uninterrupted local loop leaves them."""
    ids = [e.id for e in entries]

    def order(d: dict[str, Any]) -> dict[str, Any]:
        return {i: d[i] for i in ids if i in d}

    out.ranked, out.routed, out.timings, out.errors = (
        order(out.ranked),
        order(out.routed),
        order(out.timings),
        order(out.errors),
    )
    return out


def finish_retrieval(journal: Path | None, entries: int) -> None:
    """The evaluation that read this journal finished: a plain rerun asks the function again."""
    if journal is not None:
        mark_finished(JournalPlan("new", journal.parent), {"entries": entries})
