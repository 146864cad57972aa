"""Follow-ups in a conversation: which library version a turn is about, and what retrieval searches for.

A conversation's probes all carry its starting pin (as a docs site's version picker would); detecting "and in
1.10?" is the agent's job. :class:`PinTracker` starts at that pin and switches when a turn's question names
another library of the corpus or another version of the current library. The query rewrite
(``memory.rewrite``) gives retrieval the conversation's context: ``previous`` prepends the previous turn's
question, so "how do I make that field optional?" is searched with what "that field" was. Both depend on the
questions alone, so the candidates of a turn can be computed once and cached like any entry's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["REWRITES", "PinTracker", "TurnQuery", "follow_conversation", "versions_by_library"]

REWRITES = ("none", "previous")  # memory.rewrite: how a follow-up's retrieval query is built

# "1.10", "2.x", "v1.10.17": a dotted version (a bare "3" is too often a count to be read as a version).
_VERSION = re.compile(r"\bv?(\d+(?:\.(?:\d+|x))+)\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9_][a-z0-9_.-]*", re.IGNORECASE)
# Words after which an unknown dotted version still names the library's version ("and in 3.0?"): elsewhere
# ("Python 3.11") it is another product's version and the pin stays.
_VERSION_CUES = frozenset({"in", "for", "version", "on", "to", "with"})


@dataclass(frozen=True)
class TurnQuery:
    """What the agent retrieves for one turn: the (rewritten) query and the pin it routes to."""

    query: str
    library: str
    version: str


def versions_by_library(pins: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """``{"pydantic": ("1.10.17", "2.8.2")}`` from ``library@version`` pins."""
    out: dict[str, list[str]] = {}
    for pin in pins:
        library, _, version = pin.partition("@")
        out.setdefault(library, []).append(version)
    return {lib: tuple(sorted(vs, key=_version_key)) for lib, vs in out.items()}


def _version_key(version: str) -> tuple[tuple[int, str], ...]:
    return tuple((int(p), "") if p.isdigit() else (-1, p) for p in version.split("."))


def _matching(versions: Sequence[str], written: str) -> str | None:
    """The newest of ``versions`` that ``written`` is a prefix of ("1.10" -> "1.10.17", "2.x" -> "2.8.2")."""
    stem = written.lower().removesuffix(".x")
    hits = [v for v in versions if v == stem or v.startswith(stem + ".")]
    return hits[-1] if hits else None


class PinTracker:
    """The pin of the conversation so far: starts at ``start`` and follows what each question names."""

    def __init__(self, start: tuple[str, str], versions: Mapping[str, Sequence[str]]) -> None:
        self.library, self.version = start
        self.versions = versions

    def follow(self, question: str) -> tuple[str, str]:
        """The pin for this question (and the tracker's from now on)."""
        words = [w.lower().rstrip(".") for w in _WORD.findall(question)]
        named = [w for w in words if w in self.versions and w != self.library.lower()]
        library = named[0] if named else self.library
        versions = self.versions.get(library, ())
        version = None
        for match in _VERSION.finditer(question):
            written = match.group(1)
            version = _matching(versions, written)
            if version is None and self._cued(question[: match.start()], library):
                version = written  # a version the corpus does not index: the router refuses it
            if version is not None:
                break
        if version is None and library != self.library:
            version = versions[
                -1
            ]  # another library named without a version: its newest, as a docs site opens
        if version is not None:
            self.library, self.version = library, version
        return self.library, self.version

    @staticmethod
    def _cued(before: str, library: str) -> bool:
        previous = _WORD.findall(before)
        return bool(previous) and previous[-1].lower() in {*_VERSION_CUES, library.lower()}


def follow_conversation(
    questions: Sequence[str],
    start: tuple[str, str],
    versions: Mapping[str, Sequence[str]],
    rewrite: str,
    reset: Sequence[bool] | None = None,
) -> list[TurnQuery]:
    """One :class:`TurnQuery` per turn, in order: the tracked pin, and the query ``rewrite`` builds.

    ``reset`` (one flag per turn; ``--memory-reset needs_memory``): a flagged turn is asked with no conversation
    context (its own question, the starting pin) and is no part of the context of later turns, as a question
    asked in a fresh session would be: the tracker does not follow it and the next rewrite skips it."""
    if rewrite not in REWRITES:
        raise ValueError(f"memory.rewrite={rewrite!r}: one of {', '.join(REWRITES)}")
    flags = list(reset) if reset is not None else [False] * len(questions)
    tracker = PinTracker(start, versions)
    out: list[TurnQuery] = []
    previous: str | None = None  # the last question the conversation's session saw
    for n, question in enumerate(questions):
        if n and flags[n]:
            out.append(TurnQuery(question, *start))
            continue
        library, version = tracker.follow(question) if n else start
        query = f"{previous} {question}" if previous is not None and rewrite == "previous" else question
        out.append(TurnQuery(query, library, version))
        previous = question
    return out
