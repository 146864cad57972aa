"""The one rule for finding an expected or forbidden string in a text (docs/design.md sections 3.3 and 4).

The golden set's scope checks (a forbidden name in the question or in a relevant document, a nonexistent API
the pin documents), ``doceval golden validate`` and the ``version_correctness`` metric all ask the same
question: does this text use this API string? They must agree, or a label that validates clean scores every
correct answer 0. The rule:

- **case-insensitive** (both sides casefolded): an answer's prose capitalises ("Dict() is gone"), and no two
  APIs of one pin differ by case alone in the golden sets;
- **as a name, never glued to a longer identifier**: where the string starts (ends) with a letter, digit or
  ``_``, the text must not have one just before (after) it, so ``memoize`` is not found in "memoizes",
  ``model_dump`` not in ``model_dump_json``, ``dict(`` not in ``to_dict(``; a ``.`` is no identifier
  character, so ``dict(`` is found in ``model.dict(``;
- **punctuation is literal**: ``.dict(``, ``select([``, ``np.msort`` and ``pre=True`` must occur as written (a
  dotted name is not resolved: ``np.msort`` is not found in ``numpy.msort``);
- **a space in the string stands for any spacing**: any run of white space in the text, including none beside
  punctuation (``= Column(`` is found in ``x=Column(`` and ``x =  Column(``; ``from pydantic import
  BaseSettings`` across a line break); spaces at either end of the string are not part of it.

Every function matches casefolded text; callers that search one text for many names fold it once
(:func:`fold`) and use :func:`occurs`. This module imports nothing of doceval, so the scorers, the golden set's
checks and the marks may all import it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

# Names the rule in the identity of what it decides (the reference judge's hash): a change that moves a verdict
# bumps it.
RULE = "apimatch v1: casefolded, identifier boundaries, a space for any spacing"
_SPACE = re.compile(r"\s+")


def fold(text: str) -> str:
    """``text`` in the form every name is matched in (casefolded)."""
    return text.casefold()


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _body(name: str) -> tuple[str, str, str]:
    """The folded name as a regex without its boundaries, and its first and last character."""
    parts = _SPACE.split(fold(name).strip())
    body = ""
    for i, part in enumerate(parts):
        if i:
            glued = _is_word(parts[i - 1][-1:]) and _is_word(part[:1])
            body += r"\s+" if glued else r"\s*"
        body += re.escape(part)
    return body, parts[0][:1], parts[-1][-1:]


@lru_cache(maxsize=8192)
def name_pattern(name: str) -> re.Pattern[str]:
    """``name`` compiled under the rule (module docstring), to search casefolded text with."""
    body, first, last = _body(name)
    left = r"(?<!\w)" if _is_word(first) else ""
    right = r"(?!\w)" if _is_word(last) else ""
    return re.compile(left + body + right)


@lru_cache(maxsize=8192)
def _anchor(name: str) -> str:
    """The longest space-free piece of the folded name: a text without it cannot match (a fast pre-check)."""
    return max(_SPACE.split(fold(name).strip()), key=len)


def occurs(name: str, folded_text: str) -> bool:
    """Whether ``name`` occurs in ``folded_text`` (already :func:`fold`-ed) under the rule. An empty name
    occurs nowhere."""
    if not name.strip():
        return False
    return _anchor(name) in folded_text and name_pattern(name).search(folded_text) is not None


def glued(name: str, folded_text: str) -> list[tuple[int, int]]:
    """Where ``name`` is written in ``folded_text`` (already :func:`fold`-ed) but glued to a longer identifier,
    so the rule does not find it there (``model_dump`` in ``model_dump_json``, ``begin`` in ``autobegin``):
    the (start, end) of each such longer identifier, in order. An empty name is glued nowhere."""
    if not name.strip() or _anchor(name) not in folded_text:
        return []
    body, first, last = _body(name)
    out: list[tuple[int, int]] = []
    for m in re.finditer(body, folded_text):
        start, end = m.start(), m.end()
        left = _is_word(first) and start > 0 and _is_word(folded_text[start - 1])
        right = _is_word(last) and end < len(folded_text) and _is_word(folded_text[end])
        if not (left or right):
            continue
        while start > 0 and _is_word(folded_text[start - 1]):
            start -= 1
        while end < len(folded_text) and _is_word(folded_text[end]):
            end += 1
        if (start, end) not in out:
            out.append((start, end))
    return out


def mentions(text: str, name: str) -> bool:
    """Whether ``text`` uses the API string ``name`` (the rule of this module)."""
    return occurs(name, fold(text))


def mentions_any(text: str, names: Iterable[str]) -> bool:
    """Whether ``text`` uses at least one of ``names``."""
    folded = fold(text)
    return any(occurs(n, folded) for n in names)
