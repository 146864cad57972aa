"""An entry's version strings against its own texts, the reference answer and the question (docs/design.md
section 3.3), read by the one matcher that scores answers (:mod:`doceval.common.apimatch`).

| rule | what is wrong | severity |
|---|---|---|
| ``reference_fails_strings`` | the reference answer fails the entry's own version strings: an expected string it lacks, an ``expected_any`` group it names none of, a forbidden string it uses | error for graded sets and under ``--strict``, warning for older sets |
| ``expected_inside_name`` | the reference answer names an API (a code-like identifier) that holds an expected string glued to a longer name, and that API satisfies none of the string's alternatives | warning |
| ``expected_in_question`` | the entry's own question satisfies an ``expected_apis`` string or a whole ``expected_any`` group: any answer that repeats the question passes it, so it checks nothing | warning |

The first is the reference's own version_correctness: it must score 1, or the labels reject the answer they
were written from. ``allow_forbidden`` does not help here: a waiver waives the scope checks, never scoring.

The second catches the labels that went wrong when the matcher began to read strings as names (issue 40 C3):
``expected_apis: ["begin"]`` while the reference also offers ``Session(engine, autobegin=False)``: the matcher
does not find ``begin`` in ``autobegin``, so an answer that gives only that route scores 0. Often the longer
name is a right answer too (add it as an alternative, ``expected_any``); sometimes it is not (``by_alias`` does
not answer how to declare an alias), and the warning stays, read. Prose words that merely contain the string
("beginning", "styles") are not APIs: only an identifier with ``_`` or a digit, before ``(``, ``[``, ``=`` or
an attribute (``x.y``), after ``.`` or ``@``, or inside a backtick span counts.

The third: ``["validate", "validates"]`` for "how do I validate that a number is strictly greater than 0"
accepted the wrong ``Range(min=0)`` (the question says "validate"), and ``["begin", "autobegin"]`` for "so it
doesn't auto-begin transactions" accepted a prose "yes, set autocommit=True". Where the entry's other strings
carry the check, or the string is the API every answer to the question names, it stays, read and listed.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from doceval.common.apimatch import fold, glued, occurs
from doceval.inputs.golden import GoldenEntry

REFERENCE_FAILS = "reference_fails_strings"
INSIDE_NAME = "expected_inside_name"
IN_QUESTION = "expected_in_question"
STRICT_RULES = frozenset({REFERENCE_FAILS})  # a warning of an older set that `golden validate --strict` fails
WARNING_RULES = frozenset({INSIDE_NAME, IN_QUESTION})  # always warnings, in every set
_BACKTICKS = re.compile(r"`[^`]*`")

# Records one finding of the entry being checked: rule, field, detail, message, fix (doceval.inputs.scope).
Add = Callable[[str, str, str, str, str], None]


def reference_findings(e: GoldenEntry, add: Add) -> None:
    """The three rules for one in-scope entry (an out-of-scope entry has no reference answer to check)."""
    if e.out_of_scope:
        return
    text = fold(e.reference_answer)
    _fails(e, text, add)
    _inside_names(e, text, add)
    _in_question(e, add)


def _in_question(e: GoldenEntry, add: Add) -> None:
    question = fold(e.question)
    for group in [*((a,) for a in e.expected_apis), *e.expected_any]:
        hits = [a for a in group if occurs(a, question)]
        if hits:
            what = (
                f"the expected {group[0]!r}"
                if len(group) == 1
                else f"the group {list(group)} (by {hits[0]!r})"
            )
            add(
                IN_QUESTION,
                "expected_apis",
                "|".join(group),
                f"its own question satisfies {what}: any answer that repeats the question passes it, so it "
                "checks nothing",
                "require what a right answer adds (the argument, the other API, the value), drop the string if "
                "other strings carry the check, or keep it if every answer must name it anyway (say why in "
                "the changes file)",
            )


def _fails(e: GoldenEntry, text: str, add: Add) -> None:
    missing = [a for a in e.expected_apis if not occurs(a, text)]
    groups = [g for g in e.expected_any if not any(occurs(a, text) for a in g)]
    used = [a for a in e.forbidden_apis if occurs(a, text)]
    why = [
        *(f"lacks the expected {a!r}" for a in missing),
        *(f"names none of the alternatives {list(g)}" for g in groups),
        *(f"uses the forbidden {a!r}" for a in used),
    ]
    if why:
        detail = ", ".join([*missing, *("|".join(g) for g in groups), *used])
        add(
            REFERENCE_FAILS,
            "reference_answer",
            detail,
            f"its own reference answer fails its version strings (it {'; '.join(why)}): the labels reject the "
            "answer they were written from",
            "make the reference answer right by its strings, or fix the strings (an expected string every right "
            "answer names; alternatives in expected_any; a forbidden string no right answer uses)",
        )


def _inside_names(e: GoldenEntry, text: str, add: Add) -> None:
    """An expected string (or alternative) the reference names only as part of a longer API, whose group that
    API does not satisfy: an answer giving only that API scores 0."""
    code = [m.span() for m in _BACKTICKS.finditer(text)]
    groups = [*([a] for a in e.expected_apis), *e.expected_any]
    for group in groups:
        flagged: set[str] = set()  # one finding per API of a group, under the first alternative it holds
        for want in group:
            for api in _apis_holding(want, text, code):
                if api not in flagged and not any(occurs(alt, api) for alt in group):
                    flagged.add(api)
                    add(
                        INSIDE_NAME,
                        "expected_apis",
                        f"{want} in {api}",
                        f"its reference answer names {api!r}, which holds the expected {want!r} glued to a longer "
                        f"name: the matcher does not find {want!r} there, so an answer that gives only {api!r} "
                        "scores 0",
                        f"if {api!r} answers too, add it as an alternative (expected_any); if not, keep the "
                        "string (the warning stays: say why in the changes file)",
                    )


def _apis_holding(want: str, text: str, code: list[tuple[int, int]]) -> list[str]:
    """The code-like identifiers of ``text`` holding ``want`` glued, each with the ``(`` or ``[`` after it
    (so an alternative such as ``one_or_none(`` can be looked for in it)."""
    out: list[str] = []
    for start, end in glued(want, text):
        name = text[start:end]
        before, after = text[start - 1 : start], text[end : end + 1]
        attribute = after == "." and (text[end + 1 : end + 2].isalnum() or text[end + 1 : end + 2] == "_")
        in_code = any(a <= start and end <= b for a, b in code)
        if not (
            in_code
            or attribute
            or "_" in name
            or any(c.isdigit() for c in name)
            or (before and before in "@.")
            or (after and after in "([=")
        ):
            continue
        api = name + (after if after in ("(", "[") else "")
        if api not in out:
            out.append(api)
    return out
