"""Issue 44 M1: outside the run summary's own modules, nothing in src/ reads a summary's ``config`` block by key
(``summary["config"]``, ``summary.get("config")``): the resolved settings come from the run plan or the typed
summary (``doceval.summary``: ``settings_of(summary).floors.source``, ``.split``, ``.k``, ...). Nor its
``metrics`` or ``entries`` blocks: ``summary.metrics.value(name)``, ``.metrics.counts``, ``.entries`` (``entry.scores``,
``entry.refused``) and ``.rows`` (each entry as recorded, for the per-entry statistics).

Read with ``ast``. A summary is what the code calls one: a receiver whose name mentions a summary
(``summary``, ``exact_summary``, ``summaries[0]``) or one of the short names summaries go by in src/
(:data:`SUMMARY_NAMES`); a ``"config"`` key of another mapping (``Literal["config"]``, a Hydra node) is not flagged.
Writing the block (``new["config"] = ...``) is building a summary, not reading one."""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
# Where the summary is built and typed: the only modules that may read its config block by key.
SUMMARY_MODULES = ("doceval/summary/", "doceval/harness/summary.py")
# The names summaries go by in src/ besides "summary": compare's two runs, a scrubbed copy, the replays.
BLOCKS = ("metrics", "entries")  # the blocks read by attribute: summary.metrics.value(m), summary.entries
SUMMARY_NAMES = frozenset({"s", "base", "new", "clean", "replay", "reset", "warm", "alone", "answered"})
_MENTIONS_SUMMARY = re.compile(r"summar", re.IGNORECASE)


def _is_summary(receiver: ast.expr) -> bool:
    while isinstance(receiver, ast.Subscript):  # summaries[0]["config"]: the container names it
        receiver = receiver.value
    name = receiver.id if isinstance(receiver, ast.Name) else getattr(receiver, "attr", "")
    return bool(_MENTIONS_SUMMARY.search(name)) or name in SUMMARY_NAMES


def _is_config_key(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value == "config"


def _is_block_key(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value in BLOCKS


def config_reads(source: str, key: Callable[[ast.expr], bool] = _is_config_key) -> list[tuple[int, str]]:
    """``(line, code)`` of every read of a summary's ``"config"`` key (or the keys ``key`` accepts) in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and key(node.slice):
            receiver: ast.expr = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and key(node.args[0])
        ):
            receiver = node.func.value
        else:
            continue
        if _is_summary(receiver):
            found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def test_no_module_outside_the_summary_reads_its_config_block() -> None:
    offenders = [
        f"{path.relative_to(SRC)}:{line}: {code}"
        for path in sorted((SRC / "doceval").rglob("*.py"))
        if not any(str(path.relative_to(SRC)).startswith(m) for m in SUMMARY_MODULES)
        for line, code in config_reads(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, (
        "read the run's settings from the plan or the typed summary (doceval.summary.settings_of(summary)."
        "floors / .split / .k / .golden ...), not from its recorded config block:\n" + "\n".join(offenders)
    )


def test_no_module_outside_the_summary_reads_its_metrics_or_entries_by_key() -> None:
    offenders = [
        f"{path.relative_to(SRC)}:{line}: {code}"
        for path in sorted((SRC / "doceval").rglob("*.py"))
        if not any(str(path.relative_to(SRC)).startswith(m) for m in SUMMARY_MODULES)
        for line, code in config_reads(path.read_text(encoding="utf-8"), _is_block_key)
    ]
    assert not offenders, (
        "read a summary's metrics and entries typed (doceval.summary.as_summary(summary).metrics.value(name), "
        ".metrics.counts, .entries, .rows), not by key:\n" + "\n".join(offenders)
    )


@pytest.mark.parametrize(
    "code",
    [
        'summary["metrics"]',
        'summary["metrics"].get("counts")',
        'summary.get("entries") or []',
        'base["entries"]',
        's["metrics"].get(m)',
        'summaries[0]["entries"]',
        'clean.get("metrics") or {}',
        'self.summary["entries"][0]["scores"]',
    ],
)
def test_the_scan_finds_a_read_of_a_summarys_metrics_or_entries(code: str) -> None:
    assert config_reads(textwrap.dedent(code), _is_block_key), code


@pytest.mark.parametrize(
    "code",
    [
        'row["metrics"]',
        'block.get("entries")',
        'summary.metrics.value("hit_rate")',
        'new["entries"] = rows',
        'summary["config"]',
        '"entries" in summary',
    ],
)
def test_the_block_scan_leaves_other_mappings_writes_and_typed_reads_alone(code: str) -> None:
    assert not config_reads(code, _is_block_key), code


@pytest.mark.parametrize(
    "code",
    [
        'summary["config"]',
        'summary.get("config") or {}',
        'summary.get("config", {}).get("k")',
        's["config"].get("run_key")',
        'summaries[0]["config"]',
        'self.summary["config"]["floors"]',
        'exact_summary.get("config")',
        'base["config"]',
        'summary["config"]["usage"]["journal"] = {}',
    ],
)
def test_the_scan_finds_a_read_of_a_summarys_config(code: str) -> None:
    assert config_reads(textwrap.dedent(code)), code


@pytest.mark.parametrize(
    "code",
    [
        'source: Literal["config"]',
        'hydra_node["config"]',
        'options.get("config")',
        'summary["metrics"]',
        'summary.get("entries")',
        'new["config"] = {**recorded}',
        '"config" in summary',
    ],
)
def test_the_scan_leaves_other_mappings_and_writes_alone(code: str) -> None:
    assert not config_reads(code), code
