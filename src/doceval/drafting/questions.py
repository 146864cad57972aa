"""Questions and reference answers of drafted entries (docs/design.md section 3.5): a question asks for the
task a document describes, in its own words, never for the name; a reference answer quotes the evidence.

The task is a documented object's first sentence ("Adds a result callback to the command." -> "how do I add a
result callback to the command?") or a section's heading ("Submitting jobs" -> "what do I use for submitting
jobs?"). A text that names the entry's expected or forbidden API gives no question: it would hand over the
answer or make a correct answer fail.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Words after which a sentence's first word is a verb ("Adds a", "Generate the", "Returns whether").
_AFTER_VERB = frozenset(
    [
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "all",
        "any",
        "each",
        "every",
        "one",
        "its",
        "their",
        "it",
        "them",
        "whether",
        "if",
        "to",
        "from",
        "with",
        "new",
        "some",
        "no",
        "multiple",
        "another",
    ]
)
_MAX_TASK = 160


def present_tense(word: str) -> str:
    """The base form of a third-person verb ("Adds" -> "add", "Applies" -> "apply", "Passes" -> "pass")."""
    w = word.lower()
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith(("sses", "shes", "ches", "xes", "zes")):
        return w[:-2]
    if w.endswith("s") and not w.endswith("ss") and len(w) > 3:
        return w[:-1]
    return w


def task_question(library: str, version: str, task: str, heading: bool = False) -> str:
    """The question asking for a task in one pin."""
    task = _trim(task)
    where = f"In {library} {version}"
    if heading:
        return f"{where}, what do I use for {_lower_first(task)}?"
    words = task.split()
    if len(words) >= 2 and words[1].lower() in _AFTER_VERB and words[0][:1].isupper() and words[0].isalpha():
        return f"{where}, how do I {present_tense(words[0])} {' '.join(words[1:])}?"
    return f"{where}, which API does this: {_lower_first(task)}?"


def _trim(task: str) -> str:
    task = " ".join(task.split()).rstrip(".:;, ")
    if len(task) > _MAX_TASK:
        cut = max(task.rfind(", ", 0, _MAX_TASK), task.rfind(" (", 0, _MAX_TASK))
        task = task[:cut] if cut > 40 else task[:_MAX_TASK].rsplit(" ", 1)[0]
    return task


def _lower_first(text: str) -> str:
    first = text.split(" ", 1)[0]
    # "Base class for" -> "base class for", "A type" -> "a type"; "SQLAlchemy ..." and "HTTP ..." keep theirs.
    return text[:1].lower() + text[1:] if first[1:2].islower() or len(first) == 1 else text


def names_in(text: str, names: Iterable[str]) -> bool:
    """Whether the text contains any of the strings (casefolded, as the version-string checks read it), or
    the name inside one when that name is code-like (``model_dump`` in ``model_dump(``; not ``submit`` in
    ``.submit(``: "submitting" is a word)."""
    folded = text.casefold()
    for n in names:
        core = n.strip("(.=@ ")
        spelled = n if not n.isalnum() or code_like(n) else ""  # a bare English word is no version string
        if (spelled and spelled.casefold() in folded) or (
            core and code_like(core) and core.casefold() in folded
        ):
            return True
    return False


def code_like(name: str) -> bool:
    """A string only code would spell (``model_dump``, ``.dict(``, ``TypeAdapter``), not an English word."""
    core = name.strip()
    return bool(re.search(r"\w[_.]\w|[0-9]", core)) or sum(c.isupper() for c in core) >= 2


def usable_task(text: str, avoid: Iterable[str]) -> bool:
    """A task text to ask with: words, not code, and none of the strings to avoid (:func:`names_in`: an
    English word such as "submit" may stay, "Submitting jobs" asks for a task)."""
    return (
        bool(text)
        and "`" not in text
        and ">>>" not in text
        and not names_in(text, avoid)
        and len(re.findall(r"[A-Za-z]{3,}", text)) >= 2
    )


def quote(text: str, limit: int = 300) -> str:
    """A quote for a reference answer: one line, cut at a word boundary."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit].rsplit(" ", 1)[0] + " ..."
