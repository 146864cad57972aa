"""The agent's search tool over retrieval done ahead of time: the router's verdict per probe and the passages
that cleared the floors, cut at k. What the harness scores as retrieval is exactly what the agent reads."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from doceval.system.docchat.types import Passage, Probe, SearchResult


class PrecomputedSearch:
    """``search(probe)`` for :func:`doceval.system.docchat.runner.run_agent`.

    ``routed``: probe id -> the router's refusal reason (None or absent: routed); ``hits``: probe id -> the
    retained (doc id, score) pairs in rank order; ``texts``: doc id -> the passage text the answerer sees
    (the doc id itself when missing); ``floor_of``: library -> its floor, quoted in a refusal.
    """

    def __init__(
        self,
        routed: Mapping[str, str | None],
        hits: Mapping[str, Sequence[tuple[str, float]]],
        texts: Mapping[str, str],
        floor_of: Callable[[str], float],
    ) -> None:
        self.routed = routed
        self.hits = hits
        self.texts = texts
        self.floor_of = floor_of

    def __call__(self, probe: Probe) -> SearchResult:
        reason = self.routed.get(probe.id)
        if reason:
            return SearchResult([], True, reason, "router")
        hits = self.hits[probe.id]
        if not hits:
            floor = self.floor_of(probe.library)
            return SearchResult([], True, f"search: no passage cleared the floor {floor}", "floor")
        return SearchResult([Passage(d, s, self.texts.get(d, d)) for d, s in hits], False, None)
