"""Shared parts of the answer-side tests (issue 42): a user's own golden set with reference answers the local test
judge reads (tests/openai_server.py: "correct" when the answer names every API of the reference), and the
assistants that answer it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

N_IN_SCOPE = 12
N_OUT_OF_SCOPE = 4


def own_golden(root: Path, n_in: int = N_IN_SCOPE, n_out: int = N_OUT_OF_SCOPE) -> Path:
    """``golden.json`` in ``root``: ``q0..`` in scope (one relevant id ``doc-i``, reference "Call `api_i()`."),
    ``u0..`` out of scope; no library or version (the user's own ids, no corpus)."""
    rows: list[dict[str, Any]] = [
        {"id": f"q{i}", "question": f"how do I use feature {i}", "relevant_ids": [f"doc-{i}"],
         "reference_answer": f"Call `api_{i}()`.", "expected_apis": [f"api_{i}"], "out_of_scope": False}
        for i in range(n_in)
    ]  # fmt: skip
    rows += [{"id": f"u{j}", "question": f"what is the capital of country {j}", "relevant_ids": [],
              "reference_answer": "", "expected_apis": [], "out_of_scope": True} for j in range(n_out)]  # fmt: skip
    rows = [{**r, "forbidden_apis": [], "split": None, "kind": "off_topic" if r["out_of_scope"] else "lookup"}
            for r in rows]  # fmt: skip
    path = root / "golden.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


def feature(question: str) -> int | None:
    """The feature number an in-scope question asks about (None: out of scope)."""
    return int(question.rsplit(" ", 1)[1]) if question.startswith("how do I use feature") else None


def good_assistant(question: str, library: Any, version: Any, session_id: str) -> dict[str, Any]:
    """Right sources and the reference's API in scope; no sources out of scope, yet never a refusal: it invents
    an answer there (the assistant of issue 42 A1)."""
    i = feature(question)
    if i is None:
        return {"answer": "Use `country.capital()` from the geo module.", "sources": [], "refused": False}
    return {"answer": f"Use `api_{i}()`.", "sources": [f"doc-{i}"], "refused": False}


def judge_overrides(base_url: str, model: str = "j") -> list[str]:
    return ["judge=openai", f"judge.base_url={base_url}", f"judge.model={model}", "judge.max_retries=0"]
