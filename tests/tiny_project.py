"""A tiny doceval project in a folder (conf/ linked, a corpus built from a few documents, a golden set), the
starting point of the CLI tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from doceval.inputs.docs import Document, write_corpus

ROOT = Path(__file__).resolve().parents[1]


def make_tiny_project(root: Path, docs: dict[str, list[tuple[str, str]]], golden_text: str) -> Path:
    """``docs``: pin -> [(dotted path, docstring)]; ``golden_text``: the JSONL of data/golden/v2.1.jsonl (the default golden set)."""
    (root / "conf").symlink_to(ROOT / "conf")
    corpus = {
        pin: [Document(f"{pin}:{path}", pin.split("@")[0], pin.split("@")[1], path, "function", text)
              for path, text in items]
        for pin, items in docs.items()
    }  # fmt: skip
    write_corpus(corpus, root / "data" / "docs", 1500, {})
    golden = root / "data" / "golden" / "v2.1.jsonl"
    golden.parent.mkdir(parents=True)
    golden.write_text(golden_text, encoding="utf-8")
    return root


def run_eval(*args: str) -> tuple[int, dict[str, Any] | None]:
    """`doceval eval` over ./golden.jsonl (every split) to ./out.json: the exit code, and the summary if one
    was written (None: the run left nothing a gate could take)."""
    from doceval.cli.main import main

    out = Path("out.json")
    out.unlink(missing_ok=True)
    rc = main(["eval", "--golden", "golden.jsonl", "--split", "all", "--no-track", "--quiet", "--output", str(out),
               *args])  # fmt: skip
    return rc, json.loads(out.read_text()) if out.exists() else None
