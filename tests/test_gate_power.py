"""A gate rule that cannot fail says so (issue 40, C8; docs/design.md 8.3): significant non-regression prints, at
gate time and in JUnit, the smallest drop its own paired test (exact McNemar / sign-flip, Holm over the gated
metrics) can detect at this n, and says when the rule cannot fail at all."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import numpy as np
from test_report import _entry, _summary

from doceval.results import check_gate_config, gate
from doceval.results.junit import junit_xml
from doceval.results.power import detectable
from doceval.scoring.proportions import mcnemar_exact_p

GATE = check_gate_config({"thresholds": {"hit_rate": 0.0}, "non_regression": {
    "enabled": True, "tolerance": 0.02, "metrics": ["hit_rate", "mrr", "refused_correctly"],
    "mode": "significant", "alpha": 0.05}})  # fmt: skip


def _run(hits: list[int], n_oos: int = 2) -> dict[str, Any]:
    rows = [_entry(f"a{i}", h, float(h), None, 0, [[f"pydantic@2.8.2:a{i}", 0.9]] if h else [], False)
            for i, h in enumerate(hits)]  # fmt: skip
    rows += [_entry(f"u{i}", None, None, 1, None, [], True) for i in range(n_oos)]
    for r in rows:
        r["question"] = f"question {r['id']}?"
    return _summary(rows)


def test_the_issue_case_says_what_the_rule_can_detect() -> None:
    """hit_rate 11/12 -> 5/12 on 12 entries: exact McNemar p = 0.031, Holm over 3 metrics 0.094: green, and on
    main nothing said that 7 of the 12 entries must get worse before this rule can fail."""
    base = _run([1] * 11 + [0])
    new = _run([1] * 5 + [0] * 7)
    assert mcnemar_exact_p(6, 0) == 0.03125
    verdict = gate(new, GATE, baseline=base)
    assert verdict.passed  # a drop the test cannot tell from noise: a note, not a failure (as before)
    hit = next(d for d in verdict.detectable if d.metric == "hit_rate")
    assert (hit.n, hit.entries, hit.possible, hit.can_fail) == (12, 7, 11, True)
    assert ("hit_rate non-regression: the smallest drop it detects at n = 12 is 0.583 (7 of 12 entries worse, "
            "none better; mcnemar test, Holm over 3 metrics, alpha 0.05)") in verdict.notes  # fmt: skip
    # refused_correctly over 2 out-of-scope entries: even both worse gives p = 0.5, p_holm 1.
    rc = next(d for d in verdict.detectable if d.metric == "refused_correctly")
    assert rc.entries is None and not rc.can_fail
    assert any(n.startswith("refused_correctly non-regression cannot fail at n = 2") for n in verdict.notes)
    case = _case(junit_xml(verdict, new))
    assert case.find("skipped") is None  # hit_rate can fail: the rule is live
    assert "cannot fail at n = 2" in (case.findtext("system-out") or "")


def test_a_rule_that_cannot_fail_is_skipped_in_junit() -> None:
    base, new = _run([1, 1, 1, 1]), _run([0, 0, 0, 0])
    verdict = gate(new, GATE, baseline=base)
    assert verdict.passed and not any(d.can_fail for d in verdict.detectable)
    assert any(n.startswith("hit_rate non-regression cannot fail at n = 4") for n in verdict.notes)
    skipped = _case(junit_xml(verdict, new)).find("skipped")
    assert skipped is not None and skipped.get("message") == "cannot fail at this n"


def test_the_baseline_bounds_what_can_get_worse() -> None:
    # 7 entries needed at n = 12, but the baseline got only 3 right: nothing it can lose reaches p < 0.05.
    found = detectable("hit_rate", np.array([1.0] * 3 + [0.0] * 9), np.zeros(12), lower_is_better=False,
                       family=3, alpha=0.05)  # fmt: skip
    assert (found.entries, found.possible, found.can_fail) == (7, 3, False)
    assert "cannot fail against this baseline" in found.text()
    # One metric, alpha 0.05: 6 entries (p = 2/64 = 0.031); a graded metric takes the sign-flip test, same count.
    assert detectable("mrr", np.full(30, 0.5), np.full(30, 0.5), lower_is_better=False, family=1,
                      alpha=0.05).entries == 6  # fmt: skip


def _case(xml: str) -> ET.Element:
    case = next(
        c for c in ET.fromstring(xml).iter("testcase") if c.get("name", "").startswith("no regression")
    )
    return case
