"""Standalone rewrites of a conversation's needs_memory turns (docs/design.md section 3): the question a user
would ask with no history ("and in 2.8?" -> "pydantic 2.8: how do I export only the fields that were set?").

The standalone replay asks each needs_memory turn's rewrite in place of its question, in a fresh session at the
turn's own pin: what the system scores on the same need when the question carries its own context. Memory
recovery (doceval.scoring.conversations) is measured against it, so a rewrite that still leans on the earlier
turns would understate what memory has to recover. ``golden validate`` warns about such rewrites by these rules
(each a reason printed with the warning):

- ``not rewritten``: the standalone is the turn's question itself;
- ``too short``: fewer than :data:`MIN_WORDS` words;
- ``opens like a follow-up``: it starts with a word that continues a conversation ("and", "also", "then", "but",
  "so", "same", "ok") or with "what about" / "how about";
- ``refers back``: it names an earlier turn's thing without saying what ("that one", "the same thing", "same
  question", "as above", "mentioned", "earlier", "previous", or "that/this/those/these" before a noun the docs'
  questions refer back with: version, validator, block, option, method, field, type, ...; or "do that with/in/on",
  "would that look");
- ``names no library`` / ``names no version``: the set has several libraries and the standalone does not name
  the turn's, or several versions of the turn's library and it names none the turn's version starts with ("2.8"
  for 2.8.2, or a major version after the library's name: "click 8" for 8.1.7).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence

from doceval.inputs.conversation import STANDALONE, turn_field
from doceval.inputs.golden import GoldenEntry

__all__ = [
    "MIN_WORDS",
    "follow_up_reasons",
    "missing_standalone",
    "standalone_entries",
    "standalone_of",
    "standalone_warnings",
]

MIN_WORDS = 6
_OPENERS = frozenset({"and", "also", "then", "but", "so", "same", "ok", "okay"})
_OPENING_PHRASES = ("what about", "how about")
_NOUNS = (
    "version|validator|validators|block|option|options|method|methods|field|fields|type|types|engine|copy|model|"
    "schema|hook|function|class|setting|settings|parameter|argument|column|table|query|session|decorator|test|"
    "tests|approach|way|call|one|thing|case"
)
_BACK_REFERENCE = re.compile(
    rf"\b(?:that one|this one|the same thing|same question|as above|mentioned|earlier|previous(?:ly)?|"
    rf"(?:that|this|those|these) (?:{_NOUNS})|(?:do|does) (?:that|this|it) (?:with|in|on|for|there)|"
    rf"would (?:that|this|it) (?:look|work))\b",
    re.IGNORECASE,
)
_VERSION = re.compile(r"\bv?(\d+(?:\.(?:\d+|x))+)\b", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z0-9_'-]+")


def standalone_of(entry: GoldenEntry) -> str | None:
    """The turn's standalone rewrite, or None (a single question, a turn without one)."""
    text = entry.extra.get(STANDALONE) if entry.conversation is not None else None
    return text if isinstance(text, str) and text.strip() else None


def _names_version(text: str, library: str, version: str) -> bool:
    """A dotted version the turn's version starts with ("2.8" for 2.8.2, "2.x"), or a major version right after
    the library's name ("click 8")."""
    major = re.search(rf"(?<![\w-]){re.escape(library)}\s+v?(\d+)\b(?!\.\d)", text, re.IGNORECASE)
    if major and version.startswith(major.group(1) + "."):
        return True
    for match in _VERSION.finditer(text):
        written = match.group(1).lower()
        stem = written.removesuffix(".x")
        if version == written or version.startswith(stem + "."):
            return True
    return False


def _names_library(text: str, library: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(library)}(?![\w-])", text, re.IGNORECASE) is not None


def follow_up_reasons(
    text: str, entry: GoldenEntry, libraries: Iterable[str], versions: Iterable[str]
) -> list[str]:
    """Why ``text``, ``entry``'s standalone, still reads like a follow-up (empty: it reads as a question of its
    own). ``libraries``: the golden set's libraries; ``versions``: its versions of the entry's library."""
    reasons = []
    if " ".join(text.split()).lower() == " ".join(entry.question.split()).lower():
        reasons.append("not rewritten (it is the turn's question)")
    words = _WORD.findall(text)
    if len(words) < MIN_WORDS:
        reasons.append(f"too short ({len(words)} words, fewer than {MIN_WORDS})")
    opening = " ".join(w.lower() for w in words[:2])
    if (words and words[0].lower() in _OPENERS) or opening in _OPENING_PHRASES:
        reasons.append(f"opens like a follow-up ({' '.join(words[:2])!r})")
    back = _BACK_REFERENCE.search(text)
    if back:
        reasons.append(f"refers back ({back.group(0)!r})")
    if len(set(libraries)) > 1 and not _names_library(text, entry.library):
        reasons.append(f"names no library ({entry.library})")
    if len(set(versions)) > 1 and not _names_version(text, entry.library, entry.version):
        reasons.append(f"names no version ({entry.library} {entry.version})")
    return reasons


def standalone_warnings(entries: Sequence[GoldenEntry], path: str) -> list[str]:
    """One warning per standalone rewrite that reads like a follow-up, as ``PATH:LINE: turns[N].standalone:
    entry ID: message; fix: ...``."""
    libraries = {e.library for e in entries}
    versions: dict[str, set[str]] = {}
    for e in entries:
        versions.setdefault(e.library, set()).add(e.version)
    out = []
    for e in entries:
        text = standalone_of(e)
        if text is None:
            continue
        reasons = follow_up_reasons(text, e, libraries, versions[e.library])
        if reasons:
            out.append(
                f"{path}:{e.line}: {turn_field(e.turn, STANDALONE)}: entry {e.id}: reads like a follow-up: "
                f"{'; '.join(reasons)}; fix: write the question a user would ask with no history, naming "
                f"{e.library} {e.version} and what the earlier turns established"
            )
    return out


def missing_standalone(entries: Iterable[GoldenEntry]) -> list[str]:
    """The ids of the needs_memory turns that have no standalone rewrite."""
    return [
        e.id for e in entries if e.conversation is not None and e.needs_memory and standalone_of(e) is None
    ]


def standalone_entries(entries: Sequence[GoldenEntry]) -> list[GoldenEntry]:
    """``entries`` as the standalone replay asks them: each needs_memory turn with a rewrite asks the rewrite at
    its own labelled pin (``start_pin``), as a question of its own; every other entry as it is."""
    out = []
    for e in entries:
        text = standalone_of(e) if e.needs_memory else None
        out.append(
            e if text is None else dataclasses.replace(e, question=text, start_pin=(e.library, e.version))
        )
    return out


def format_standalone(entries: Sequence[GoldenEntry], path: str) -> list[str]:
    """``golden validate``'s lines on standalone rewrites: how many needs_memory turns have one, then a warning
    per rewrite that reads like a follow-up; none for a set without needs_memory turns."""
    needing = [e for e in entries if e.conversation is not None and e.needs_memory]
    if not needing:
        return []
    missing = len(missing_standalone(needing))
    head = f"standalone rewrites: {len(needing) - missing} of {len(needing)} needs_memory turns"
    if missing:
        head += " (memory recovery is measured only when every needs_memory turn of the split has one)"
    warnings = standalone_warnings(entries, path)
    return [head, *(f"  warning: {w}" for w in warnings)]
