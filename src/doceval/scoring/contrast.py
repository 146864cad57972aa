"""Answers that failed version_correctness only on a forbidden string used in a contrast ("instead of .dict(",
"model_dump replaces .dict()"): the metric keeps its strict definition, and the report lists these so its
false negatives are visible (docs/design.md section 4)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from doceval.common.apimatch import fold, name_pattern
from doceval.scoring.metrics import contains_apis

# Words that put an API in contrast with the one recommended; matched near the forbidden string.
CONTRAST = re.compile(
    r"instead of|rather than|deprecat|replac|no longer|removed|legacy|old(er)? (api|style|way)|was renamed|"
    r"renamed|superseded|not available|does not exist|doesn't exist|in place of",
    re.IGNORECASE,
)
WINDOW = 80  # characters either side of the forbidden string that may hold the contrast word


def contrast_only(
    answer: str | None,
    expected: Sequence[str],
    forbidden: Sequence[str],
    expected_any: Sequence[Sequence[str]] = (),
) -> list[tuple[str, str]]:
    """``[(forbidden string, snippet), ...]`` when the answer fails only on forbidden strings and every one of
    their occurrences sits next to a contrast word; ``[]`` otherwise (it passes, or fails for another reason)."""
    if answer is None or contains_apis(answer, expected, forbidden, expected_any):
        return []
    if not contains_apis(answer, expected, (), expected_any):
        return []  # an expected string is missing: not a forbidden-string false negative
    folded = fold(answer)
    found: list[tuple[str, str]] = []
    for name in forbidden:
        spans = [m.span() for m in name_pattern(name).finditer(folded)]
        if not spans:
            continue
        for start, end in spans:
            around = answer[max(0, start - WINDOW) : end + WINDOW]
            if not CONTRAST.search(around):
                return []  # one plain use of the forbidden API: a genuine failure
        first, last = spans[0]
        snippet = " ".join(answer[max(0, first - WINDOW) : last + WINDOW].split())
        found.append((name, snippet))
    return found
