"""A grade-2 document's own code examples against the entry's version strings (docs/design.md section 3.3), and
the names the golden-set rules give to expected strings and documents.

| rule | what is wrong | severity |
|---|---|---|
| ``example_fails_strings`` | a relevant (grade-2) document documents an API a version-string group names, its own code examples use that API, and they satisfy none of the group's alternatives | warning |

A document that answers the question teaches the answer's idiom; an answer written the way its examples are
scores 0 when the group spells the API only in another form. The audits found it twice: the group's
``Query.scalar`` (a dotted name, never resolved) against ``session.query(Item.id).scalar()`` in
``Query.scalar``'s own examples, and ``before`` against ``BeforeValidator(...)`` (the string glued inside the
class name). A group *names* the document when an alternative's API name (:func:`api_name`) is the document's
dotted path or ends it on a component boundary (the grading rules' naming, doceval.inputs.grading), or when an
alternative is glued inside the last component of that path (``before`` in ``BeforeValidator``). The
document's examples are its fenced blocks, its ``>>>`` lines and its reStructuredText literal blocks (a
paragraph ending in ``::``, ``.. code-block::``), and of those only the lines that use the documented name:
an example of something else proves nothing about the idiom. It stays a warning: sometimes the examples show
the API but not the whole answer (``Query.scalar``'s never say that several rows raise), and the entry keeps
the group for that reason, read and listed in its changes file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from doceval.common.apimatch import fold, glued, occurs
from doceval.inputs.golden import GoldenEntry
from doceval.inputs.selfcheck import Add

EXAMPLE_FAILS = "example_fails_strings"
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_CODE_DIRECTIVE = re.compile(r"\.\.\s+(code-block|code|sourcecode)::")


def api_name(raw: str) -> str | None:
    """The dotted name an expected string stands for (``.dict(`` -> ``dict``, ``@validator`` -> ``validator``,
    ``Mapped[`` -> ``Mapped``, ``frozen=True`` -> ``frozen``), or None when it is no identifier."""
    name = raw.strip().split("=", 1)[0].strip().lstrip(".@").rstrip("()[")
    return name if _DOTTED.fullmatch(name) else None


def dotted_path(doc_id: str) -> str:
    """The document's dotted path: its id without the ``LIB@VERSION:`` prefix."""
    head, sep, tail = doc_id.partition(":")
    return tail if sep and "@" in head else doc_id


def code_examples(text: str) -> list[str]:
    """The lines of ``text`` that are code: inside ``` fences, ``>>>`` prompts (without the prompt), and the
    indented block after a line ending in ``::`` (not a directive such as ``.. seealso::``) or after a
    ``.. code-block::`` directive."""
    out: list[str] = []
    fenced = False
    block: int | None = None  # indentation of the line that opened a literal block, while inside it
    for line in text.split("\n"):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if stripped.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            out.append(line)
            continue
        if block is not None:
            if not stripped:
                continue
            if indent > block:
                out.append(line)
                continue
            block = None
        if stripped.startswith(">>>"):
            out.append(stripped[3:])
        elif _CODE_DIRECTIVE.match(stripped) or (stripped.endswith("::") and not stripped.startswith("..")):
            block = indent
    return out


def _names_document(alternative: str, path: str) -> bool:
    name = api_name(alternative)
    if name and (path == name or path.endswith("." + name)):
        return True
    return bool(glued(alternative.strip(), fold(path.rsplit(".", 1)[-1])))


def example_findings(e: GoldenEntry, docs: Mapping[str, str], add: Add) -> None:
    """The rule for one in-scope entry against its relevant documents' texts (``doc id -> text``)."""
    if e.out_of_scope:
        return
    groups = [*((a,) for a in e.expected_apis), *e.expected_any]
    for doc_id in e.relevant_ids:
        path = dotted_path(doc_id)
        documented = path.rsplit(".", 1)[-1]
        uses = [ln for ln in code_examples(docs.get(doc_id, "")) if occurs(documented, fold(ln))]
        if not uses:
            continue
        shown = fold("\n".join(uses))
        for group in groups:
            if any(_names_document(a, path) for a in group) and not any(occurs(a, shown) for a in group):
                add(
                    EXAMPLE_FAILS,
                    "expected_apis",
                    f"{'|'.join(group)} in {doc_id}",
                    f"its relevant document {doc_id} shows {documented!r} in its own examples (e.g. "
                    f"{uses[0].strip()[:80]!r}) in a form none of {list(group)} matches: an answer written "
                    "like the document's example scores 0",
                    "add the example's form as an alternative (expected_any), or keep the group if the "
                    "example shows the API but not the whole answer (say why in the changes file)",
                )
