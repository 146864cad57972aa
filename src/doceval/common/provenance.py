"""Where a result came from: git commit and dirty flag, package versions, Python, host; the hash of the code
that made a cached result (:func:`code_hash`)."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from collections.abc import Iterable
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from doceval.common.imports import SRC, import_closure, module_file

_PACKAGES = (
    "doceval",
    "qdrant-client",
    "bm25s",
    "sentence-transformers",
    "torch",
    "mlflow",
    "dvc",
    "hydra-core",
    "openai",
    "numpy",
)


def _git(*args: str) -> str | None:
    try:
        proc = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


@lru_cache(maxsize=1)
def provenance() -> dict[str, Any]:
    versions: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    # Files the pipeline itself rewrites (the lock file, committed metrics and report) do not make a run dirty:
    # `dvc repro` updates them between stages. Any other tracked change does.
    status = _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!dvc.lock", ":!eval")
    # Where the engine was chosen, when the environment chose it (doceval.config.engine_choice): the engine is
    # no parameter (params.yaml holds none), so a result says here what ran it.
    engine = {k: os.environ[k] for k in ("DOCEVAL_ENGINE", "RAY_ADDRESS") if os.environ.get(k)}
    return {
        **({"engine": engine} if engine else {}),
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": None if status is None else bool(status),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": versions,
    }


def code_hash(modules: Iterable[str], data: Iterable[str] = (), src: Path = SRC) -> str:
    """16 hex digits of the source a cached result came from: every file in the import closure of ``modules``
    (:func:`doceval.common.imports.import_closure`, imports inside functions included) and the package data
    folders ``data`` (``prompts``), each hashed with its module name or path. A result cached under it never
    outlives the code that made it, and a file outside that closure (a report renderer's docstring) leaves it
    alone."""
    modules = tuple(modules)
    for module in modules:
        if module_file(module, src) is None:  # a renamed module would silently leave the key
            raise ValueError(f"code_hash: no module {module} under {src}")
    files: dict[str, Path] = dict(import_closure(*modules, src=src))
    package = src / "doceval"
    for folder in data:
        files.update(
            {
                p.relative_to(package).as_posix(): p
                for p in (package / folder).rglob("*")
                if p.is_file() and not p.name.startswith(".")
            }
        )
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0")
        h.update(files[name].read_bytes())
    return h.hexdigest()[:16]
