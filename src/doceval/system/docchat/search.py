"""The agent's search tool over retrieval done ahead of time: the router's verdict per probe and the passages
that cleared the floors, cut at k. What the harness scores as retrieval is exactly what the agent reads."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from doceval.system.docchat.types import Passage, Probe, SearchResult


class PrecomputedSearch:
    """``search(probe)`` for :func:`doceval.system.docchat.runner.run_agent`.

    ``routed``: probe id -> the router's refusal reason (None or absent: routed); ``hits``: probe id -> the
    retained (doc id, score) pairs in rank order; ``texts``: doc id -> the passage text the answerer sees
    (the doc id itself when missing); ``floor_of``: library -> its floor, quoted in a refusal;
    ``unretrieved``: probe ids the retriever itself returned nothing for (a user's retriever function's
    refusal, cause "retriever": no floor was involved); ``pins``: probe id -> the pin a conversation's turn was
    routed to (its followed pin, :mod:`doceval.system.docchat.conversation`), when it is not the probe's.
    """

    def __init__(
        self,
        routed: Mapping[str, str | None],
        hits: Mapping[str, Sequence[tuple[str, float]]],
        texts: Mapping[str, str],
        floor_of: Callable[[str], float],
        unretrieved: Collection[str] = (),
        pins: Mapping[str, tuple[str, str]] | None = None,
    ) -> None:
        self.routed = routed
        self.hits = hits
        self.texts = texts
        self.floor_of = floor_of
        self.unretrieved = frozenset(unretrieved)
        self.pins = pins or {}

    def __call__(self, probe: Probe) -> SearchResult:
        reason = self.routed.get(probe.id)
        if reason:
            return SearchResult([], True, reason, "router")
        hits = self.hits[probe.id]
        if not hits and probe.id in self.unretrieved:
            return SearchResult([], True, "retriever: returned no document", "retriever")
        pin = self.pins.get(probe.id)
        if not hits:
            floor = self.floor_of(probe.library if pin is None else pin[0])
            return SearchResult([], True, f"search: no passage cleared the floor {floor}", "floor", pin)
        return SearchResult([Passage(d, s, self.texts.get(d, d)) for d, s in hits], False, None, pin=pin)
