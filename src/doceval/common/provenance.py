"""Where a result came from: git commit and dirty flag, package versions, Python, host."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

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


def source_hash(*relative: str) -> str:
    """sha256 over doceval source files/folders, so cached agent results never outlive the code that made them."""
    root = Path(__file__).resolve().parents[1]  # the doceval package
    h = hashlib.sha256()
    for rel in relative:
        target = root / rel
        files = (
            sorted(p for p in target.rglob("*") if p.suffix in {".py", ".txt"})
            if target.is_dir()
            else [target]
        )
        for f in files:
            h.update(f.name.encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]
