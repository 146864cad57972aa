"""A tiny doceval project in a folder (conf/ linked, a corpus built from a few documents, a golden set), the
starting point of the CLI tests."""

from __future__ import annotations

from pathlib import Path

from doceval.inputs.docs import Document, write_corpus

ROOT = Path(__file__).resolve().parents[1]


def make_tiny_project(root: Path, docs: dict[str, list[tuple[str, str]]], golden_text: str) -> Path:
    """``docs``: pin -> [(dotted path, docstring)]; ``golden_text``: the JSONL of data/golden/v2.jsonl (the default golden set)."""
    (root / "conf").symlink_to(ROOT / "conf")
    corpus = {
        pin: [Document(f"{pin}:{path}", pin.split("@")[0], pin.split("@")[1], path, "function", text)
              for path, text in items]
        for pin, items in docs.items()
    }  # fmt: skip
    write_corpus(corpus, root / "data" / "docs", 1500, {})
    golden = root / "data" / "golden" / "v2.jsonl"
    golden.parent.mkdir(parents=True)
    golden.write_text(golden_text, encoding="utf-8")
    return root
