"""CONTRIBUTING's rule "never write a file with plain `open().write`": outputs go through doceval.common.io
(a file written whole or not at all, scrubbed). A plain write is allowed only where listed below, each where
a half-written file cannot be seen: inside a temporary folder that appears whole, an append-only journal, a lock.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "doceval"

# module under src/doceval -> (plain writes there, why each cannot leave a half-written output)
ALLOWED: dict[str, tuple[int, str]] = {
    "common/io.py": (1, "the atomic writer itself: a temporary sibling renamed into place"),
    "common/journal.py": (
        3,
        "the append-only journal, its torn last line cut; finished.json renamed into place",
    ),
    "common/locking.py": (1, "the lock file, held open"),
    "common/paths.py": (1, "create_new_file: exclusive creation, never through a link"),
    "tracking/uris.py": (1, "the sqlite store opened read-write to check it can be (reads its header only)"),
    "cli/main.py": (1, "stdout replaced by /dev/null once the reader went away"),
    "inputs/docs.py": (1, "corpus.jsonl streamed inside atomic_dir's temporary folder"),
    "stages/retrieve.py": (2, "candidate rankings streamed inside atomic_dir's temporary folder"),
    "app/sweep_inputs.py": (1, "a scratch folder of this process, removed at its exit"),
    "tracking/shaping.py": (1, "an artifact copied into the staging folder logged to MLflow"),
    "tracking/runs.py": (3, "artifacts staged in a temporary folder logged to MLflow"),
    "tracking/judge_runs.py": (1, "an artifact staged in a temporary folder logged to MLflow"),
}


def _writes_to_a_file(call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name in ("write_text", "write_bytes"):
        return True
    if name not in ("open", "fdopen"):
        return False
    at = (
        0 if isinstance(func, ast.Attribute) and name == "open" else 1
    )  # Path.open(mode); open(f, mode), fdopen
    mode: ast.expr | None = call.args[at] if len(call.args) > at else None
    mode = next((k.value for k in call.keywords if k.arg == "mode"), mode)
    return (
        isinstance(mode, ast.Constant)
        and isinstance(mode.value, str)
        and any(c in mode.value for c in "wax+")
    )


def plain_writes(source: str) -> list[int]:
    """Lines of ``source`` that write a file directly (``write_text``/``write_bytes``, ``open`` for writing)."""
    return [n.lineno for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call) and _writes_to_a_file(n)]


def test_outputs_are_written_through_common_io() -> None:
    found = Counter[str]()
    lines: dict[str, list[int]] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        hits = plain_writes(path.read_text(encoding="utf-8"))
        if hits:
            found[rel], lines[rel] = len(hits), hits
    unexpected = [
        f"src/doceval/{rel}: lines {lines[rel]}" for rel in found if found[rel] > ALLOWED.get(rel, (0,))[0]
    ]
    assert not unexpected, (
        "plain file writes outside doceval.common.io (use write_text_atomic / write_json_atomic / atomic_dir, "
        "or, where no half-written file can be seen, list the module in ALLOWED with why):\n"
        + "\n".join(unexpected)
    )
    stale = [rel for rel, (count, _) in ALLOWED.items() if found[rel] < count]
    assert not stale, f"ALLOWED lists more plain writes than these modules have (lower the count): {stale}"


def test_the_scan_finds_each_kind_of_plain_write() -> None:
    source = """
path.write_text("x")
path.write_bytes(b"x")
open(name, "w")
open(name, mode="a")
path.open("w", encoding="utf-8")
os.fdopen(fd, "w")
open(name)
path.open()
path.read_text()
"""
    assert plain_writes(source) == [2, 3, 4, 5, 6, 7]
