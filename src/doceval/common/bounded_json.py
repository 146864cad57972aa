"""JSON from a user or a system, read with its nesting bounded: Python's parser and every walker of a parsed
value recurse once per level, so 100k levels of ``[`` end in a RecursionError (a traceback) far from the input.
Deeper JSON is refused where it is read, as a ``json.JSONDecodeError`` at the bracket that goes too deep, so
each reader's "file:line: not valid JSON" handling names where it is (docs/design.md section 8.6).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

# The deepest nesting of [ and { doceval reads from a file or a reply: deeper JSON is refused where it is read
# (Python's parser and every walker here recurse once per level; 100k levels would end in a RecursionError).
MAX_JSON_DEPTH = 100
# A JSON string (escapes included) or a bracket: what counting the nesting needs to see.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def loads(text: str | bytes) -> Any:
    """``json.loads`` with the nesting bounded by ``MAX_JSON_DEPTH``: deeper JSON is a
    ``json.JSONDecodeError`` at the bracket that goes too deep, so every reader's "file:line: not valid JSON"
    handling names where it is."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise _too_deep(text) from None
    if deeper_than(data, MAX_JSON_DEPTH):
        raise _too_deep(text)
    return data


def deeper_than(data: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether a JSON-like value nests mappings and lists more than ``limit`` levels (counted without
    recursion: the value may come from a user's function, deeper than Python's stack)."""
    containers = (Mapping, list, tuple)
    stack: list[tuple[Any, int]] = [(data, 1)] if isinstance(data, containers) else []
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        children = value.values() if isinstance(value, Mapping) else value
        stack.extend((c, depth + 1) for c in children if isinstance(c, containers))
    return False


def _too_deep(text: str | bytes) -> json.JSONDecodeError:
    doc = text.decode("utf-8", "replace") if isinstance(text, bytes | bytearray) else text
    depth, pos = 0, 0
    for match in _JSON_TOKEN.finditer(doc):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                pos = match.start()
                break
        elif token in "]}":
            depth -= 1
    return json.JSONDecodeError(f"nested deeper than {MAX_JSON_DEPTH} levels of [ and {{", doc, pos)
