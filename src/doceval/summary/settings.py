"""The run settings a summary records (its ``config`` block, docs/design.md section 4.1), typed: what a run
resolved (the split it scored, k, the floors with their source, the system, the judge, the golden set, the
candidates) so a reader takes them by attribute instead of digging in the recorded configuration.

Built only by :meth:`RunSettings.from_mapping`, from the block the harness wrote or a summary read back; every
field is optional because an older doceval's summary (0.1.0) may lack it. ``recorded`` keeps the block as written
(key order included) for serialising: the typed fields never add to or reorder the JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from doceval.common.naming import floors_label, is_assistant, system_label

__all__ = ["CandidatesRecord", "Floors", "GoldenRecord", "RunSettings", "mapping", "number", "text", "whole"]


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else an empty one: a missing or malformed block reads as absent."""
    return value if isinstance(value, Mapping) else {}


def text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def number(value: Any) -> float | None:
    """A JSON number as written (an int stays an int: files built from it must not change), never a bool;
    anything else None: "not measured" stays None, never 0."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Floors:
    """The refusal floors the run applied: one global floor, per-library floors, where they came from
    (``calibrated:<path>``, ``config``, ...), the signal they threshold and the calibration's provenance."""

    global_floor: float | None
    per_library: Mapping[str, float | None]
    source: str | None
    signal: str | None
    provenance: Mapping[str, Any]
    recorded: Mapping[str, Any]

    @property
    def label(self) -> str:
        """The floors in the words a user chose them with (``calibrated (PATH)``, ``zero``, ...)."""
        return floors_label(self.recorded)

    @property
    def calibrated(self) -> bool:
        """The floors came from the calibrate stage (eval/calibration/floors.json), not from conf/."""
        return (self.source or "").startswith("calibrated")

    @classmethod
    def from_mapping(cls, block: Any) -> Floors:
        recorded = mapping(block)
        return cls(
            global_floor=number(recorded.get("global")),
            per_library={str(k): number(v) for k, v in mapping(recorded.get("per_library")).items()},
            source=text(recorded.get("source")),
            signal=text(recorded.get("signal")),
            provenance=mapping(recorded.get("provenance")),
            recorded=recorded,
        )


@dataclass(frozen=True)
class GoldenRecord:
    """The golden set a run scored: its path and labels' md5, the corpus pins its scope labels were checked
    against, whether it is graded, has qrels, was pooled, and how many unreviewed drafts it scored."""

    path: str | None
    md5: str | None
    corpus_pins: tuple[str, ...] | None
    graded: bool | None  # None: a summary written before it was recorded
    qrels: bool
    pool: Any
    allow_drafts: bool
    drafts: int

    @property
    def file(self) -> Path | None:
        """The golden set's path as a path (None: not recorded)."""
        return None if self.path is None else Path(self.path)

    @classmethod
    def from_mapping(cls, block: Any) -> GoldenRecord:
        recorded = mapping(block)
        pins = recorded.get("corpus_pins")
        return cls(
            path=text(recorded.get("path")),
            md5=text(recorded.get("md5")),
            corpus_pins=tuple(str(p) for p in pins) if isinstance(pins, list) else None,
            graded=recorded["graded"] if isinstance(recorded.get("graded"), bool) else None,
            qrels=recorded.get("qrels") is True,
            pool=recorded.get("pool"),
            allow_drafts=recorded.get("allow_drafts") is True,
            drafts=whole(recorded.get("drafts")) or 0,
        )


@dataclass(frozen=True)
class CandidatesRecord:
    """The candidate set a retrieval run read (data/runs): its depth and the index and corpus it came from."""

    candidates_k: int | None
    index_hash: str | None
    corpus_hash: str | None
    live: Any
    search: Any
    embedder: Any

    @classmethod
    def from_mapping(cls, block: Any) -> CandidatesRecord:
        recorded = mapping(block)
        return cls(
            candidates_k=whole(recorded.get("candidates_k")),
            index_hash=text(recorded.get("index_hash")),
            corpus_hash=text(recorded.get("corpus_hash")),
            live=recorded.get("live"),
            search=recorded.get("search"),
            embedder=recorded.get("embedder"),
        )


@dataclass(frozen=True)
class RunSettings:
    """A run's resolved settings (the summary's ``config`` block). The open-ended blocks (the system, the
    retriever's and answerer's and judge's recorded configuration, engine, usage, provenance) stay mappings as
    recorded; the values readers decide on are typed."""

    name: str | None
    split: str | None
    k: int | None
    limit: int | None
    system: Mapping[str, Any]
    retriever: Mapping[str, Any]
    floors: Floors
    answerer: Mapping[str, Any]
    judge: Mapping[str, Any]
    judge_id: Mapping[str, Any] | None
    judge_evidence: Mapping[str, Any]
    engine: Mapping[str, Any]
    run: Mapping[str, Any]
    memory: Mapping[str, Any]
    golden: GoldenRecord
    candidates: CandidatesRecord
    corpus_hash: str | None
    run_key: str | None
    usage: Mapping[str, Any]
    provenance: Mapping[str, Any]
    rescored_from: Mapping[str, Any] | None
    recorded: Mapping[str, Any]

    @property
    def judge_hash(self) -> str | None:
        """The hash naming the judge that produced answer_accuracy (None: no judge ran, or an older summary)."""
        return text(mapping(self.judge_id).get("hash"))

    @property
    def retriever_name(self) -> str:
        """The retriever's name as recorded (``agent:NAME`` for a user's assistant; an older summary may record
        the name alone); ``None`` when not recorded, as history's family tags have always written it."""
        retriever = self.recorded.get("retriever")
        return str(retriever.get("name") if isinstance(retriever, Mapping) else retriever)

    @property
    def system_label(self) -> str:
        """One short name for the system under test (doceval.common.naming.system_label)."""
        return system_label(self.recorded)

    @property
    def is_assistant(self) -> bool:
        """Whether the system under test was a user's whole assistant (its retrieval is the sources it returned)."""
        return is_assistant(self.recorded)

    @property
    def git_commit(self) -> str | None:
        """The commit the run's code came from (None: not a git checkout, or an older summary)."""
        return text(self.provenance.get("git_commit"))

    @classmethod
    def from_mapping(cls, block: Any) -> RunSettings:
        recorded = mapping(block)
        return cls(
            # What the user calls the system (``name=``; a YAML number stays its text).
            name=None if recorded.get("name") is None else str(recorded["name"]),
            split=text(recorded.get("split")),
            k=whole(recorded.get("k")),
            limit=whole(recorded.get("limit")),
            system=mapping(recorded.get("system")),
            retriever=mapping(recorded.get("retriever")),
            floors=Floors.from_mapping(recorded.get("floors")),
            answerer=mapping(recorded.get("answerer")),
            judge=mapping(recorded.get("judge")),
            judge_id=recorded["judge_id"] if isinstance(recorded.get("judge_id"), Mapping) else None,
            judge_evidence=mapping(recorded.get("judge_evidence")),
            engine=mapping(recorded.get("engine")),
            run=mapping(recorded.get("run")),
            memory=mapping(recorded.get("memory")),
            golden=GoldenRecord.from_mapping(recorded.get("golden")),
            candidates=CandidatesRecord.from_mapping(recorded.get("candidates")),
            corpus_hash=text(recorded.get("corpus_hash")),
            run_key=text(recorded.get("run_key")),
            usage=mapping(recorded.get("usage")),
            provenance=mapping(recorded.get("provenance")),
            # A re-judged run (doceval judge rescore): the run whose answers it judged again.
            rescored_from=recorded["rescored_from"]
            if isinstance(recorded.get("rescored_from"), Mapping)
            else None,
            recorded=recorded,
        )
