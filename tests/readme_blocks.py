"""README.md's code blocks, for the tests that run them (issue 40, C12).

Every ```bash block of the README is listed in BLOCKS, by its first command, with the tests that run it;
tests/test_readme.py fails when a block has no test, and each of those tests reads the block's commands from the
README through :func:`commands`, so the README and the tests cannot drift. Commands in EXCLUDED are the only ones
no test runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# A server that never ends on its own, and minutes of benchmarks on a quiet machine: named as such in the README.
EXCLUDED = ("mlflow ui", "make bench")
RECIPE_TEST = "tests/test_project_e2e.py::test_the_readme_recipe_runs_first_time_as_written"
# A block's first command -> the tests that run it (each calls commands() with that first command).
BLOCKS: dict[str, tuple[str, ...]] = {
    "make repro": (
        "tests/test_readme.py::test_make_repro_runs_as_the_readme_shows",
        "tests/test_readme.py::test_make_test_runs_as_the_readme_shows",
    ),
    "doceval init .": (RECIPE_TEST,),
    "doceval golden draft": (RECIPE_TEST,),
    "doceval golden accept": (RECIPE_TEST,),
    "git add -A && git commit -qm 'acme docs": (RECIPE_TEST,),
    "doceval eval --output eval/runs/function.json": (RECIPE_TEST,),
    "doceval conversations": (RECIPE_TEST,),
    "doceval compare": (RECIPE_TEST,),
    "echo '- gate.": (RECIPE_TEST,),
    "git add -A && git commit -qm 'acme assistant": (RECIPE_TEST,),
}
# The README's Python block (the API) runs in the recipe's project too.
PYTHON_BLOCK_TEST = RECIPE_TEST
_FENCE = re.compile(r"^```(\w*)\s*$")


def fenced(language: str, text: str | None = None) -> list[list[str]]:
    """Each ```LANGUAGE block of the README (or of ``text``) as its lines."""
    found: list[list[str]] = []
    inside: str | None = None  # the open block's language
    lines: list[str] = []
    for line in (README.read_text(encoding="utf-8") if text is None else text).splitlines():
        if inside is None:
            match = _FENCE.match(line)
            if match:
                inside, lines = match.group(1), []
        elif line.startswith("```"):
            if inside == language:
                found.append(lines)
            inside = None
        else:
            lines.append(line)
    return found


def shell_blocks(text: str | None = None) -> list[list[str]]:
    """Each ```bash block as its commands: blank and comment-only lines dropped, a line ending in a backslash
    joined with the next. A command keeps its trailing comment (bash ignores it)."""
    blocks = []
    for lines in fenced("bash", text):
        commands: list[str] = []
        pending = ""
        for line in lines:
            if not pending and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1].rstrip() + " "
                continue
            commands.append(pending + line.strip() if pending else line.strip())
            pending = ""
        blocks.append(commands)
    return blocks


def excluded(command: str) -> bool:
    return command.startswith(EXCLUDED)


def commands(first: str) -> list[str]:
    """The commands of the README's shell block whose first command starts with ``first``."""
    found = [block for block in shell_blocks() if block and block[0].startswith(first)]
    assert len(found) == 1, f"README.md has {len(found)} shell blocks starting with {first!r} (1 expected)"
    return found[0]


def python_block() -> str:
    """The README's one ```python block."""
    (block,) = fenced("python")
    return "\n".join(block) + "\n"
