"""What the docs state about a name in words (docs/design.md section 3.5): "renamed from `a`", "`a` was
renamed to `b`", "replaced by `b`", "deprecated ... use `b` instead", "use `b` instead of `a`", "previously
`a`", "instead of `a`". Each statement gives an old name and a new one (the documented object itself when the
sentence names none); the scope checks' marks (``doceval.inputs.marks``) decide separately whether the old
name is governed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from doceval.drafting.names import last, sentences

# A name in a statement: backticked (reST roles included), or written as only code is.
_NAME = (
    r"(?::[\w:]+:)?`{1,2}[~.!@]?(?P<GROUP>[A-Za-z_][\w.]*)(?:\([^`]*\))?(?:\s*<[^>`]*>)?`{1,2}"
    r"|(?P<GROUPb>[A-Za-z_]\w*(?:[._]\w+)+|[A-Za-z_]\w*(?=\())"
)


def _name(group: str) -> str:
    return _NAME.replace("GROUP", group)


# (pattern, the old name's group, the new name's group, what kind of statement); "object": the documented
# object; "b|object": group b, else the documented object.
_PATTERNS: tuple[tuple[re.Pattern[str], str, str, str], ...] = tuple(
    (re.compile(p, re.I), old, new, how)
    for p, old, new, how in (
        (rf"renamed\s+from\s+(?:{_name('a')})(?:\s+to\s+(?:{_name('b')}))?", "a", "b|object", "renamed"),
        (rf"(?:{_name('a')})[^.;]{{0,40}}?\brenamed\s+to\s+(?:{_name('b')})", "a", "b", "renamed"),
        (
            rf"^(?:this\s+\w+\s+)?(?:was\s+|has\s+been\s+|is\s+)?renamed\s+to\s+(?:{_name('b')})",
            "object",
            "b",
            "renamed",
        ),
        (
            rf"(?:{_name('a')})[^.;]{{0,40}}?\b(?:replaced|superseded)\s+(?:by|with)\s+(?:the\s+)?(?:new\s+)?"
            rf"(?:{_name('b')})",
            "a",
            "b",
            "replaced",
        ),
        (rf"\buse\s+(?:{_name('b')})\s+instead\s+of\s+(?:{_name('a')})", "a", "b", "replaced"),
        (
            rf"\b(?:previously|formerly)(?:\s+(?:was|named|called|known\s+as))?\s+(?:{_name('a')})",
            "a",
            "object",
            "previously",
        ),
    )
)
_MARK = re.compile(r"deprecat\w*|removed|no\s+longer", re.I)
_USE_INSTEAD = re.compile(
    rf"\b(?:use|in\s+favou?r\s+of|replaced\s+by|migrate\s+to|refer\s+to)\s+(?:\w+\s+){{0,3}}?(?:{_name('b')})",
    re.I,
)
# "Replace ``missing`` and ``default`` parameters with ``load_default`` and ``dump_default``": pairwise.
_REPLACE_WITH = re.compile(
    rf"\breplace[sd]?\s+(?:{_name('a')})(?:\s+and\s+(?:{_name('c')}))?(?:\s+\w+)?\s+with\s+(?:the\s+)?"
    rf"(?:{_name('b')})(?:\s+and\s+(?:{_name('d')}))?",
    re.I,
)
_INSTEAD_OF = re.compile(
    rf"\b(?:instead\s+of|rather\s+than|in\s+place\s+of|replaces)\s+(?:{_name('a')})", re.I
)


@dataclass(frozen=True)
class Statement:
    """A sentence saying that ``old`` gave way to ``new`` (short names, as written)."""

    old: str
    new: str
    sentence: str
    how: str  # "renamed", "replaced", "deprecated", "removed", "previously"
    written: str = ""  # the new name as written when dotted (``TypeAdapter.json_schema``), else ""


def _group(m: re.Match[str], key: str) -> str | None:
    value = m.group(key) or m.group(key + "b")
    return last(value.strip(".")) if value else None


def _written(m: re.Match[str], key: str) -> str:
    value = (m.group(key) or m.group(key + "b") or "").strip(".")
    return value if "." in value else ""


def statements(text: str, documented: str) -> Iterator[Statement]:
    """Every statement of the text; ``documented`` is the documented object's own name ("" for a section,
    where a statement must name both sides)."""
    body = text.split("\n", 1)[1] if "\n" in text else text
    previous = ""
    for sentence in sentences(body):
        flat = " ".join(sentence.split())
        yield from _pattern_statements(flat, sentence, documented)
        yield from _mark_then_use(flat, previous, sentence, documented)
        yield from _replace_with(flat, sentence)
        previous = flat


def _replace_with(flat: str, sentence: str) -> Iterator[Statement]:
    if not re.search(r"\breplace", flat, re.I):
        return
    for m in _REPLACE_WITH.finditer(flat):
        olds = [n for n in (_group(m, "a"), _group(m, "c")) if n]
        news = [n for n in (_group(m, "b"), _group(m, "d")) if n]
        if len(olds) == len(news):
            for old, new in zip(olds, news, strict=True):
                yield Statement(old, new, sentence, "replaced")


def _mark_then_use(flat: str, previous: str, sentence: str, documented: str) -> Iterator[Statement]:
    """ "`a` is deprecated; use `b` instead", "`a` was removed: use `b`", or the mark in the sentence before a
    "Use `b` instead." (pydantic writes "Deprecated: `a` is deprecated. Use `b` instead.")."""
    use = (
        _USE_INSTEAD.search(flat)
        if re.search(r"\buse\b|favou?r|replaced|migrate|refer", flat, re.I)
        else None
    )
    if use is None:
        return
    marked = flat if _MARK.search(flat[: use.start()]) else ""
    if (
        not marked
        and re.match(r"(?:please\s+|you\s+should\s+)?(?:use|migrate|refer)\b", flat, re.I)
        and _MARK.search(previous)
    ):
        marked = previous
    mark = _MARK.search(marked[: use.start()] if marked is flat else marked)
    if mark is None:
        return
    new = _group(use, "b")
    how = "removed" if mark.group(0).lower().startswith(("removed", "no longer")) else "deprecated"
    for old in _before_names(marked[: mark.start()]) or ([documented] if documented else []):
        if new and old:
            yield Statement(old, new, sentence, how, _written(use, "b"))


_KEYWORDS = re.compile(r"renamed|replaced|superseded|instead|previously|formerly", re.I)


def _pattern_statements(flat: str, sentence: str, documented: str) -> Iterator[Statement]:
    if not _KEYWORDS.search(flat):  # most sentences say none of it: skip the patterns (they backtrack)
        return
    for pattern, old_key, new_key, how in _PATTERNS:
        for m in pattern.finditer(flat):
            old = documented if old_key == "object" else _group(m, old_key)
            new = _group(m, "b") if new_key.startswith("b") else None
            if new is None and new_key.endswith("object"):
                new = documented
            if old and new:
                yield Statement(old, new, sentence, how, _written(m, "b") if new_key.startswith("b") else "")


def _before_names(fragment: str) -> list[str]:
    found = re.finditer(rf"(?:{_name('a')})", fragment)
    return [n for n in (_group(m, "a") for m in found) if n]


def instead_of(sentence: str) -> list[str]:
    """The names a sentence says something is used instead of ("instead of `a`", "replaces `a`")."""
    flat = " ".join(sentence.split())
    return [n for n in (_group(m, "a") for m in _INSTEAD_OF.finditer(flat)) if n]
