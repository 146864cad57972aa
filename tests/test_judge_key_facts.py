"""The reference answer's key facts (doceval.scoring.key_facts) on concrete answers, and the paired bootstrap
that decides whether a judge beats version strings alone (doceval.scoring.agreement)."""

from __future__ import annotations

import numpy as np
import pytest

from doceval.scoring.agreement import cohen_kappa, paired_kappa_difference
from doceval.scoring.key_facts import extract, normalise

DECIMAL = "Use fields.Decimal(places=2, as_string=True). It (de)serializes to decimal.Decimal."


def test_parameters_keep_literal_values_and_drop_placeholders() -> None:
    facts = extract("Pass shell_complete=func to click.option. Use CliRunner(mix_stderr=False).")
    assert facts.groups == (("shell_complete",), ("click.option",), ("clirunner",), ("mix_stderr=false",))


def test_a_partial_answer_with_the_right_api_and_a_wrong_value_loses_that_fact() -> None:
    facts = extract(DECIMAL)
    assert facts.groups == (("fields.decimal",), ("places=2",), ("as_string=true",), ("decimal.decimal",))
    right = "Use `fields.Decimal(places=2, as_string=True)`; it loads a `decimal.Decimal`."
    wrong_value = "Use `fields.Decimal(places=2, as_string=False)`; it loads a `decimal.Decimal`."
    missing = "Use `fields.Decimal(places=2)`: dumps() renders decimal.Decimal values as strings by itself."
    assert facts.share(right) == 1.0
    assert facts.share(wrong_value) == 0.75 and facts.missing(wrong_value) == [("as_string=true",)]
    assert facts.share(missing) == 0.75 and facts.missing(missing) == [("as_string=true",)]


def test_matching_ignores_case_whitespace_quotes_and_trailing_parens_but_not_other_names() -> None:
    facts = extract("Per schema: `class Meta: unknown = EXCLUDE`.")
    assert facts.groups == (("meta",), ("unknown=exclude",))
    assert facts.matched('class Meta:\n    unknown  =  "EXCLUDE"') == [True, True]
    assert normalise("Fields.Str( load_from = 'firstName' )") == "fields.str(load_from=firstname)"
    # a whole name: load does not match load_from, a parameter name does not match a longer one
    assert not extract("Call load().").matched("use load_from instead")[0]
    # a dotted path matches by its distinctive last name (imported directly), not by a plain word
    assert extract("Call click.get_app_dir().").matched("from click import get_app_dir")[0]
    assert not extract("Call schema.load().").matched("load it first")[0]


def test_alternatives_in_the_reference_and_expected_any_groups_are_or_groups() -> None:
    facts = extract(
        "Use click.style(text, strikethrough=True) or italic=True. Raise it with self.fail.",
        expected_any=[["fail(", "BadParameter"]],
    )
    assert facts.groups[0] == ("fail(", "badparameter")
    assert ("strikethrough=true", "italic=true") in facts.groups
    # one alternative of each group is enough; self.fail also satisfies its own group by name
    assert facts.share("click.style('x', italic=True); self.fail('bad', param, ctx)") == 1.0
    assert facts.share("raise click.BadParameter('bad') after click.style('x', italic=True)") == 0.75


def test_prose_paths_example_strings_and_forbidden_names_are_not_facts() -> None:
    reference = (
        "Use click.get_app_dir('My App'). It returns ~/.config/my-app on Linux, "
        "e.g. for MyShellComplete. The old completion= is gone."
    )
    facts = extract(reference, forbidden=["completion="])
    assert facts.groups == (("click.get_app_dir",),)
    assert extract("Yes. It works in Python on Linux.").groups == ()
    assert extract("Yes.").share("anything") == 1.0  # nothing to miss


def test_backticked_code_is_a_fact_as_written() -> None:
    facts = extract("Decorate it with `@validator('name')` and raise ValueError.")
    assert facts.groups == (("validator(name)",), ("valueerror",))
    assert facts.share("@validator(\"name\")\ndef check(cls, v): raise ValueError('no')") == 1.0
    assert facts.share("@validator('title')\ndef check(cls, v): raise ValueError('no')") == 0.5


# ------------------------------------------------------------------------------------------ paired bootstrap


def test_a_judge_identical_to_strings_does_not_beat_them() -> None:
    rng = np.random.default_rng(5)
    human = list(rng.random(96) < 0.35)
    strings = [h if rng.random() < 0.8 else not h for h in human]
    out = paired_kappa_difference(human, strings, strings, n_boot=500, seed=1)
    assert out["difference"] == 0.0 and out["ci95"] == [0.0, 0.0] and out["beats"] is False
    lo, hi = out["ci95"]
    assert lo <= 0.0 <= hi and out["n"] == 96


def test_a_judge_that_fixes_the_strings_errors_beats_them_and_the_interval_is_paired() -> None:
    rng = np.random.default_rng(6)
    human = list(rng.random(96) < 0.35)
    strings = [h if rng.random() < 0.75 else not h for h in human]
    better = [h if rng.random() < 0.97 else not h for h in human]
    out = paired_kappa_difference(human, better, strings, n_boot=1000, seed=2)
    assert out["difference"] == pytest.approx(
        (cohen_kappa(human, better) or 0) - (cohen_kappa(human, strings) or 0)
    )
    lo, hi = out["ci95"]
    assert 0 < lo < out["difference"] < hi and out["beats"] is True
    assert out == paired_kappa_difference(human, better, strings, n_boot=1000, seed=2)  # seeded
    # a judge barely different from strings: the interval straddles 0, however the point estimate falls
    one_off = list(strings)
    wrong = next(i for i, (h, s) in enumerate(zip(human, strings, strict=True)) if h != s)
    one_off[wrong] = human[wrong]
    close = paired_kappa_difference(human, one_off, strings, n_boot=1000, seed=2)
    assert close["difference"] > 0 and close["ci95"][0] <= 0 and close["beats"] is False
    with pytest.raises(ValueError, match="same length"):
        paired_kappa_difference([True], [True, False], [True])
