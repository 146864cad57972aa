"""A relevant document's own code examples against the entry's version strings (doceval.inputs.doc_examples,
docs/design.md section 3.3): ``example_fails_strings`` warns where a grade-2 document shows the API a group names
in a form none of the group's alternatives matches, so an answer written like the document's example scores 0
(issue 41's conversation audits: ``Query.scalar`` against ``session.query(Item.id).scalar()``, ``before`` against
``BeforeValidator(...)``). The shipped sets: every such warning left is read and listed in the changes file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from doceval.cli.main import main
from doceval.inputs.corpus import load_corpus
from doceval.inputs.doc_examples import EXAMPLE_FAILS, code_examples
from doceval.inputs.docs import Document, write_corpus
from doceval.inputs.golden import parse_golden
from doceval.inputs.qrels import qrels_path
from doceval.inputs.scope import find_all
from doceval.inputs.scope_rules import pin_texts

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden"
PIN = "orm@1.4"
SCALAR = """Return the first element of the first result or None if no rows present.  If multiple rows are
returned, raises MultipleResultsFound.

  >>> session.query(Item.id).scalar()
  1

.. seealso::

    :meth:`.Query.one` - Query.scalar's stricter sibling
"""
VALIDATOR = """A metadata class that runs **before** the inner validation.

Example:
    ```py
    MyInt = Annotated[int, BeforeValidator(lambda v: v + 1)]
    ```
"""
ONE = """Return exactly one result.

E.g.::

    result = session.query(Item).filter(Item.id == 5).one()

Nothing about scalars here.
"""


def _doc(path: str, text: str) -> Document:
    return Document(f"{PIN}:{path}", "orm", "1.4", path, "function", text)


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Path:
    docs = [
        _doc("orm.Query.scalar", SCALAR),
        _doc("orm.BeforeValidator", VALIDATOR),
        _doc("orm.Query.one", ONE),
    ]
    write_corpus({PIN: docs}, tmp_path / "docs", 1500, {})
    return tmp_path / "docs"


def test_code_examples_are_fences_prompts_and_literal_blocks_not_directives() -> None:
    assert [ln.strip() for ln in code_examples(SCALAR)] == ["session.query(Item.id).scalar()"]
    assert [ln.strip() for ln in code_examples(VALIDATOR)] == [
        "MyInt = Annotated[int, BeforeValidator(lambda v: v + 1)]"
    ]
    assert [ln.strip() for ln in code_examples(ONE)] == [
        "result = session.query(Item).filter(Item.id == 5).one()"
    ]
    assert code_examples("See also::\n\nNothing indented follows.") == []


def _entry(eid: str, doc: str, reference: str, groups: list[list[str]]) -> dict[str, Any]:
    return {"id": eid, "question": f"question {eid}?", "library": "orm", "version": "1.4", "out_of_scope": False,
            "relevant_ids": [f"{PIN}:{doc}"], "reference_answer": reference, "expected_apis": [],
            "expected_any": groups, "forbidden_apis": [], "split": "test", "kind": "lookup"}  # fmt: skip


ROWS = [
    # the third audit's two cases: a dotted name the example never writes, a string glued inside the class name
    _entry(
        "dotted",
        "orm.Query.scalar",
        "Use result.scalar_one_or_none().",
        [["scalar_one_or_none", "Query.scalar"]],
    ),
    _entry("glued", "orm.BeforeValidator", "Use mode='before'.", [["before", "wrap"]]),
    # the example's own form is accepted; a group about another API; an example about another API
    _entry("accepted", "orm.Query.scalar", "Query.scalar: .scalar()", [["Query.scalar", ").scalar()"]]),
    _entry("other-group", "orm.Query.scalar", "Use result.first().", [["first(", "all("]]),
    _entry(
        "other-api", "orm.Query.one", "Use Query.scalar or Query.first.", [["Query.scalar", "Query.first"]]
    ),
]


def test_a_relevant_document_whose_example_fails_its_group_is_a_warning(
    tmp_path: Path, corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "golden.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    qrels = [{"id": r["id"], "doc_id": r["relevant_ids"][0], "grade": 2, "judged_by": "t", "reason": "r"}
             for r in ROWS]  # fmt: skip
    qrels_path(path).write_text("".join(json.dumps(q) + "\n" for q in qrels), encoding="utf-8")
    found, _ = find_all(parse_golden(path), pin_texts(load_corpus(corpus_dir).partitions))
    assert sorted((f.entry_id, f.detail) for f in found if f.rule == EXAMPLE_FAILS) == [
        ("dotted", f"scalar_one_or_none|Query.scalar in {PIN}:orm.Query.scalar"),
        ("glued", f"before|wrap in {PIN}:orm.BeforeValidator"),
    ]
    assert (
        main(["golden", "validate", str(path), "--corpus", str(corpus_dir)]) == 0
    )  # a warning, never an error
    out = capsys.readouterr().out
    assert (
        "entry dotted: its relevant document orm@1.4:orm.Query.scalar shows 'scalar' in its own examples"
        in out
    )


# "- `ENTRY` keeps `GROUP` (against DOC): REASON": a read example_fails_strings warning, in a changes file
_KEPT = re.compile(r"^- `([^`]+)` keeps `([^`]+)` \(against (\S+)\): (.{20,})$")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "changes"),
    [("v2.1.jsonl", "v2.1.changes.md"), ("conversations.jsonl", "conversations.changes.md")],
)
def test_every_example_warning_of_the_shipped_sets_is_read(
    name: str, changes: str, real_corpus_dir: Path
) -> None:
    found, _ = find_all(parse_golden(GOLDEN / name), pin_texts(load_corpus(real_corpus_dir).partitions))
    text = (GOLDEN / changes).read_text(encoding="utf-8")
    kept = {(m[1], f"{m[2]} in {m[3]}") for line in text.splitlines() if (m := _KEPT.match(line))}
    assert {(f.entry_id, f.detail) for f in found if f.rule == EXAMPLE_FAILS} == kept
