"""Label checks that read docs as a person would (doceval.inputs.marks, docs/design.md section 3.3): "removed in",
"renamed from/to", "replaced by", "no longer" and deprecation mark only the names they govern, in both
directions, on a made-up 2.0 page and on click 8.1.7's real ``result_callback`` docstring; ``allow_forbidden``
waives ``forbidden_api_supported``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from doceval.cli.main import main
from doceval.inputs.corpus import load_corpus
from doceval.inputs.docs import Document, write_corpus
from doceval.inputs.golden import parse_golden
from doceval.inputs.marks import find_marks, governs
from doceval.inputs.scope import find_all, load_checked_golden
from doceval.inputs.scope_rules import pin_texts

# A made-up queue library: 2.0 removed `enqueue` (and documents it in prose that never says "deprecated").
QUEUE_SUBMIT = (
    "# Submitting jobs\n\n"
    "Call `submit(job)` to put a job on the queue.\n\n"
    "`enqueue` was removed in 2.0. Use `submit` instead."
)
QUEUE_OPTIONS = (
    "# Options\n\n"
    "`submit` takes the job and an optional `priority`. The `retries=` argument is deprecated; set `policy` "
    "instead."
)
# click 8.1.7, click.core.MultiCommand.result_callback, as its docstring reads (what the extractor writes).
CLICK_RESULT_CALLBACK = """def click.core.MultiCommand.result_callback(self, replace: bool=False)

Adds a result callback to the command.  By default if a
result callback is already registered this will chain them but
this can be disabled with the `replace` parameter.  The result
callback is invoked with the return value of the subcommand
(or the list of return values from all subcommands if chaining
is enabled) as well as the parameters as they would be passed
to the main callback.

Example::

    @click.group()
    @click.option('-i', '--input', default=23)
    def cli(input):
        return 42

    @cli.result_callback()
    def process_result(result, input):
        return result + input

:param replace: if set to `True` an already existing result
                callback will be removed.

.. versionchanged:: 8.0
    Renamed from ``resultcallback``.

.. versionadded:: 3.0"""

# jobs 3.0 removed `enqueue` on one page, and a recipe page still calls it with no word about it.
JOBS_SUBMIT = "# Submitting jobs\n\n`enqueue` was removed in 3.0. Use `submit` instead."
JOBS_RETRY = "# Retrying a job\n\nPut the job back with a delay::\n\n    q.enqueue(job, delay=30)"

DOCS = {
    "queue@2.0": [("guide.submitting_jobs", QUEUE_SUBMIT), ("guide.options", QUEUE_OPTIONS)],
    "click@8.1.7": [("click.core.MultiCommand.result_callback", CLICK_RESULT_CALLBACK)],
    "jobs@3.0": [("guide.submitting_jobs", JOBS_SUBMIT), ("recipes.retry", JOBS_RETRY)],
}


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Path:
    docs = {
        pin: [Document(f"{pin}:{p}", pin.split("@")[0], pin.split("@")[1], p, "section", t) for p, t in items]
        for pin, items in DOCS.items()
    }
    write_corpus(docs, tmp_path / "docs", 4000, {})
    return tmp_path / "docs"


def _entry(eid: str, pin: str, doc: str, forbidden: list[str], **fields: Any) -> dict[str, Any]:
    library, version = pin.split("@")
    return {"id": eid, "question": f"how do I do {eid}?", "library": library, "version": version,
            "out_of_scope": False, "relevant_ids": [f"{pin}:{doc}"], "reference_answer": "see the docs",
            "expected_apis": [], "forbidden_apis": forbidden, "split": "test", "kind": "version_trap",
            **fields}  # fmt: skip


def _findings(tmp_path: Path, corpus_dir: Path, rows: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    path = tmp_path / "golden.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    found, _ = find_all(parse_golden(path), pin_texts(load_corpus(corpus_dir).partitions))
    return {(f.rule, f.entry_id, f.detail) for f in found}


# ------------------------------------------------------------------------------------ the marks themselves


@pytest.mark.parametrize(
    ("text", "marked", "not_marked"),
    [
        ("`enqueue` was removed in 2.0. Use `submit` instead.", "enqueue", "submit"),
        (CLICK_RESULT_CALLBACK, "resultcallback", "result_callback"),
        ("# Jobs\n\n`put` was renamed to `submit` in 2.0.", "put", "submit"),
        ("# Jobs\n\nRenamed `put` to `submit`.", "put", "submit"),
        ("# Jobs\n\n`Queue.put` is replaced by `Queue.submit`.", "Queue.put", "Queue.submit"),
        ("# Jobs\n\n`drain()` no longer exists; call `flush()`.", "drain(", "flush("),
        ("# Jobs\n\nThere is no longer a `sync=True` mode. Use `wait()`.", "sync=True", "wait("),
        ("# Jobs\n\nThe `retries=` argument is deprecated; set `policy` instead.", "retries=", "policy"),
        # A Sphinx directive and the extractor's @deprecated line are about the documented object itself.
        (
            "def lib.old_load(path)\n\n.. deprecated:: 1.4\n    Use `lib.load` instead.",
            "old_load",
            "lib.load",
        ),
        ("def lib.old_load(path)\n\nDeprecated: use `lib.load` instead.", "lib.old_load(", "lib.load"),
    ],
)
def test_a_mark_governs_the_name_it_is_about_and_no_other(text: str, marked: str, not_marked: str) -> None:
    marks = find_marks(text)
    assert governs(marks, marked), [m.governed for m in marks]
    assert not governs(marks, not_marked), [m.governed for m in marks]


def test_a_usage_string_is_governed_through_the_api_it_calls() -> None:
    marks = find_marks("# Base\n\nNote that `declarative_base` is superseded by `DeclarativeBase`.")
    assert governs(marks, "Base = declarative_base(")
    assert not governs(marks, "class Base(DeclarativeBase")


def test_prose_without_a_mark_marks_nothing() -> None:
    assert find_marks(QUEUE_SUBMIT.split("`enqueue`")[0]) == []


# -------------------------------------------------------------------------------- the validator's rules


def test_a_name_the_page_says_was_removed_is_no_supported_api(tmp_path: Path, corpus_dir: Path) -> None:
    """On main any page that says "deprecated" hides every name on it, and "removed in" counts as support."""
    rows = [
        _entry("forbids-removed", "queue@2.0", "guide.submitting_jobs", ["enqueue"]),
        _entry("forbids-current", "queue@2.0", "guide.options", ["submit("]),
    ]
    found = _findings(tmp_path, corpus_dir, rows)
    assert ("forbidden_api_supported", "forbids-removed", "enqueue") not in found
    # guide.options says "deprecated" about `retries=`, never about `submit`: the label is wrong.
    assert ("forbidden_api_supported", "forbids-current", "submit(") in found


def test_renamed_from_marks_the_old_click_name_never_the_new(tmp_path: Path, corpus_dir: Path) -> None:
    doc = "click.core.MultiCommand.result_callback"
    rows = [
        _entry("old-name", "click@8.1.7", doc, ["resultcallback"]),
        _entry("new-name", "click@8.1.7", doc, ["result_callback"]),
    ]
    found = _findings(tmp_path, corpus_dir, rows)
    assert ("forbidden_api_supported", "old-name", "resultcallback") not in found
    assert ("forbidden_in_relevant", "old-name", "resultcallback") not in found
    assert ("forbidden_api_supported", "new-name", "result_callback") in found
    assert ("forbidden_in_relevant", "new-name", "result_callback") in found


def test_a_relevant_document_marks_only_the_names_it_governs(tmp_path: Path, corpus_dir: Path) -> None:
    rows = [
        _entry("keeps-deprecated", "queue@2.0", "guide.options", ["retries="]),
        _entry("uses-current", "queue@2.0", "guide.options", ["priority"]),
    ]
    found = _findings(tmp_path, corpus_dir, rows)
    assert not any(f[1] == "keeps-deprecated" for f in found)
    assert ("forbidden_in_relevant", "uses-current", "priority") in found


def test_allow_forbidden_waives_forbidden_api_supported(tmp_path: Path, corpus_dir: Path) -> None:
    why = "a style entry: the answer must not call submit() directly"
    row = _entry("style", "queue@2.0", "guide.submitting_jobs", ["submit("], allow_forbidden={"submit(": why})
    plain = _entry("plain", "queue@2.0", "guide.submitting_jobs", ["submit("])
    assert _findings(tmp_path, corpus_dir, [row, plain]) == {
        ("forbidden_api_supported", "plain", "submit("),
        ("forbidden_in_relevant", "plain", "submit("),
    }


# ------------------------------------------------------------- a mark speaks for its own document only


def test_a_forbidden_name_one_page_marks_and_another_uses_unmarked_is_supported(
    tmp_path: Path, corpus_dir: Path
) -> None:
    """On the start commit one marked page passed the name whatever the other pages of the pin showed."""
    row = _entry("removed-api", "jobs@3.0", "guide.submitting_jobs", ["enqueue"])
    path = tmp_path / "golden.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    found, stats = find_all(parse_golden(path), pin_texts(load_corpus(corpus_dir).partitions))
    assert [(f.rule, f.detail) for f in found] == [("forbidden_api_supported", "enqueue")]
    assert "1 of the 2 jobs@3.0 documents that use it carry no mark" in found[0].message
    assert "jobs@3.0:recipes.retry" in found[0].message
    assert (stats["forbidden_deprecated"], stats["forbidden_supported"]) == (0, 1)


def test_a_waiver_with_a_reason_keeps_the_name_and_the_older_list_form_warns(
    tmp_path: Path, corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    why = "the retry recipe is a stale example; 3.0 removed enqueue"
    rows = [
        _entry(
            "reasoned", "jobs@3.0", "guide.submitting_jobs", ["enqueue"], allow_forbidden={"enqueue": why}
        ),
        _entry("listed", "jobs@3.0", "guide.submitting_jobs", ["enqueue"], allow_forbidden=["enqueue"]),
    ]
    assert _findings(tmp_path, corpus_dir, rows) == {("waiver_without_reason", "listed", "enqueue")}
    entries = parse_golden(tmp_path / "golden.jsonl")
    assert entries[0].allow_reasons == {"enqueue": why} and entries[1].allow_reasons == {}
    assert main(["golden", "validate", str(tmp_path / "golden.jsonl"), "--corpus", str(corpus_dir)]) == 0
    out = capsys.readouterr().out
    assert "0 marked in every document that uses them, 2 not: 2 of those kept by a waiver" in out
    assert "allow_forbidden: entry listed: keeps the forbidden 'enqueue' without saying why" in out
    assert "reasoned" not in out


@pytest.mark.parametrize(
    "waiver", [{"enqueue": ""}, {"enqueue": 3}, {"": "why"}, "enqueue", [""], {"other": "why"}]
)
def test_a_waiver_without_a_reason_or_for_no_forbidden_string_is_a_usage_error(
    tmp_path: Path, corpus_dir: Path, capsys: pytest.CaptureFixture[str], waiver: Any
) -> None:
    row = _entry("bad", "jobs@3.0", "guide.submitting_jobs", ["enqueue"], allow_forbidden=waiver)
    path = tmp_path / "golden.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    assert main(["golden", "validate", str(path), "--corpus", str(corpus_dir)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:1: allow_forbidden:" in err and "Traceback" not in err
    assert "not one of the entry's forbidden_apis" in err if waiver == {"other": "why"} else "reason" in err


def test_golden_validate_accepts_the_removed_api_label(
    tmp_path: Path, corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's user story: a correct label on a 2.0 page saying "`enqueue` was removed in 2.0"."""
    path = tmp_path / "golden.jsonl"
    row = _entry("q1", "queue@2.0", "guide.submitting_jobs", ["enqueue"], expected_apis=["submit"])
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    assert main(["golden", "validate", str(path), "--corpus", str(corpus_dir)]) == 0
    assert "1 marked in every document that uses them, 0 not" in capsys.readouterr().out


# numpy 1.26.4 and pandas 1.5.3 docstrings as the extractor writes them (shortened): the deprecation of a
# parameter sits in that parameter's description, a rename is said as "Previously was ...", and answers use
# the conventional aliases (np., df.) that the documented object's dotted path does not contain.
NUMPY_PERCENTILE = """def numpy.lib.function_base.percentile(a, q, axis=None, method='linear', interpolation=None)

Compute the q-th percentile of the data along the specified axis.

Parameters
----------
a : array_like of real numbers
    Input array or object that can be converted to an array.
interpolation : str, optional
    Deprecated name for the method keyword argument.

    .. deprecated:: 1.22.0

Returns
-------
percentile : scalar or ndarray
    If `q` is a single percentile and `axis=None`, then the result is a scalar."""
NUMPY_MSORT = """def numpy.lib.function_base.msort(a)

Return a copy of an array sorted along the first axis.

.. deprecated:: 1.24

   msort is deprecated, use ``np.sort(a, axis=0)`` instead.

>>> np.msort(a)"""
PANDAS_TO_CSV = """def pandas.core.generic.NDFrame.to_csv(self, path_or_buf=None, lineterminator=None)

Write object to a comma-separated values (csv) file.

lineterminator : str, optional
    The newline character or character sequence to use in the output file.

    .. versionchanged:: 1.5.0

        Previously was line_terminator, changed for consistency with
        read_csv and the standard library 'csv' module."""


def test_a_deprecation_inside_a_parameters_description_marks_the_parameter_never_the_function() -> None:
    marks = find_marks(NUMPY_PERCENTILE)
    assert governs(marks, "interpolation=") and governs(marks, "interpolation")
    assert not governs(marks, "percentile") and not governs(marks, "np.percentile")
    assert not governs(marks, "method=") and not governs(marks, "axis=")


def test_a_dotted_name_is_governed_where_the_object_it_ends_in_is_deprecated() -> None:
    marks = find_marks(NUMPY_MSORT)
    assert governs(marks, "np.msort") and governs(marks, "np.msort(")
    assert not governs(marks, "np.sort") and not governs(marks, "sort")


def test_previously_was_marks_the_old_name_only() -> None:
    marks = find_marks(PANDAS_TO_CSV)
    assert governs(marks, "line_terminator")
    assert (
        not governs(marks, "lineterminator")
        and not governs(marks, "read_csv")
        and not governs(marks, "to_csv")
    )


# ------------------------------------------------------------------------- the shipped golden sets

# sqla20-002 as v2.1 labelled it at the start commit of issue 41 item 5 (its evidence left out): SQLAlchemy
# 2.0.31 marks `= Column(` in 2 documents (an mssql parameter deprecation, synonym's "replaced with") and 32
# other documents declare model columns with it, unmarked.
SQLA20_002_AT_START = {
    "id": "sqla20-002", "library": "sqlalchemy", "version": "2.0.31", "out_of_scope": False,
    "question": "SQLAlchemy 2.0 declarative: how do I declare an integer primary key column and a string column "
    "on a model, with typing?",
    "relevant_ids": ["sqlalchemy@2.0.31:sqlalchemy.orm._orm_constructors.mapped_column"],
    "reference_answer": "Use Mapped annotations with mapped_column(): `id: Mapped[int] = "
    "mapped_column(primary_key=True)` and `name: Mapped[str] = mapped_column(String(50))`.",
    "expected_apis": ["Mapped[", "mapped_column", "primary_key=True"],
    "forbidden_apis": ["= Column(", "sa.Column(", "=Column("], "split": "test", "kind": "version_trap",
}  # fmt: skip
GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden"


@pytest.mark.slow
def test_sqla20_002_as_labelled_at_the_start_fails_the_stricter_check(
    tmp_path: Path, real_corpus_dir: Path
) -> None:
    path = tmp_path / "golden.jsonl"
    path.write_text(json.dumps(SQLA20_002_AT_START) + "\n", encoding="utf-8")
    found, _ = find_all(parse_golden(path), pin_texts(load_corpus(real_corpus_dir).partitions))
    supported = [f for f in found if f.rule == "forbidden_api_supported"]
    assert [f.detail for f in supported] == ["= Column("]
    assert "32 of the 34 sqlalchemy@2.0.31 documents that use it carry no mark" in supported[0].message


def test_the_shipped_sets_no_longer_forbid_column_and_give_every_waiver_a_reason() -> None:
    """The relabel (2.0 supports Column: sqla20-002 and the turn that carries its labels) and the waivers
    recorded in v2.1.changes.md / conversations.changes.md / data/golden/README.md."""
    for name in ("v2.1.jsonl", "conversations.jsonl", "extended.jsonl"):
        entries = {e.id: e for e in parse_golden(GOLDEN / name)}
        for e in entries.values():
            assert set(e.allow_forbidden) == set(e.allow_reasons), (name, e.id)
        relabelled = "conv-sqla14-01#3" if name == "conversations.jsonl" else "sqla20-002"
        assert entries[relabelled].forbidden_apis == () and "Mapped[" in entries[relabelled].expected_apis
    v21 = {e.id: e for e in parse_golden(GOLDEN / "v2.1.jsonl")}
    assert "Base = declarative_base(" in v21["sqla20-001"].allow_reasons


@pytest.mark.slow
@pytest.mark.parametrize(("name", "known"), [("v1.jsonl", 20), ("v2.jsonl", 8)])
def test_the_frozen_sets_keep_their_labels_and_record_the_stricter_findings(
    name: str, known: int, real_corpus_dir: Path
) -> None:
    report = load_checked_golden(GOLDEN / name, load_corpus(real_corpus_dir))[2]
    assert report.errors == [] and len(report.known) == known
    assert ("sqla20-002", "forbidden_api_supported", "forbidden_apis", "= Column(") in {
        f.key() for f in report.known
    }
