"""When a run of the user's system (an assistant, or a retriever function) stops early: more system errors than
``--max-errors``, or more calls abandoned past their deadline than ``run.max_abandoned``. One rule for the local
loops and the Ray fan-out (:mod:`doceval.harness.agents`, :mod:`doceval.harness.candidates`,
:mod:`doceval.harness.remote`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ErrorLimits:
    """When a user's retriever makes the run stop early: more system errors than ``max_errors``, or more calls
    abandoned past their deadline than ``max_abandoned`` (None: no limit)."""

    max_errors: int | None = None
    max_abandoned: int | None = None


def abandoned_stop(system: object, max_abandoned: int | None) -> str | None:
    """Why the run must stop because of ``system``'s calls abandoned past their deadline, or None."""
    return abandoned_calls_stop(int(getattr(system, "abandoned", 0)), max_abandoned)


def abandoned_calls_stop(abandoned: int, max_abandoned: int | None) -> str | None:
    """Why the run must stop after ``abandoned`` calls abandoned past their deadline (threads that may run
    on), or None."""
    if max_abandoned is None or abandoned <= max_abandoned:
        return None
    return f"stopped after {abandoned} calls abandoned past their deadline (more than run.max_abandoned={max_abandoned})"


def errors_stop(n_errors: int, max_errors: int | None) -> str | None:
    """Why the run must stop after ``n_errors`` system errors (``--max-errors``), or None."""
    if max_errors is None or n_errors <= max_errors:
        return None
    return f"stopped after {n_errors} system errors (more than --max-errors)"
