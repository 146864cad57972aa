"""The seam between the harness and a system under test: what the harness hands a system (a :class:`Probe`)
and what the system hands back (an :class:`Answer`).

Both sides import this module and nothing of each other: the system never sees a label (scope, relevant
documents, reference answer), and the scorers never see the system's internals.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Probe:
    """One golden entry as a system sees it: the question and the library version it is about."""

    id: str
    question: str
    library: str
    version: str


@dataclass
class Answer:
    """A system's reply to one probe: an answer, or a refusal with its reason, and the LLM usage it cost."""

    id: str
    answer: str | None
    refused: bool
    refusal_reason: str | None
    usage: dict[str, dict[str, float]]  # per role, this entry's LLM calls only

    @property
    def cost_usd(self) -> float:
        return usage_cost(self.usage)


def usage_cost(usage: dict[str, dict[str, float]]) -> float:
    """Total cost over the roles of a per-role usage block."""
    return sum(float(u.get("cost_usd", 0.0)) for u in usage.values())


def sum_usage(*blocks: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per-role, per-field sum of usage blocks (e.g. every entry's answering and judging)."""
    out: dict[str, dict[str, float]] = {}
    for block in blocks:
        for role, counts in block.items():
            acc = out.setdefault(role, {})
            for key, value in counts.items():
                acc[key] = acc.get(key, 0) + value
    return out
