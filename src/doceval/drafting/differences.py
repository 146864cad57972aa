"""The API differences between two pins of a library (docs/design.md section 3.5), each with its evidence.

In order, each name taken once:

1. **renamed / removed with a replacement, from statements** in the new pin ("renamed from `a`", "`a` is
   deprecated; use `b` instead", ...: ``doceval.drafting.statements``): the old name documented in the old pin,
   the new one documented in the new pin. A new name the old pin documents too makes it a removal with that
   replacement when the old name is gone, and nothing (a deprecation only) when it is not.
2. **renamed, by matching**: two aligned documents (the same id, or the best match by words in the same file
   or class) whose code differs by one name in one place (``queue.enqueue(f, x)`` / ``queue.submit(f, x)``),
   or two documents of one class whose text matches and whose names differ; the old name gone from the new
   pin, the new one absent from the old.
3. **removed**: a name the old pin documents and the new pin shows nowhere as code, or only where a mark
   (``doceval.inputs.marks``) governs it; a replacement only where the docs state one.
4. **added**: a name the new pin documents and the old pin shows nowhere as code.
5. **moved**: a name imported (``from m import name``) only from other modules in the new pin than in the old.
6. **default changed**: one parameter of one function whose default both pins state (a signature, a ``def``
   line, "`p` defaults to `v`"), differently.

Gone means gone from every document shown as code; a name in prose is English ("Submit a job").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from doceval.drafting.inventory import Default, Inventory
from doceval.drafting.names import code_fragments, last, sentence_with, summary
from doceval.drafting.statements import Statement, instead_of, statements

KINDS = ("renamed", "removed", "added", "moved", "default_changed")
_SIMILAR = 0.5  # word Jaccard at which two documents of one file or class are the same document


@dataclass(frozen=True)
class Evidence:
    doc_id: str
    quote: str  # verbatim from the document


@dataclass(frozen=True)
class Difference:
    kind: str  # one of KINDS
    old_pin: str
    new_pin: str
    old: str  # renamed/removed: the old name; moved: the name; default_changed: the parameter; added: ""
    new: str  # renamed: the new name; removed: the stated replacement or ""; added, moved: the name
    rule: str  # how it was found, e.g. "statement:renamed", "matched:code", "absent", "import", "signature"
    old_evidence: tuple[Evidence, ...] = ()
    new_evidence: tuple[Evidence, ...] = ()
    owner: str = ""  # default_changed: the function
    old_value: str = ""  # default_changed: the old default; moved: the old module
    new_value: str = ""  # default_changed: the new default; moved: the new module
    alternative: str = ""  # added: the old pin's way that the new pin says it replaces ("instead of `a`")
    new_path: str = ""  # the new name as the statement writes it when dotted (``TypeAdapter.json_schema``)
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def library(self) -> str:
        return self.old_pin.split("@", 1)[0]

    def key(self) -> tuple[str, str, str, str]:
        return (self.kind, self.old.casefold(), self.new.casefold(), self.owner)

    def record(self) -> dict[str, Any]:
        """The difference as the drafter reports it (NAME.differences.jsonl) and provenance records it."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "library": self.library,
            "old_pin": self.old_pin,
            "new_pin": self.new_pin,
            "old": self.old,
            "new": self.new,
            "rule": self.rule,
        }
        for name in ("owner", "old_value", "new_value", "alternative", "new_path"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        out["evidence"] = [
            {"doc_id": e.doc_id, "quote": e.quote} for e in (*self.old_evidence, *self.new_evidence)
        ]
        return out


def find_differences(old: Inventory, new: Inventory) -> list[Difference]:
    """Every difference between two pins of one library (``old`` the earlier version), in a stable order."""
    found: list[Difference] = []
    taken_old: set[str] = set()  # old names already explained
    taken_new: set[str] = set()
    for diff in [*_from_statements(old, new), *_from_matching(old, new)]:
        # Several old names may give way to one new name when the docs say so ("use `model_validate`" on
        # validate, parse_obj and from_orm); a rename found by matching claims its new name alone.
        matched = diff.rule.startswith("matched")
        if diff.old.casefold() in taken_old or (matched and diff.new.casefold() in taken_new):
            continue
        found.append(diff)
        taken_old.add(diff.old.casefold())
        taken_new.add(diff.new.casefold())
    found += _removed(old, new, taken_old)
    found += _added(old, new, taken_new)
    found += _moved(old, new)
    found += _defaults_changed(old, new)
    return found


def gone(inv: Inventory, name: str) -> bool:
    """Whether the pin has no document of its own for ``name`` and shows it nowhere as code except where a
    mark governs it (the scope checks' marks). An object's own document keeps it, whatever it says: "no
    longer" in it is about behaviour, a deprecation is not a removal."""
    key = name.casefold()
    holders = inv.code.get(key, set())
    if any(inv.docs[d].name.casefold() == key for d in holders):
        return False
    return all(not inv.texts.unmarked(name, [d]) for d in sorted(holders))


def _from_statements(old: Inventory, new: Inventory) -> Iterator[Difference]:
    """The new pin's statements, then the old pin's about names gone from the new pin (1.4's "deprecated; use
    `Inspector.get_table_names`" on a method 2.0 no longer has)."""
    for doc_id in sorted(new.docs):
        for st in statements(new.texts.docs[doc_id], new.docs[doc_id].name):
            diff = _stated(old, new, st, doc_id)
            if diff is not None:
                yield diff
    for doc_id in sorted(old.docs):
        for st in statements(old.texts.docs[doc_id], old.docs[doc_id].name):
            if gone(new, st.old):
                diff = _stated(old, new, st, doc_id, in_old=True)
                if diff is not None:
                    yield diff


def _stated(
    old: Inventory, new: Inventory, st: Statement, doc_id: str, in_old: bool = False
) -> Difference | None:
    a, b = st.old.casefold(), st.new.casefold()
    stated = Evidence(doc_id, st.sentence)
    if in_old:
        if a == b or not old.documenting(a) or not new.documenting(b):
            return None
        near = old.docs[doc_id].header.path
        kind = "renamed" if not old.documenting(b) else "removed"
        return _spelled(
            kind,
            (old, a),
            (new, b),
            f"statement:{st.how}:old_pin",
            (stated, *documents_evidence(old, a, near)),
            documents_evidence(new, b, near),
            st.written,
        )
    if a != b and _parameter_pair(old, new, doc_id, a, b):
        path = new.docs[doc_id].header.path
        old_id = f"{old.pin}:{path}"
        return Difference(
            "renamed",
            old.pin,
            new.pin,
            st.old,
            st.new,
            f"statement:{st.how}:parameter",
            (Evidence(old_id, old.texts.docs[old_id].split("\n", 1)[0]),),
            (stated, Evidence(doc_id, new.texts.docs[doc_id].split("\n", 1)[0])),
            owner=path,
        )
    # The old name shown as code in the old pin is enough (pydantic 1's parse_obj has no docstring of its
    # own); the new one must be documented in the new pin.
    if a == b or not old.has(a) or not new.documenting(b):
        return None
    near = new.docs[doc_id].header.path
    if not old.documenting(b) and _retired(new, a, doc_id):
        kind, new_evidence = "renamed", (stated, *documents_evidence(new, b, near))
    elif gone(new, a):
        kind, new_evidence = "removed", (stated,)
    else:
        return None  # a deprecation only: both pins document both names
    return _spelled(
        kind,
        (old, a),
        (new, b),
        f"statement:{st.how}",
        documents_evidence(old, a, near),
        new_evidence,
        st.written,
    )


def _spelled(
    kind: str,
    old_name: tuple[Inventory, str],
    new_name: tuple[Inventory, str],
    rule: str,
    old_evidence: tuple[Evidence, ...],
    new_evidence: tuple[Evidence, ...],
    new_path: str,
) -> Difference:
    """A statement's difference between two names as each pin spells them."""
    (old, a), (new, b) = old_name, new_name
    return Difference(
        kind,
        old.pin,
        new.pin,
        old.spelled(a),
        new.spelled(b),
        rule,
        old_evidence,
        new_evidence,
        new_path=new_path,
    )


def _retired(new: Inventory, name: str, doc_id: str) -> bool:
    """Gone from the new pin, or marked (deprecated, removed, renamed) in the statement's own document when
    that documents it, else in every document of its own."""
    if gone(new, name):
        return True
    if new.docs[doc_id].name.casefold() == name.casefold():
        return not new.texts.unmarked(name, [doc_id])
    own = [d for d in new.documenting(name) if new.docs[d].name.casefold() == name.casefold()]
    return bool(own) and all(not new.texts.unmarked(name, [d]) for d in own)


def _parameter_pair(old: Inventory, new: Inventory, doc_id: str, a: str, b: str) -> bool:
    """Whether ``a`` is a parameter of the statement's object in the old pin (the same path) and not in the
    new, and ``b`` one in the new and not in the old."""
    path = new.docs[doc_id].header.path
    before = old.docs.get(f"{old.pin}:{path}")
    if not path or before is None or before.params is None or new.docs[doc_id].params is None:
        return False
    old_params = {p.name.casefold() for p in before.params}
    new_params = {p.name.casefold() for p in new.docs[doc_id].params or ()}
    return a in old_params - new_params and b in new_params - old_params


def documents_evidence(inv: Inventory, name: str, near: str = "", limit: int = 2) -> tuple[Evidence, ...]:
    """Evidence that the pin documents ``name``: its documents' first sentence (an object's own document)
    or the sentence that shows it (a section); the object's own documents first, those of the class or
    module of ``near`` (a dotted path) before the others."""
    owner = near.rsplit(".", 1)[0] if "." in near else near

    def rank(doc_id: str) -> tuple[bool, bool, str]:
        path = inv.docs[doc_id].header.path
        return (
            inv.docs[doc_id].name.casefold() != name.casefold(),
            not (owner and path.startswith(owner)),
            doc_id,
        )

    out: list[Evidence] = []
    for doc_id in sorted(inv.documenting(name), key=rank):
        text = inv.texts.docs[doc_id]
        quote = summary(text) if inv.docs[doc_id].name else ""
        quote = quote if quote and quote in text else _showing(text, inv.spelled(name))
        if quote:
            out.append(Evidence(doc_id, quote))
        if len(out) == limit:
            break
    return tuple(out)


def _showing(text: str, name: str) -> str:
    """The first sentence of the text that shows ``name`` (any case), else ""."""
    hit = re.search(re.escape(name), text, re.I)
    return (sentence_with(text, hit.group(0)) or "") if hit else ""


# ---------------------------------------------------------------------------------------------- matching
def _from_matching(old: Inventory, new: Inventory) -> Iterator[Difference]:
    seen: set[tuple[str, str]] = set()
    for old_id, new_id in aligned(old, new):
        for a, b, quote_old, quote_new in _substitutions(old, new, old_id, new_id):
            if (a, b) in seen or not _renamed_names(old, new, a, b):
                continue
            seen.add((a, b))
            quote_old = sentence_with(old.texts.docs[old_id], quote_old) or quote_old
            quote_new = sentence_with(new.texts.docs[new_id], quote_new) or quote_new
            yield Difference(
                "renamed",
                old.pin,
                new.pin,
                old.spelled(a),
                new.spelled(b),
                "matched:code",
                (Evidence(old_id, quote_old),),
                (Evidence(new_id, quote_new),),
            )


def _renamed_names(old: Inventory, new: Inventory, a: str, b: str) -> bool:
    return (
        a != b and bool(old.documenting(a)) and bool(new.documenting(b)) and not old.has(b) and gone(new, a)
    )


def aligned(old: Inventory, new: Inventory) -> list[tuple[str, str]]:
    """Pairs of documents that are the same document in both pins: the same id, else, within one file (a
    section) or class (a docstring document), the best match by words, each document once."""
    pairs = [(f"{old.pin}:{p}", f"{new.pin}:{p}") for p in sorted(_paths(old) & _paths(new))]
    only_old = {p for p in _paths(old) - _paths(new)}
    only_new = {p for p in _paths(new) - _paths(old)}
    by_container: dict[str, list[str]] = {}
    for p in only_new:
        by_container.setdefault(_container(p), []).append(p)
    scored = []
    for p in sorted(only_old):
        for q in by_container.get(_container(p), []):
            score = _jaccard(
                _words(old.texts.docs[f"{old.pin}:{p}"]), _words(new.texts.docs[f"{new.pin}:{q}"])
            )
            if score >= _SIMILAR:
                scored.append((score, p, q))
    used_old: set[str] = set()
    used_new: set[str] = set()
    for _, p, q in sorted(scored, key=lambda t: (-t[0], t[1], t[2])):
        if p not in used_old and q not in used_new:
            pairs.append((f"{old.pin}:{p}", f"{new.pin}:{q}"))
            used_old.add(p)
            used_new.add(q)
    return pairs


def _paths(inv: Inventory) -> set[str]:
    return {d.split(":", 1)[1] for d in inv.docs}


def _container(path: str) -> str:
    return path.rsplit(".", 1)[0] if "." in path else ""


def _words(text: str) -> set[str]:
    body = text.split("\n", 1)[1] if "\n" in text else text
    return set(re.findall(r"[a-z]{3,}", body.casefold()))


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


_TOKEN = re.compile(r"[A-Za-z_]\w*|'[^'\n]*'|\"[^\"\n]*\"|\S")


def _substitutions(
    old: Inventory, new: Inventory, old_id: str, new_id: str
) -> Iterator[tuple[str, str, str, str]]:
    """(old name, new name, old fragment, new fragment) where a code fragment of one document is the other's
    but for one identifier in one place; and the two documents' own names when they differ."""
    old_text, new_text = old.texts.docs[old_id], new.texts.docs[new_id]
    a_name, b_name = old.docs[old_id].name.casefold(), new.docs[new_id].name.casefold()
    if a_name and b_name and a_name != b_name:
        yield (
            a_name,
            b_name,
            summary(old_text) or old_text.split("\n", 1)[0],
            summary(new_text) or new_text.split("\n", 1)[0],
        )
    new_frags = [(f, _TOKEN.findall(f)) for f in code_fragments(new_text)[1:]]
    for frag in code_fragments(old_text)[1:]:
        tokens = _TOKEN.findall(frag)
        for other, other_tokens in new_frags:
            if len(tokens) != len(other_tokens) or tokens == other_tokens:
                continue
            differ = [(x, y) for x, y in zip(tokens, other_tokens, strict=True) if x != y]
            if len(differ) == 1 and differ[0][0].isidentifier() and differ[0][1].isidentifier():
                yield differ[0][0].casefold(), differ[0][1].casefold(), frag.strip(), other.strip()


# ---------------------------------------------------------------------------------- removed, added, moved
def _removed(old: Inventory, new: Inventory, taken: set[str]) -> Iterator[Difference]:
    for name in sorted(old.documented):
        if name in taken or not _own_name(old, new, name) or not gone(new, name):
            continue
        holders = sorted(new.code.get(name, set()))  # documents that mark it (gone: every holder does)
        stated = tuple(
            Evidence(d, q) for d in holders if (q := _showing(new.texts.docs[d], old.spelled(name)))
        )
        yield Difference(
            "removed",
            old.pin,
            new.pin,
            old.spelled(name),
            "",
            "statement:mark" if stated else "absent",
            documents_evidence(old, name),
            stated[:2],
        )


def _own_name(inv: Inventory, other: Inventory, name: str) -> bool:
    """A name worth a difference of its own: public, with an object's own document whose owner (class or
    module) the other pin has too (a member of an added or removed class goes with its class), or a name a
    section calls or defines that is not a plain variable (``queue`` in ``queue.submit(...)`` is no API)."""
    if name.startswith("_"):
        return False
    docs = inv.documenting(name)
    own = [inv.docs[d] for d in docs if inv.docs[d].name.casefold() == name]
    if own:
        return any(_owner_kept(d.header.path, other) for d in own)
    return bool(docs) and all(inv.docs[d].header.kind == "section" for d in docs) and _called(inv, name)


def _owner_kept(path: str, other: Inventory) -> bool:
    """Whether the other pin shows the owner of a dotted path (its class or module) as code; a path on a
    private module's own level (``click._bashcomplete.f``) has no public owner."""
    owner = path.rsplit(".", 1)[0] if "." in path else ""
    if not owner:
        return True
    name = last(owner)
    return not name.startswith("_") and other.has(name)


def _called(inv: Inventory, name: str) -> bool:
    return bool(inv.uses.get(name, set()) & {"method", "call"})


def _added(old: Inventory, new: Inventory, taken: set[str]) -> Iterator[Difference]:
    for name in sorted(new.documented):
        if name in taken or not _own_name(new, old, name) or old.has(name):
            continue
        evidence = documents_evidence(new, name)
        alternative = next((a for e in evidence for a in instead_of(e.quote) if old.documenting(a)), "")
        yield Difference(
            "added",
            old.pin,
            new.pin,
            "",
            new.spelled(name),
            "absent",
            (),
            evidence,
            alternative=old.spelled(alternative) if alternative else "",
        )


def _moved(old: Inventory, new: Inventory) -> Iterator[Difference]:
    for name in sorted(set(old.imports) & set(new.imports)):
        before, after = old.imports[name], new.imports[name]
        if set(before) & set(after) or len(before) != 1 or len(after) != 1:
            continue
        (m_old, docs_old), (m_new, docs_new) = next(iter(before.items())), next(iter(after.items()))
        ev_old = _import_evidence(old, sorted(docs_old), m_old, name)
        ev_new = _import_evidence(new, sorted(docs_new), m_new, name)
        yield Difference(
            "moved", old.pin, new.pin, name, name, "import", ev_old, ev_new, old_value=m_old, new_value=m_new
        )


def _import_evidence(inv: Inventory, docs: Iterable[str], module: str, name: str) -> tuple[Evidence, ...]:
    out = []
    for doc_id in docs:
        text = inv.texts.docs[doc_id]
        line = next(
            (ln.strip() for ln in text.splitlines() if f"from {module} import" in ln and name in ln), ""
        )
        if line:
            out.append(Evidence(doc_id, line))
    return tuple(out[:2])


def _defaults_changed(old: Inventory, new: Inventory) -> Iterator[Difference]:
    before, after = _by_parameter(old.defaults), _by_parameter(new.defaults)
    for key in sorted(set(before) & set(after)):
        values_old = {d.value for d in before[key]}
        values_new = {d.value for d in after[key]}
        if len(values_old) != 1 or len(values_new) != 1 or _same_value(values_old.pop(), values_new.pop()):
            continue
        d_old, d_new = before[key][0], after[key][0]
        yield Difference(
            "default_changed",
            old.pin,
            new.pin,
            d_old.param,
            d_new.param,
            "statement" if " defaults to " in d_new.quote else "signature",
            (Evidence(d_old.doc_id, d_old.quote),),
            (Evidence(d_new.doc_id, d_new.quote),),
            owner=key[0],
            old_value=d_old.value,
            new_value=d_new.value,
        )


def _same_value(a: str, b: str) -> bool:
    """One value however it is spelled: equal, or one constant reached by another path
    (``attributes.PASSIVE_OFF`` and ``PassiveFlag.PASSIVE_OFF``)."""
    return a == b or (a.rsplit(".", 1)[-1] == b.rsplit(".", 1)[-1] and ("." in a or "." in b))


def _by_parameter(defaults: Iterable[Default]) -> dict[tuple[str, str], list[Default]]:
    out: dict[tuple[str, str], list[Default]] = {}
    for d in defaults:
        out.setdefault((d.owner, d.param), []).append(d)
    return out
