"""API names in a document's text, as the drafter reads them (docs/design.md section 3.5, "Drafting rules").

A name is *code* when the text shows it as code: inside backticks (Markdown or reST, roles such as
``:meth:`.Session.get``` included), in a fenced or indented code block, on a ``>>>`` line, on the document's
header line (``def lib.mod.f(a, b=1)``, ``class ...``, ``module ...``), or, in prose, written the way only code
is (``snake_case``, ``dotted.path``, ``call(``, ``@decorator``, ``CamelCase`` with two capitals). English words
in prose are never names: "Submit a job" does not name ``submit``.
"""

from __future__ import annotations

import ast
import keyword
import re
from collections.abc import Iterator
from dataclasses import dataclass

_FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S)
_INLINE = re.compile(r"``([^`\n]+)``|`([^`\n]+)`")
_IDENT = re.compile(r"@?[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*\s*\(?")
# Prose words written as only code is: snake_case, dotted, a call, a decorator, CamelCase with two capitals.
_PROSE_CODE = re.compile(
    r"(?<![\w.`])(?:@[A-Za-z_]\w*|[A-Za-z_]\w*(?:[._][A-Za-z0-9_]+)+\(?|[A-Za-z_]\w*\(|[A-Z][a-z0-9]+[A-Z]\w*)"
)
_IMPORT_FROM = re.compile(r"\bfrom[ \t]+([A-Za-z_][\w.]*)[ \t]+import[ \t]+(\([\w\s,]*\)|[\w \t,]+)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(])|\n\s*\n")
_HEADER = re.compile(r"^(def|class|module)\s+([A-Za-z_][\w.]*)")
_HEADING = re.compile(r"^#{1,6}\s+(.*)$")


@dataclass(frozen=True)
class Header:
    """A document's first line: ``def``/``class``/``module`` with a dotted path (a docstring document), or a
    heading (a folder document's section); ``signature`` is the parameter list of a ``def``/``class``."""

    kind: str  # "def", "class", "module" or "section"
    path: str  # dotted path (docstring documents), else ""
    title: str  # the heading's text (sections), else ""
    signature: str  # "(a, b=1)" or ""


def header_of(text: str) -> Header:
    first = text.split("\n", 1)[0].strip()
    m = _HEADER.match(first)
    if m is not None:
        rest = first[m.end() :]
        if m.group(1) == "class" and rest.startswith("("):
            rest = rest[_closing(rest) + 1 :]  # the bases, then __init__'s signature
        return Header(m.group(1), m.group(2), "", rest if rest.startswith("(") else "")
    heading = _HEADING.match(first)
    return Header("section", "", (heading.group(1) if heading else first).strip(" #"), "")


def _closing(text: str) -> int:
    """Index of the parenthesis closing the one that opens ``text``."""
    depth = 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return i
    return len(text) - 1


def code_fragments(text: str) -> list[str]:
    """Every piece of the text shown as code: the header line (a heading is prose: ""), code blocks, ``>>>``
    lines, inline spans."""
    first = text.split("\n", 1)[0]
    out = [first if _HEADER.match(first.strip()) else ""]
    rest = text.split("\n", 1)[1] if "\n" in text else ""
    for m in _FENCE.finditer(rest):
        out.append(m.group(2))
    rest = _FENCE.sub("\n", rest)
    out += _indented_blocks(rest)
    out += [line.strip()[3:] for line in rest.splitlines() if line.strip().startswith(">>>")]
    out += [m.group(1) or m.group(2) for m in _INLINE.finditer(rest)]
    return out


def _indented_blocks(text: str) -> list[str]:
    """reST literal blocks: the indented lines after a paragraph ending in ``::``."""
    blocks: list[str] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.rstrip().endswith("::"):
            continue
        base = len(line) - len(line.lstrip())
        body: list[str] = []
        for follow in lines[i + 1 :]:
            if follow.strip() and len(follow) - len(follow.lstrip()) <= base:
                break
            body.append(follow)
        blocks.append("\n".join(body))
    return blocks


def prose_code(text: str) -> list[str]:
    """Names in prose written as only code is written (outside backticks and code blocks)."""
    rest = _INLINE.sub(" ", _FENCE.sub("\n", text))
    return [m.group(0) for m in _PROSE_CODE.finditer(rest)]


def identifiers(code: str) -> Iterator[str]:
    """Dotted identifiers in a code fragment (keywords and string contents left out)."""
    for m in _IDENT.finditer(_strip_strings(code)):
        name = m.group(0).rstrip("( \t").lstrip("@")
        if name and not keyword.iskeyword(name.split(".", 1)[0]):
            yield name


def calls(code: str) -> Iterator[str]:
    """Names called (``f(``, ``obj.f(``), decorated with (``@f``) or defined (``def f``, ``class F``) in code."""
    code = _strip_strings(code)
    for m in re.finditer(r"(?:\bdef\s+|\bclass\s+|@)?([A-Za-z_][\w.]*)\s*\(|@([A-Za-z_][\w.]*)", code):
        yield m.group(1) or m.group(2)
    for m in re.finditer(r"\b(?:def|class)\s+([A-Za-z_]\w*)", code):
        yield m.group(1)


def imports(code: str) -> Iterator[tuple[str, str]]:
    """``(module, name)`` for every ``from module import name`` in a code fragment."""
    for m in _IMPORT_FROM.finditer(code):
        for name in m.group(2).strip("()").replace("\n", " ").split(","):
            name = name.strip().split(" as ", 1)[0].strip()
            if name.isidentifier():
                yield m.group(1), name


def _strip_strings(code: str) -> str:
    return re.sub(r"'[^'\n]*'|\"[^\"\n]*\"", "''", code)


def last(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def sentences(text: str) -> list[str]:
    """The text's sentences (a blank line ends one too), each stripped, verbatim otherwise."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def sentence_with(text: str, needle: str) -> str | None:
    """The first sentence of ``text`` containing ``needle`` (case-sensitive), verbatim."""
    return next((s for s in sentences(text) if needle in s), None)


def summary(text: str) -> str:
    """The document's first sentence after its header line (or heading), on one line; "" if none."""
    body = text.split("\n", 1)[1] if "\n" in text else ""
    for sentence in sentences(body):
        line = " ".join(sentence.split())
        if line and not line.startswith(("Deprecated", "..", ":", ">>>", "Usage docs", "Example", "Args")):
            return line
    return ""


@dataclass(frozen=True)
class Param:
    name: str
    default: str | None  # the default as the signature writes it, or None


def parameters(signature: str) -> tuple[Param, ...] | None:
    """The parameters of a signature ``(a, b: int=1, *, c=None)``, or None when it does not parse."""
    try:
        tree = ast.parse(f"def f{signature}: pass")
    except SyntaxError:
        return None
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    out = [
        Param(p.arg, ast.unparse(d) if d is not None else None)
        for p, d in zip(positional, defaults, strict=True)
    ]
    out += [
        Param(p.arg, ast.unparse(d) if d is not None else None)
        for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
    ]
    return tuple(p for p in out if p.name not in ("self", "cls"))
