"""Text from data (golden questions, ids, answers, config values) made safe to print and to write.

- ``printable(s)``: for the terminal. Control characters (C0, DEL, C1: ESC sequences, carriage returns,
  bells), lone surrogates, line and paragraph separators and bidirectional overrides are shown escaped
  (``\\x1b``, ``\\ud800``, ``\\u202e``) instead of being replayed, so a question cannot recolour, move the
  cursor, rewrite earlier lines or reorder what the terminal shows.
- ``one_line(s)``: printable and on one line (every run of whitespace, newlines included, is one space).
- ``md_text(s)`` / ``md_code(s)``: one line of Markdown (report.md): HTML escaped, Markdown control
  characters neutralised, and ``|`` escaped so a value never breaks a table row.

Standard library only.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

# Shown escaped although not in category Cc: line/paragraph separators (a new line to some terminals) and the
# bidirectional embeddings, overrides and isolates ("Trojan Source": text displayed in another order).
_INVISIBLE = frozenset("\u2028\u2029\u200e\u200f\u061c\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _unsafe(ch: str) -> bool:
    # Cs: a lone surrogate, which no terminal or UTF-8 file can take.
    return ch in _INVISIBLE or unicodedata.category(ch) in ("Cc", "Cs")


def printable(text: Any) -> str:
    """``text`` safe to print to a terminal: every control character (C0 including newline and tab, DEL, C1),
    line separator and bidi control escaped as ``\\xNN`` / ``\\uNNNN``; everything else unchanged."""
    s = str(text)
    if s.isprintable():  # the common case: nothing to do (isprintable is False for every character above)
        return s
    return "".join(_escape(ch) if _unsafe(ch) else ch for ch in s)


def one_line(text: Any) -> str:
    """``text`` on one printable line: whitespace runs (newlines, tabs) become one space, then
    :func:`printable`."""
    return printable(" ".join(str(text).split()))


# Backslash-escaped in Markdown text: CommonMark's inline syntax (code, emphasis, links and images,
# strikethrough, autolinks are covered by the HTML escaping of "<"), GitHub's math ($) and the table pipe.
_MD_PUNCT = re.compile(r"([\\`*\[\]~$|#])")
# "_" opens or closes emphasis only next to a non-alphanumeric character ("snake_case" is safe as is).
_MD_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")


def html_escape(text: str) -> str:
    """``&``, ``<`` and ``>`` as entities (quotes need no escaping outside attributes)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def md_text(value: Any) -> str:
    """A value from data as one line of inert Markdown, safe in a table cell: one line, control characters
    escaped, HTML escaped (``<script>`` shows as text), Markdown syntax characters backslash-escaped and every
    ``|`` escaped (a row cannot be split)."""
    text = html_escape(one_line(value))
    text = _MD_PUNCT.sub(r"\\\1", text)
    return _MD_UNDERSCORE.sub(r"\\_", text)


# A code span shows its content literally, except that a backtick ends it, "|" still splits a table row, and
# some renderers pass "<"/">"/"&" through: values holding any of these are written as escaped text instead.
_NOT_IN_CODE = re.compile(r"[`|<>&\\]")


def md_code(value: Any) -> str:
    """A value from data as a Markdown code span (an id, a hash, a path), or as :func:`md_text` when it holds a
    character a code span cannot show safely."""
    text = one_line(value)
    if not text or _NOT_IN_CODE.search(text):
        return md_text(text)
    return f"`{text}`"


def md_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], align: Sequence[str] | None = None
) -> list[str]:
    """A Markdown pipe table; ``align`` per column, "l" or "r" (default: the first left, the rest right). The
    cells must already be inert (md_text, md_code)."""
    align = align or ["l"] + ["r"] * (len(header) - 1)
    rule = ["---:" if a == "r" else "---" for a in align]
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(rule) + " |",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]
