"""The API inventory of one pin: the names its documents show as code, which documents document each name
(docs/design.md section 3.5), how code uses each name, the import paths and the defaults the docs state.

A document *documents* a name when it is that object's own document (a docstring document whose dotted path
ends in the name), or, for a section of your own docs, when its heading names it or its code calls or defines
it (``queue.submit(...)``, ``def connect(...)``). It *mentions* every other name it shows as code. Names are
compared casefolded, as the answer metrics compare them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from doceval.drafting.names import (
    Header,
    Param,
    calls,
    code_fragments,
    header_of,
    identifiers,
    imports,
    last,
    parameters,
    prose_code,
    sentences,
)
from doceval.inputs.scope_rules import PinText

# "`timeout` defaults to `10`", "the timeout parameter defaults to 10 seconds"
_DEFAULT_STATEMENT = re.compile(
    r"`{0,2}(?P<param>[A-Za-z_]\w*)`{0,2}(?:\s+(?:parameter|argument|option|keyword))?\s+defaults\s+to\s+"
    r"(?P<value>`{1,2}[^`]+`{1,2}|[^\s,;]+)"
)
_DEF_LINE = re.compile(r"\bdef\s+([A-Za-z_]\w*)\s*(\(.*\))\s*(?:->[^:]*)?:?\s*$", re.M)


@dataclass(frozen=True)
class DocInfo:
    doc_id: str
    header: Header
    name: str  # a docstring document's object name (last component of its path); "" for a section
    code: frozenset[str]  # casefolded last components of every name shown as code
    documents: frozenset[str]  # casefolded names the document documents
    params: tuple[Param, ...] | None  # a docstring document's signature, parsed


@dataclass(frozen=True)
class Default:
    """A default the docs state: the function (its path, or its name in your own docs), the parameter, the
    value as written, and where."""

    owner: str
    param: str
    value: str
    doc_id: str
    quote: str


@dataclass
class Inventory:
    pin: str
    texts: PinText
    docs: dict[str, DocInfo] = field(default_factory=dict)
    code: dict[str, set[str]] = field(default_factory=dict)  # name -> documents showing it as code
    documented: dict[str, set[str]] = field(default_factory=dict)  # name -> documents documenting it
    spelling: dict[str, str] = field(default_factory=dict)  # casefolded -> as the docs spell it
    uses: dict[str, set[str]] = field(default_factory=dict)  # name -> {"method", "call", "name"}
    imports: dict[str, dict[str, set[str]]] = field(default_factory=dict)  # name -> module -> documents
    defaults: list[Default] = field(default_factory=list)

    @property
    def library(self) -> str:
        return self.pin.split("@", 1)[0]

    @property
    def version(self) -> str:
        return self.pin.split("@", 1)[1]

    def has(self, name: str) -> bool:
        """Whether any document shows ``name`` as code."""
        return name.casefold() in self.code

    def documenting(self, name: str) -> set[str]:
        return self.documented.get(name.casefold(), set())

    def spelled(self, name: str) -> str:
        return self.spelling.get(name.casefold(), name)


def build_inventory(pin: str, texts: PinText) -> Inventory:
    """The inventory of one pin from its documents' text (``doceval.inputs.scope.PinText``)."""
    inv = Inventory(pin, texts)
    for doc_id, text in texts.docs.items():
        info = _doc_info(doc_id, text)
        inv.docs[doc_id] = info
        _add_names(inv, info, text)
        _add_imports(inv, doc_id, text)
        inv.defaults += _defaults(info, text)
    return inv


def _doc_info(doc_id: str, text: str) -> DocInfo:
    header = header_of(text)
    fragments = code_fragments(text)
    shown = [n for frag in fragments for n in identifiers(frag)] + [
        n.rstrip("(").lstrip("@") for n in prose_code(text)
    ]
    code = frozenset(last(n).casefold() for n in shown if n)
    if header.kind == "section":
        documented = {last(n).casefold() for frag in fragments[1:] for n in calls(frag)}
        documented |= {last(n).casefold() for n in identifiers(header.title)} & code
        name, params = "", None
    else:
        name = last(header.path)
        documented = {name.casefold()}
        params = parameters(header.signature) if header.signature else None
    return DocInfo(
        doc_id, header, name, code | {name.casefold()} - {""}, frozenset(documented - {""}), params
    )


def _add_names(inv: Inventory, info: DocInfo, text: str) -> None:
    for name in info.code:
        inv.code.setdefault(name, set()).add(info.doc_id)
    for name in info.documents:
        inv.documented.setdefault(name, set()).add(info.doc_id)
    if info.name:
        inv.spelling.setdefault(info.name.casefold(), info.name)
        inv.uses.setdefault(info.name.casefold(), set()).add(
            "method" if info.header.kind == "def" and _is_method(info) else "name"
        )
    for frag in code_fragments(text)[1:] + prose_code(text):
        for m in re.finditer(r"(\.)?\b([A-Za-z_]\w*)\b(\s*\()?", frag):
            key = m.group(2).casefold()
            if key not in info.code:
                continue
            inv.spelling.setdefault(key, m.group(2))
            use = "method" if m.group(1) and m.group(3) else "call" if m.group(3) else "name"
            inv.uses.setdefault(key, set()).add(use)


def _is_method(info: DocInfo) -> bool:
    return bool(info.params is not None and info.header.signature.lstrip("(").startswith(("self", "cls")))


def _add_imports(inv: Inventory, doc_id: str, text: str) -> None:
    for frag in code_fragments(text):
        for module, name in imports(frag):
            inv.imports.setdefault(name, {}).setdefault(module, set()).add(doc_id)


def _defaults(info: DocInfo, text: str) -> list[Default]:
    """Defaults stated by a docstring document's signature, by ``def`` lines in code, and in prose ("`P`
    defaults to `V`", about the document's object or the name called in that sentence)."""
    out: list[Default] = []
    first_line = text.split("\n", 1)[0]
    if info.params:
        out += [
            Default(info.header.path, p.name, p.default, info.doc_id, first_line)
            for p in info.params
            if p.default is not None
        ]
    for frag in code_fragments(text)[1:]:
        for m in _DEF_LINE.finditer(frag):
            params = parameters(m.group(2)) or ()
            out += [
                Default(m.group(1), p.name, p.default, info.doc_id, m.group(0).strip())
                for p in params
                if p.default is not None
            ]
    body = text.split("\n", 1)[1] if "\n" in text else ""
    for sentence in sentences(body) if " defaults to " in body else ():
        for m in _DEFAULT_STATEMENT.finditer(sentence):
            owner = info.header.path or _called_in(sentence, m.group("param"))
            if owner:
                value = m.group("value").strip("`").rstrip(".")
                out.append(Default(owner, m.group("param"), value, info.doc_id, sentence))
    return out


def _called_in(sentence: str, param: str) -> str:
    """The function a prose default is about: the first name the sentence calls, other than the parameter."""
    for frag in code_fragments("\n" + sentence)[1:] + [sentence]:
        for name in calls(frag):
            if last(name) != param:
                return last(name)
    return ""
