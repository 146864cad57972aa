"""One matcher for expected and forbidden strings (doceval.common.apimatch; docs/design.md 3.3 and 4): the scope
checks, `doceval golden validate` and version_correctness read a string the same way, so a label that validates
clean under --strict never scores a correct answer 0 (issue 40, C3)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from doceval.cli.main import main
from doceval.common.apimatch import fold, mentions, mentions_any, name_pattern, occurs
from doceval.inputs.corpus import load_corpus
from doceval.inputs.docs import Document, write_corpus
from doceval.inputs.golden import parse_golden
from doceval.inputs.scope import find_all
from doceval.inputs.scope_rules import pin_texts
from doceval.scoring.contrast import contrast_only
from doceval.scoring.metrics import AnswerView, contains_apis, version_correctness


@pytest.mark.parametrize(
    ("text", "name", "found"),
    [
        ("Use `memoize(fn)` to cache it.", "memoize", True),
        ("`cache` memoizes the results.", "memoize", False),  # the case: a longer word, not the API
        ("Model.MODEL_DUMP()", "model_dump", True),  # case-insensitive
        ("call model_dump_json()", "model_dump", False),  # a longer identifier
        ("obj.to_dict()", "dict(", False),
        ("obj.dict()", "dict(", True),  # a dot is no identifier character
        ("obj.dict()", ".dict(", True),
        ("x=Column(Integer)", "= Column(", True),  # a space in the string stands for any spacing
        ("x =   Column(Integer)", "= Column(", True),
        ("x = Column(Integer)", "=Column(", False),  # no spacing where the string has none
        ("from pydantic import\n    BaseSettings", "from pydantic import BaseSettings", True),
        ("from pydantic importBaseSettings", "from pydantic import BaseSettings", False),
        ("use @validator('x')", " validator(", True),  # spaces at the ends are not part of the string
        ("use field_validator('x')", " validator(", False),
        ("numpy.msort(a)", "np.msort", False),  # a dotted name is literal
        ("np.msort(a)", "np.msort", True),
        ("select([t])", "select([", True),
        ("anything", "", False),
        ("anything", "   ", False),
    ],
)
def test_the_rule(text: str, name: str, found: bool) -> None:
    assert mentions(text, name) is found
    assert occurs(name, fold(text)) is found
    assert (name_pattern(name).search(fold(text)) is not None) is found or not name.strip()


def test_mentions_any_and_contains_apis_use_the_rule() -> None:
    assert mentions_any("x.dict()", ["model_dump", ".dict("])
    assert not mentions_any("memoizes", ["memoize", "cache("])
    assert contains_apis("it memoizes results; use cache()", ["cache("], ["memoize"])
    assert not contains_apis("call memoize(f)", ["memoize"], [], [["cache(", "lru_cache("]])


# A made-up library whose page says "memoizes": forbidding the removed `memoize` must not fail an answer
# that says so too.
PAGE = "# Caching\n\n`cache(fn)` memoizes the results of `fn` per argument tuple."


def _golden(tmp_path: Path, question: str = "How do I cache a function in acme 2.0?") -> Path:
    docs = {"acme@2.0": [Document("acme@2.0:guide.caching", "acme", "2.0", "guide.caching", "section", PAGE)]}
    write_corpus(docs, tmp_path / "docs", 4000, {})
    row = {"id": "q1", "question": question, "library": "acme", "version": "2.0", "out_of_scope": False,
           "relevant_ids": ["acme@2.0:guide.caching"], "reference_answer": "Use cache(fn).",
           "expected_apis": ["cache("], "forbidden_apis": ["memoize"], "split": "test", "kind": "version_trap"}  # fmt: skip
    path = tmp_path / "golden.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    qrel = {
        "id": "q1",
        "doc_id": "acme@2.0:guide.caching",
        "grade": 2,
        "judged_by": "test",
        "reason": "answers",
    }
    (tmp_path / "golden.qrels.jsonl").write_text(json.dumps(qrel) + "\n", encoding="utf-8")
    return path


def test_a_label_that_validates_clean_scores_the_correct_answer_1(tmp_path: Path) -> None:
    """Issue 40, C3: on main the validator read `memoize` as a name (not in "memoizes") while
    version_correctness read a substring, so the label validated clean under --strict and every correct answer
    (which says what the page says) scored 0."""
    path = _golden(tmp_path)
    assert main(["golden", "validate", str(path), "--corpus", str(tmp_path / "docs"), "--strict"]) == 0
    answer = "Use `cache(fn)`: it memoizes the results of fn."
    view = AnswerView(out_of_scope=np.array([False]), refused=np.array([False]), answers=[answer],
                      expected=[["cache("]], forbidden=[["memoize"]], verdicts=[None], judge_ran=False)  # fmt: skip
    assert version_correctness(view).tolist() == [1.0]


def test_the_validator_and_the_metric_agree_string_by_string(tmp_path: Path) -> None:
    """Every forbidden string the validator finds in a relevant document (forbidden_in_relevant) is one the
    metric fails an answer quoting that document for, and the reverse."""
    path = _golden(tmp_path)
    pins = pin_texts(load_corpus(tmp_path / "docs").partitions)
    for name in ("memoize", "cache(", "cache", "results of", "per  argument", "tuple.", "fn", "f"):
        row = json.loads(path.read_text(encoding="utf-8"))
        row["forbidden_apis"], row["expected_apis"] = [name], []
        path.write_text(json.dumps(row) + "\n", encoding="utf-8")
        found = {f.rule for f in find_all(parse_golden(path), pins)[0]}
        assert ("forbidden_in_relevant" in found) is (not contains_apis(PAGE, [], [name])), name


def test_the_question_is_read_by_the_same_rule(tmp_path: Path) -> None:
    pins_dir = _golden(tmp_path, "Why does cache memoize nothing in acme 2.0?")
    found = {
        f.rule
        for f in find_all(parse_golden(pins_dir), pin_texts(load_corpus(tmp_path / "docs").partitions))[0]
    }
    assert "forbidden_in_question" in found
    path = _golden(tmp_path, "Is it still called memoizer in acme 2.0?")
    found = {
        f.rule for f in find_all(parse_golden(path), pin_texts(load_corpus(tmp_path / "docs").partitions))[0]
    }
    assert "forbidden_in_question" not in found


def test_the_contrast_list_finds_the_occurrences_the_metric_failed_on() -> None:
    answer = "Use model_dump() instead of .dict(): x.model_dump()"
    assert contrast_only(answer, ["model_dump("], [".dict("]) == [(".dict(", answer)]
    assert (
        contrast_only("model_dump() and x .dict()", ["model_dump("], [".dict("]) == []
    )  # a plain use: a genuine failure
