"""A project's own override file, ``doceval.yaml``: the one place a user's evaluation project says how it differs
from the shipped conf/ (its docs folders, golden set, retriever...).

Every command composes the same sources, in this order: the shipped conf/, then ``doceval.yaml``'s
``overrides`` (when the working directory has one), then the engine ``$DOCEVAL_ENGINE`` names (an execution
choice, never written into params.yaml: :mod:`doceval.config.engine_choice`), then the command's own overrides. A command override of a
key replaces the project's overrides of that key and of every key under it (``retriever=function`` drops the
project's ``retriever=bm25`` and ``retriever.k1=1.5``), so the two never fight inside Hydra.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import yaml

from doceval.common.paths import input_file
from doceval.config.engine_choice import engine_overrides
from doceval.errors import UsageError

PROJECT_FILE = Path("doceval.yaml")
EXAMPLE = "overrides:\n  - retriever=bm25\n  - golden=golden.jsonl"
# params.yaml's second line: the command overrides `doceval params` composed it with (JSON), so a stage can
# recompose the same thing and tell a stale params.yaml from a deliberate one.
OVERRIDES_MARK = "# doceval params overrides: "


def project_file(path: str | Path | None = None) -> Path | None:
    """``path``, or ./doceval.yaml when the working directory has one; None: no project file. A ./doceval.yaml
    that is not a regular file (a directory, a FIFO, a dangling link) is a UsageError, never ignored."""
    if path is not None:
        return Path(path)
    if not os.path.lexists(PROJECT_FILE):
        return None
    fix = (
        "it is the project's file of overrides (YAML, `overrides:` a list): make it a file, or move it aside"
    )
    found = input_file(PROJECT_FILE, "project", fix)
    if not found.is_file():
        raise UsageError(
            f"{PROJECT_FILE}: is a link to {os.path.realpath(PROJECT_FILE)}, which does not exist; {fix}"
        )
    return found


def project_overrides(path: str | Path | None = None) -> tuple[Path | None, list[str]]:
    """The project file (``path``, or ./doceval.yaml when there is one) and its overrides; (None, []) without
    one."""
    found = project_file(path)
    if found is None:
        return None, []
    if not found.is_file():
        raise UsageError(f"{found}: project file not found (it holds the project's overrides: {EXAMPLE!r})")
    return found, read_project_overrides(found)


def read_project_overrides(path: Path) -> list[str]:
    """The ``overrides:`` list of a project file, each a Hydra override string; a UsageError names the file,
    the line or item and shows the expected shape."""
    shape = f"expected a mapping with one key, overrides: a list of Hydra override strings, e.g.\n{EXAMPLE}"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" line {where.line + 1}" if where is not None else ""
        raise UsageError(f"{path}:{line} not valid YAML; {shape}") from None
    if data is None:
        return []
    if not isinstance(data, dict) or set(data) - {"overrides"}:
        extra = sorted(set(data) - {"overrides"}) if isinstance(data, dict) else []
        what = f"unknown key(s) {', '.join(map(str, extra))}" if extra else "not a mapping"
        raise UsageError(f"{path}: {what}; {shape}")
    overrides = data.get("overrides") or []
    if not isinstance(overrides, list):
        raise UsageError(f"{path}: overrides is not a list; {shape}")
    for i, item in enumerate(overrides):
        if not isinstance(item, str) or not item.strip():
            raise UsageError(
                f"{path}: overrides[{i}]={json.dumps(item, default=str)}: expected a KEY=VALUE string "
                "(quote it in YAML when it holds ': ' or starts with '[' or '{', e.g. - 'docs.folders=[...]')"
            )
    return [str(o) for o in overrides]


def override_key(override: str) -> str:
    """The dotted key an override sets: ``+retriever.k1=2`` -> ``retriever.k1``, ``~golden`` -> ``golden``."""
    return override.split("=", 1)[0].strip().lstrip("+~")


def merge_overrides(project: Sequence[str], command: Sequence[str]) -> list[str]:
    """The project's overrides, less those a command override replaces (same key or a key under it), then the
    command's. Idempotent: merging the result with the same project list again changes nothing."""
    keys = {override_key(o) for o in command}

    def replaced(key: str) -> bool:
        return any(key == k or key.startswith(k + ".") for k in keys)

    return [o for o in project if not replaced(override_key(o))] + list(command)


def with_project(command: Sequence[str], path: str | Path | None = None) -> list[str]:
    """``command`` after the project file's overrides (none when there is no project file) and the engine
    chosen in ``$DOCEVAL_ENGINE`` (:mod:`doceval.config.engine_choice`), in that order."""
    return merge_overrides(merge_overrides(project_overrides(path)[1], engine_overrides()), command)


def recorded_overrides(params_text: str) -> list[str] | None:
    """The command overrides a params.yaml written by `doceval params` records (``[]`` for one written before
    they were recorded); None for a params file doceval did not write (a hand-made one is read as it is)."""
    lines = params_text.splitlines()
    if not lines or not lines[0].startswith("# Composed from conf/ by `doceval params`"):
        return None
    if len(lines) > 1 and lines[1].startswith(OVERRIDES_MARK):
        try:
            found = json.loads(lines[1][len(OVERRIDES_MARK) :])
        except json.JSONDecodeError:
            return None
        if isinstance(found, list) and all(isinstance(o, str) for o in found):
            return found
        return None
    return []
