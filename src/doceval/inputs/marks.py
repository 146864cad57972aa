"""Marks in a document's text that say an API is not supported, and the names each one governs
(docs/design.md section 3.3).

A person reading "`enqueue` was removed in 2.0" learns that ``enqueue`` is gone, not that every name on the page
is; "Renamed from ``resultcallback``" retires ``resultcallback``, never the ``result_callback`` it documents. So
a mark governs only the names of its own clause (a sentence, or the part of one between ``;`` / ``:``):

| mark | governs |
|---|---|
| "removed", "deprecated"/"deprecation" | the names before it in the clause ("`put` was removed") |
| "no longer" | the names before and after it ("`a` is no longer supported", "there is no longer a `b` mode") |
| "renamed to", "replaced by/with", "superseded by" | the names before it (the old name, not the new one) |
| "renamed from" | the names after it, up to "to" ("renamed from `a` to `b`" marks `a`) |
| "renamed" (other forms) | the names before it and after it up to "to" ("Renamed `a` to `b`") |

| "previously (was/named/called)", "formerly (known as/named/called)" | the names after it, up to "to" or a comma |

A mark with no name before it in its clause ("Deprecated: use `b`", ``.. deprecated:: 1.4``, ``@deprecated``,
"No longer supported.") is about the documented object itself: it governs the document's header line (its
first line, up to the signature), and for "removed"/"no longer" also the names after it ("Removed `a`.").
Inside a parameter's description (numpydoc: a ``name : type`` line, its description indented below it) the
documented object is that parameter: "``interpolation : str`` ... Deprecated name for the method keyword" marks
``interpolation``, never the function. A dotted name (``np.msort``, ``df.append(``) is governed where the
object it ends in is: a deprecation of ``numpy.lib.function_base.msort`` governs ``np.msort``.
The extractor writes ``Deprecated: ...`` lines for ``@deprecated`` decorators (doceval.inputs.docs).
A name is found in what a mark governs by the one matching rule of :mod:`doceval.common.apimatch`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from doceval.common.apimatch import occurs

# Clause ends: a sentence end, a blank line, ";" or ":" followed by white space (so "a.b" and "::" inside a
# directive name stay whole). Every clause is matched casefolded.
_CLAUSE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n|;\s*|:{1,2}(?=\s|$)")
# Each mark: where it looks for the names it governs ("before", "after" up to "to", or "both"), and whether
# its clause-initial form ("Removed `a`.", "No longer accepts `b`.") also names what is gone after it.
_MARKS: tuple[tuple[re.Pattern[str], str, bool], ...] = (
    (re.compile(r"\brenamed\s+from\b", re.I), "after", False),
    (re.compile(r"\brenamed\s+to\b", re.I), "before", False),
    (re.compile(r"\brenamed\b", re.I), "both", False),
    (re.compile(r"\b(?:replaced|superseded)\s+(?:by|with)\b", re.I), "before", False),
    (re.compile(r"\bremoved\b", re.I), "before", True),
    (re.compile(r"\bno\s+longer\b", re.I), "both", True),
    (re.compile(r"(?<![\w.])deprecat(?:ed|es|ion)(?![\w])", re.I), "before", False),
    (
        re.compile(r"\b(?:previously|formerly)(?:\s+(?:was|were|named|called|known\s+as))?\b", re.I),
        "after",
        False,
    ),
)
# A numpydoc parameter: "name : type" at some indentation, its description indented deeper below it.
_PARAM = re.compile(r"^([ \t]*)([A-Za-z_]\w*)[ \t]+:[ \t]*\S.*$", re.M)
# A name in prose: backticked text, a dotted or snake_case name, a call, a decorator, camelCase.
_CODE_NAME = re.compile(r"`[^`]+`|[A-Za-z_]\w*[._]\w+|\w+\(|@\w+|\b[a-z]+[A-Z]\w*")


@dataclass(frozen=True)
class Mark:
    """One mark: the words that make it (``removed``, ``renamed from``...), the text it governs (casefolded),
    and, when it is about the documented object, that object's own name (``msort``), else ""."""

    words: str
    governed: str
    about: str = ""


def _clauses(text: str) -> list[str]:
    return [c.strip() for c in _CLAUSE_END.split(text) if c and c.strip()]


def _has_code_name(fragment: str) -> bool:
    """Whether the fragment names an API (backticks, a dotted or snake_case name, a call, camelCase), rather
    than only English words ("This method is", "The old"), which refer to the documented object."""
    return _CODE_NAME.search(fragment) is not None


def _up_to_to(fragment: str) -> str:
    return re.split(r"\bto\b|,", fragment, maxsplit=1)[0]


def _object_name(header: str) -> str:
    """The documented object's own name from a header line (``def numpy.lib.function_base.msort`` -> ``msort``)."""
    names = re.findall(r"[A-Za-z_]\w*", header)
    return names[-1].casefold() if names else ""


def _clause_marks(clause: str, header: str) -> list[Mark]:
    found: list[Mark] = []
    taken: list[tuple[int, int]] = []
    for pattern, where, after_when_first in _MARKS:
        for m in pattern.finditer(clause):
            if any(a <= m.start() < b for a, b in taken):
                continue  # "renamed" inside an already found "renamed from"
            taken.append((m.start(), m.end()))
            before, after = clause[: m.start()], _up_to_to(clause[m.end() :])
            governed: list[str] = []
            about = ""
            if where in ("before", "both"):
                if _has_code_name(before):
                    governed.append(before)
                else:
                    governed.append(header)
                    about = _object_name(header)
                    if after_when_first:
                        governed.append(after)
            if where in ("after", "both"):
                governed.append(after)
            found.append(Mark(m.group(0), "\n".join(governed).casefold(), about))
    return found


def find_marks(text: str) -> list[Mark]:
    """Every "not supported" mark in a document's text, with what it governs. The first line is the
    document's header (``def lib.f(...)``, ``# Title``): what a mark with no name of its own is about."""
    header = text.split("\n", 1)[0].split("(", 1)[0]
    rest, blocks = _parameter_blocks(text)
    marks: list[Mark] = []
    for clause in _clauses(rest):
        marks += _clause_marks(clause, header)
    for name, description in blocks:
        for clause in _clauses(description):
            marks += _clause_marks(clause, name)
    return marks


def _parameter_blocks(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The text without its numpydoc parameter descriptions, and each parameter's (name, description): what a
    mark inside a description is about is the parameter, not the documented function."""
    lines = text.split("\n")
    rest: list[str] = []
    blocks: list[tuple[str, str]] = []
    i = 0
    while i < len(lines):
        m = _PARAM.match(lines[i])
        if m is None or i == 0:  # the first line is the document's header, never a parameter
            rest.append(lines[i])
            i += 1
            continue
        indent = len(m.group(1).expandtabs())
        body: list[str] = []
        i += 1
        while i < len(lines) and (
            not lines[i].strip() or len(lines[i].expandtabs()) - len(lines[i].lstrip()) > indent
        ):
            body.append(lines[i])
            i += 1
        rest.append(lines[i - len(body) - 1])
        blocks.append((m.group(2), "\n".join(body)))
    return "\n".join(rest), blocks


def api_names(name: str) -> tuple[str, ...]:
    """What a forbidden string names: itself, and for a usage string (``Base = declarative_base(``,
    ``engine.execute(``, ``interpolation=``) the API or parameter it uses, so a mark on ``declarative_base``
    governs the usage string too."""
    called = re.findall(r"([A-Za-z_][\w.]*)\s*\(", name)
    bare = name.strip().lstrip("@.").rstrip("(=").strip()  # "interpolation=" names the parameter
    names = [name]
    if called and called[-1] != name:
        names.append(called[-1])
    if bare and bare != name and re.fullmatch(r"[A-Za-z_][\w.]*", bare):
        names.append(bare)
    return tuple(dict.fromkeys(names))


def governs(marks: list[Mark], name: str) -> bool:
    """Whether any of the marks governs ``name`` (or the API a usage string calls), or, for a dotted name, is
    about the object it ends in (``np.msort`` and a deprecation of ``numpy.lib.function_base.msort``)."""
    names = api_names(name)
    if any(occurs(n, mark.governed) for mark in marks for n in names):
        return True
    ends = {n.rsplit(".", 1)[1].casefold() for n in names if "." in n.strip(".")}
    return any(mark.about and mark.about in ends for mark in marks)
