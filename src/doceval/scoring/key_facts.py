"""The key facts of a reference answer, and how many of them a candidate answer states.

A key fact is a piece of code the reference names: a parameter with its literal value (``as_string=True``), a
parameter name (``shell_complete=func`` -> ``shell_complete``, the value being a placeholder), a dotted API path
(``click.ParamType``), an identifier shaped like code (``load_from``, ``HostPort``, ``EXCLUDE``), a command-line
option (``--password``) or a backticked code span. Facts the reference offers as alternatives ("X or Y", the
entry's ``expected_any`` groups) form one OR-group: a candidate needs one of them. A candidate's score is the
share of groups it states, compared after normalising case, whitespace, quotes and trailing parentheses.

Prose is not a fact: a capitalised word at the start of a sentence, a version number, an English word. So an
answer with the right API and a wrong detail (another parameter, another value) loses that detail's fact while
the similarity of its wording to the reference barely moves.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# name=value, the value a literal (kept: a wrong value is a wrong fact) or a placeholder (only the name is kept)
_ASSIGN = re.compile(r"\b([A-Za-z_]\w*)\s*=\s*('[^']*'|\"[^\"]*\"|[\w\[\]-]+(?:\.[\w\[\]-]+)*)?")
_TOKEN = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*|@?[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*(?:\(\))?")
_PATH = re.compile(r"\S*[/~]\S*")  # file paths and URLs: their words are not API names
_BACKTICK = re.compile(r"`([^`\n]+)`")
_SENTENCE = re.compile(r"(?<=[.!?;:])\s+(?=[A-Z(`@])|\n+")
_QUOTES = str.maketrans("", "", "'\"`")
_LITERAL = re.compile(
    r"^(?:True|False|None|true|false|null|-?\d+(?:\.\d+)?|[A-Z][A-Z0-9_]+|\w+\.[A-Z][A-Z0-9_]+)$"
)
_QUOTED = re.compile(r"'(?!--)[^'\n]*'|\"(?!--)[^\"\n]*\"")
_NEAR = 30  # characters between an "or" and the facts it joins as alternatives
# Capitalised or all-caps words that are prose, not API names, in documentation answers.
_PROSE = frozenset(
    {
        "a",
        "an",
        "the",
        "i",
        "it",
        "its",
        "if",
        "in",
        "on",
        "or",
        "and",
        "of",
        "to",
        "for",
        "by",
        "as",
        "at",
        "use",
        "yes",
        "no",
        "not",
        "this",
        "that",
        "these",
        "those",
        "then",
        "there",
        "when",
        "with",
        "without",
        "since",
        "per",
        "call",
        "set",
        "pass",
        "note",
        "also",
        "only",
        "both",
        "each",
        "every",
        "python",
        "json",
        "yaml",
        "csv",
        "xml",
        "html",
        "http",
        "https",
        "url",
        "api",
        "cli",
        "os",
        "unix",
        "linux",
        "macos",
        "windows",
        "utf",
        "ascii",
        "sql",
        "orm",
        "id",
        "ok",
        "io",
        "true",
        "false",
        "none",
        "e.g",
        "i.e",
        "etc",
    }
)
_OR = re.compile(r"\bor\b|\balternatively\b", re.IGNORECASE)


@dataclass(frozen=True)
class KeyFacts:
    """A reference's facts: each group is satisfied by any one of its (normalised) alternatives."""

    groups: tuple[tuple[str, ...], ...]

    def matched(self, answer: str) -> list[bool]:
        text = normalise(answer)
        return [any(_contains(text, f) for f in group) for group in self.groups]

    def share(self, answer: str) -> float:
        """Share of groups ``answer`` states; 1.0 when the reference names no fact (nothing to miss)."""
        hits = self.matched(answer)
        return sum(hits) / len(hits) if hits else 1.0

    def missing(self, answer: str) -> list[tuple[str, ...]]:
        return [g for g, ok in zip(self.groups, self.matched(answer), strict=True) if not ok]


def normalise(text: str) -> str:
    """Case, quotes and whitespace out of the way: ``Meta: unknown = EXCLUDE`` -> ``meta: unknown=exclude``."""
    t = text.translate(_QUOTES).casefold()
    t = re.sub(r"\s*([=(),\[\]])\s*", r"\1", t)
    return re.sub(r"\s+", " ", t)


def _fact(raw: str) -> str:
    f = normalise(raw).strip(" .,;:")
    while f.endswith("()"):
        f = f[:-2]
    return f.lstrip("@")


def _contains(text: str, fact: str) -> bool:
    """``fact`` in ``text`` as whole code (``load`` does not match ``load_from``); a dotted path also matches by
    its last name when that name is distinctive (``from click import ParamType``)."""
    if _find(text, fact):
        return True
    head, _, last = fact.rpartition(".")
    return bool(head) and _distinctive(last) and _find(text, last)


def _find(text: str, fact: str) -> bool:
    before = r"(?<![\w-])" if fact[:1].isalnum() or fact[:1] == "_" else ""
    after = r"(?![\w-])" if fact[-1:].isalnum() or fact[-1:] == "_" else ""
    return re.search(before + re.escape(fact) + after, text) is not None


def _distinctive(name: str) -> bool:
    return "_" in name or len(name) > 3 and name.casefold() not in _PROSE and not name.isalpha()


def _blank(m: re.Match[str]) -> str:
    return " " * len(m.group(0))


def _code_shaped(token: str, sentence_start: bool) -> bool:
    """Whether a bare token names code rather than prose."""
    word = token.lstrip("@").removesuffix("()")
    if word.casefold() in _PROSE or len(word) < 3:
        return False
    if token.startswith(("@", "-")) or token.endswith("()") or "." in word or "_" in word:
        return True
    inner_cap = any(c.isupper() for c in word[1:]) and any(c.islower() for c in word)
    all_caps = word.isupper() and len(word) >= 4
    return inner_cap or all_caps or (word[0].isupper() and not sentence_start)


def _sentence_facts(sentence: str) -> list[tuple[int, int, str]]:
    """(start, end, fact) of every fact in one sentence, in order; parameters and code spans claim theirs."""
    sentence = _PATH.sub(_blank, sentence)
    found: list[tuple[int, int, str]] = []
    taken: list[tuple[int, int]] = []
    for m in _ASSIGN.finditer(sentence):
        name, value = m.group(1), (m.group(2) or "").strip()
        literal = _LITERAL.match(value) is not None
        found.append((m.start(), m.end(), _fact(f"{name}={value}" if literal else name)))
        taken.append((m.start(), m.end() if literal or not value else m.start(2)))
    for m in _BACKTICK.finditer(sentence):
        code = m.group(1).strip()
        if "=" in code or " " in code:
            continue  # a statement: its parameters and names are facts of their own
        if "(" in code and not re.search(r"\(['\"]", code):
            code = code[: code.index("(")]  # a call with placeholder arguments: the callee is the fact
        found.append((m.start(), m.end(), _fact(code)))
        taken.append((m.start(), m.end()))
    prose = _QUOTED.sub(_blank, sentence)  # quoted strings are example values ('My App'), not names
    for n, m in enumerate(_TOKEN.finditer(prose)):
        if not any(a <= m.start() < b for a, b in taken) and _code_shaped(m.group(0), n == 0):
            found.append((m.start(), m.end(), _fact(m.group(0))))
    # a name the reference makes up for the user's own code (MyShellComplete, my_func) is not a fact
    return [(a, b, f) for a, b, f in sorted(found) if f and not f[0].isdigit() and not f.startswith("my")]


def extract(
    reference: str,
    expected_any: Sequence[Sequence[str]] = (),
    forbidden: Sequence[str] = (),
) -> KeyFacts:
    """The key facts of ``reference``: its code facts, alternatives joined into OR-groups, the entry's
    ``expected_any`` groups, and nothing the entry forbids (a reference may name the old API it replaces)."""
    bad = [b for s in forbidden if (b := _fact(s).rstrip("=("))]
    groups: list[list[str]] = [[_fact(s) for s in g if _fact(s)] for g in expected_any]
    groups = [g for g in groups if g]
    for sentence in _SENTENCE.split(reference):
        facts = [(a, b, f) for a, b, f in _sentence_facts(sentence) if not any(_find(f, x) for x in bad)]
        joined: dict[int, int] = {}  # index of a fact -> index of the fact it is an alternative to
        for m in _OR.finditer(sentence):
            left = [i for i, (_, b, _) in enumerate(facts) if m.start() - _NEAR <= b <= m.start()]
            right = [i for i, (a, _, _) in enumerate(facts) if m.end() <= a <= m.end() + _NEAR]
            if left and right:
                joined[right[0]] = left[-1]
        for i, (_, _, f) in enumerate(facts):
            if i in joined:
                _join(groups, facts[joined[i]][2], f)
            elif not any(f in g for g in groups):
                groups.append([f])
    return KeyFacts(tuple(tuple(dict.fromkeys(g)) for g in groups))


def _join(groups: list[list[str]], existing: str, alternative: str) -> None:
    for g in groups:
        if existing in g:
            if alternative not in g:
                g.append(alternative)
            return
    groups.append([existing, alternative])
