"""The run summary, typed (docs/design.md section 4.1): :class:`Summary` with its :class:`Metrics` (one
:class:`MetricValue` per registered metric), its :class:`Entry` rows and its resolved
:class:`~doceval.summary.settings.RunSettings`, frozen and read by attribute.

Built in one place, :meth:`Summary.from_mapping`: from the JSON object the harness assembles (and the pipeline
writes) or a summary read back from a file or MLflow, older formats included (every typed field is optional).
:meth:`Summary.to_dict` gives back exactly that object, key order included, so the files the pipeline writes do
not change. What is open-ended (the metrics' intervals, breakdowns, conversation figures and repeats; an entry's
extra fields) stays in the recorded mapping; the values readers decide on are typed."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from doceval.common.metric_names import METRIC_NAMES, PREFIX
from doceval.summary.settings import RunSettings, mapping, number, text, whole

__all__ = ["Entry", "Incomplete", "MetricValue", "Metrics", "Summary", "as_summary", "settings_of"]


@dataclass(frozen=True)
class MetricValue:
    """One headline figure: the value (None: not measured, never 0), its 95% interval where one was computed,
    and why it was not measured where the run says so."""

    name: str
    value: float | None
    ci95: tuple[float, float] | None
    not_measured: str | None

    @property
    def measured(self) -> bool:
        return self.value is not None


def _interval(value: Any) -> tuple[float, float] | None:
    if isinstance(value, list | tuple) and len(value) == 2:
        low, high = number(value[0]), number(value[1])
        if low is not None and high is not None:
            return (low, high)
    return None


@dataclass(frozen=True)
class Metrics:
    """The summary's ``metrics`` block: a :class:`MetricValue` per registered metric, the counts, whether an
    answer was judged, the cut-offs (k per at-k metric) and the conversation block; ``recorded`` is the whole
    block as written (intervals, breakdowns by library/pin/kind, replays and repeats are read from it)."""

    values: Mapping[str, MetricValue]
    counts: Mapping[str, Any]
    not_judged: bool
    cutoffs: Mapping[str, Any]
    conversations: Mapping[str, Any] | None
    recorded: Mapping[str, Any]

    def value(self, name: str) -> float | None:
        """The figure of ``name`` (a registered metric), None when not measured or not recorded."""
        found = self.values.get(name)
        return None if found is None else found.value

    @property
    def not_measured(self) -> dict[str, str]:
        """Why each metric the run could not measure was not (``metrics.not_measured``), by metric."""
        return {str(n): str(why) for n, why in mapping(self.recorded.get("not_measured")).items()}

    @property
    def intervals(self) -> Mapping[str, Any]:
        """How the run's intervals were computed (``bootstrap``, ``seed``, ``binary``); empty when not recorded."""
        return mapping(self.recorded.get("intervals"))

    def breakdown(self, by: str) -> Mapping[str, Any]:
        """A breakdown block (``by_library``, ``by_pin``, ``by_kind``) as recorded; empty when absent."""
        return mapping(self.recorded.get(by))

    @classmethod
    def from_mapping(cls, block: Any) -> Metrics:
        recorded = mapping(block)
        ci95, unmeasured = mapping(recorded.get("ci95")), mapping(recorded.get("not_measured"))
        values = {
            name: MetricValue(
                name, number(recorded.get(name)), _interval(ci95.get(name)), text(unmeasured.get(name))
            )
            for name in METRIC_NAMES
            if name in recorded
        }
        conversations = recorded.get(PREFIX)
        return cls(
            values=values,
            counts=mapping(recorded.get("counts")),
            not_judged=recorded.get("not_judged") is True,
            cutoffs=mapping(recorded.get("cutoffs")),
            conversations=conversations if isinstance(conversations, Mapping) else None,
            recorded=recorded,
        )


@dataclass(frozen=True)
class Entry:
    """One golden entry's row: what was asked, what came back, and its scores (None: not scored)."""

    id: str
    split: str | None
    library: str | None
    version: str | None
    kind: str | None
    out_of_scope: bool
    refused: bool
    answer: str | None
    verdict: bool | None
    system_error: str | None
    stage: str | None
    conversation: str | None
    turn: int | None
    scores: Mapping[str, float | None]
    recorded: Mapping[str, Any]

    @property
    def retrieved_ids(self) -> tuple[str, ...]:
        """The document ids the entry retrieved, in rank order (``[id, score]`` pairs or bare ids)."""
        items = self.recorded.get("retrieved") or []
        return tuple(str(i[0]) if isinstance(i, list | tuple) and i else str(i) for i in items)

    @classmethod
    def from_mapping(cls, row: Any) -> Entry:
        recorded = mapping(row)
        verdict = recorded.get("verdict")
        return cls(
            id=str(recorded.get("id")),
            split=text(recorded.get("split")),
            library=text(recorded.get("library")),
            version=text(recorded.get("version")),
            kind=text(recorded.get("kind")),
            out_of_scope=recorded.get("out_of_scope") is True,
            refused=recorded.get("refused") is True,
            answer=text(recorded.get("answer")),
            verdict=verdict if isinstance(verdict, bool) else None,
            system_error=text(recorded.get("system_error")),
            stage=text(recorded.get("stage")),
            conversation=text(recorded.get("conversation")),
            turn=whole(recorded.get("turn")),
            scores={str(k): number(v) for k, v in mapping(recorded.get("scores")).items()},
            recorded=recorded,
        )


@dataclass(frozen=True)
class Incomplete:
    """Why a run stopped early and how much of its split it scored."""

    reason: str
    entries_scored: int | None
    entries_in_split: int | None


@dataclass(frozen=True)
class Summary:
    """A run summary: metrics, the resolved settings (``settings``: the ``config`` block), entries, and
    whether the run completed (an older summary without the key counts as complete)."""

    metrics: Metrics
    settings: RunSettings
    entries: tuple[Entry, ...]
    complete: bool
    incomplete: Incomplete | None
    recorded: Mapping[str, Any]

    @property
    def entry_ids(self) -> tuple[str, ...]:
        return tuple(e.id for e in self.entries)

    @property
    def rows(self) -> list[Mapping[str, Any]]:
        """Each entry's row as recorded (what the per-entry statistics read: ``scores``, ``retrieved``, ...): the
        summary's own rows, to read, never to change (``to_dict()`` gives a copy to change)."""
        return [e.recorded for e in self.entries]

    @property
    def repeats(self) -> Mapping[str, Any] | None:
        """The ``--repeats`` block (per metric the spread, the flaky entries, every repeat's answers), or None."""
        block = self.recorded.get("repeats")
        return block if isinstance(block, Mapping) else None

    @property
    def entries_source(self) -> str | None:
        """Where the entries were read from when not from the summary itself (a run's MLflow traces)."""
        return text(self.recorded.get("entries_source"))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Summary:
        """The typed summary of ``data`` (a summary's JSON object, already shape-checked where it came from
        outside: :func:`doceval.results.summaries.check_summary`). ``data`` is copied: later changes to it do
        not reach the typed object."""
        return cls._typed(copy.deepcopy(dict(data)))

    @classmethod
    def _typed(cls, recorded: dict[str, Any]) -> Summary:
        """The typed summary over ``recorded``, which it takes over (a copy no one else holds)."""
        stopped = mapping(recorded.get("incomplete"))
        return cls(
            metrics=Metrics.from_mapping(recorded.get("metrics")),
            settings=RunSettings.from_mapping(recorded.get("config")),
            entries=tuple(Entry.from_mapping(e) for e in recorded.get("entries") or []),
            complete=recorded.get("complete", True) is not False,
            incomplete=Incomplete(
                reason=str(stopped.get("reason")),
                entries_scored=whole(stopped.get("entries_scored")),
                entries_in_split=whole(stopped.get("entries_in_split")),
            )
            if stopped
            else None,
            recorded=recorded,
        )

    def with_conversation_measures(self, measures: Mapping[str, Any], *, complete: bool) -> Summary:
        """A new summary whose conversations block also holds ``measures`` (the conversations stage's memory
        benefit, standalone ceiling, recovery, leak and replays, in that order) and whose ``complete`` is
        ``complete`` (every replay's); this one is left as it was."""
        if self.metrics.conversations is None:
            raise ValueError("the summary has no conversations block: the run held no conversation turn")
        recorded = copy.deepcopy(dict(self.recorded))
        recorded["metrics"]["conversations"].update(copy.deepcopy(dict(measures)))
        recorded["complete"] = complete
        return Summary._typed(recorded)

    def to_dict(self) -> dict[str, Any]:
        """The summary as the JSON object it was built from, key order included (what ``json.dump`` writes)."""
        return copy.deepcopy(dict(self.recorded))


def as_summary(summary: Summary | Mapping[str, Any]) -> Summary:
    """``summary`` typed: itself when it already is, else :meth:`Summary.from_mapping` of it."""
    return summary if isinstance(summary, Summary) else Summary.from_mapping(summary)


def settings_of(summary: Summary | Mapping[str, Any]) -> RunSettings:
    """The resolved settings of ``summary``, typed; for a mapping only its ``config`` block is read (and copied),
    so a reader that needs the settings alone does not pay for the entries."""
    if isinstance(summary, Summary):
        return summary.settings
    return RunSettings.from_mapping(copy.deepcopy(summary.get("config")))
