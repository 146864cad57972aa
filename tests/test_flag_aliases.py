"""Each `doceval eval` flag documented as an override's alias (doceval.cli.aliases.EVAL_OVERRIDE_ALIASES) resolves
to the same run as that override: golden set, split, limit, floors, memory, tracking and drafts as the harness
reads them (doceval.harness.plan, doceval.harness.floors)."""

from __future__ import annotations

from typing import Any

import pytest

from doceval.cli.aliases import EVAL_OVERRIDE_ALIASES, OverrideAlias
from doceval.cli.main import build_parser
from doceval.cli.pipeline import eval_run
from doceval.config import schema
from doceval.harness.floors import resolve_floors
from doceval.harness.plan import split_of


def _resolved(words: list[str]) -> dict[str, Any]:
    """What `doceval eval WORDS` runs with, as the harness resolves it."""
    args, extra = build_parser().parse_known_args(["eval", *words])
    args.overrides = [*args.overrides, *extra]
    cfg, options = eval_run(args)
    split = split_of(cfg, options)
    explicit = options.score_floor is not None or bool(options.floor_flags)
    floors = None
    # Calibrated floors without a floor flag: one artifact, the same file either way (none in this test).
    if explicit or not isinstance(cfg.floors, schema.FloorsCalibrated):
        found = resolve_floors(cfg.floors, split, options.score_floor, options.floor_flags)
        floors = (found.global_floor, dict(found.per_library), cfg.floors.signal)
    return {
        "golden": str(options.golden or cfg.golden),
        "split": split,
        "limit": options.limit if options.limit is not None else cfg.limit,
        "floors": floors,
        "warm_memory": options.warm_memory or not cfg.memory.isolate,
        "tracking": cfg.tracking.enabled,
        "allow_drafts": cfg.allow_drafts,
    }


@pytest.mark.parametrize("alias", EVAL_OVERRIDE_ALIASES, ids=lambda a: a.flag.split()[0])
def test_a_flag_documented_as_an_alias_resolves_as_its_override(alias: OverrideAlias) -> None:
    flag_words, override_words = alias.example
    by_flag, by_override = _resolved(list(flag_words)), _resolved(list(override_words))
    assert by_flag == by_override
    assert by_flag != _resolved([])  # the example changes something: equal by accident is no check


def test_every_alias_names_a_flag_of_eval_and_says_so_in_its_help() -> None:
    parser = build_parser()
    eval_parser = parser._subparsers._group_actions[0].choices["eval"]  # type: ignore[union-attr]
    helps = {o: a.help or "" for a in eval_parser._actions for o in a.option_strings}
    for alias in EVAL_OVERRIDE_ALIASES:
        flag = alias.flag.split()[0]
        assert flag in helps, flag
        assert helps[flag].endswith(f"(alias of the override {alias.override})")
    assert len(EVAL_OVERRIDE_ALIASES) == 8  # the count: every setting reachable both ways
