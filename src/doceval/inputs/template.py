"""A golden template from real document ids: one example row per pin citing a document of that pin, and one
out-of-scope row (docs/design.md section 3), written by `doceval golden template` from a built corpus and by
`doceval init` from the docs folders it is given."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from doceval.common.io import jsonl_line

TODO = "TODO: "


def example_id(ids: Sequence[str]) -> str:
    """The id a pin's example row cites: the first with a section (``LIB@VERSION:path.section_slug``), so the
    template shows the whole id form; else the first."""
    return next((i for i in ids if "." in i.split(":", 1)[-1]), ids[0])


def template_rows(ids_by_pin: Mapping[str, Sequence[str]]) -> list[dict[str, Any]]:
    """One in-scope row per pin (sorted) whose ``relevant_ids`` is a real id of that pin, then one out-of-scope
    row on the first pin; ``TODO:`` marks the text to write. Every row passes `doceval golden validate`
    against the corpus the ids came from."""
    rows: list[dict[str, Any]] = []
    pins = [pin for pin in sorted(ids_by_pin) if ids_by_pin[pin]]
    for n, pin in enumerate(pins, start=1):
        library, version = pin.split("@", 1)
        cited = example_id(ids_by_pin[pin])
        rows.append(
            {
                "id": f"q{n:03d}",
                "question": f"{TODO}a question about {library} {version} that {cited} answers",
                "library": library,
                "version": version,
                "out_of_scope": False,
                "relevant_ids": [cited],
                "reference_answer": f"{TODO}what a right answer says for {library} {version}",
                "expected_apis": [],
                "forbidden_apis": [],
                "split": None,
                "kind": "lookup",
            }
        )
    if pins:
        library, version = pins[0].split("@", 1)
        rows.append(
            {
                "id": "oos001",
                "question": "What is the capital of France?",
                "library": library,
                "version": version,
                "out_of_scope": True,
                "relevant_ids": [],
                "reference_answer": "",
                "expected_apis": [],
                "forbidden_apis": [],
                "split": None,
                "kind": "off_topic",
            }
        )
    return rows


def template_text(ids_by_pin: Mapping[str, Sequence[str]]) -> str:
    return "".join(jsonl_line(row) for row in template_rows(ids_by_pin))
