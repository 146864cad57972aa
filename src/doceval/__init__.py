"""doceval: an evaluation harness for version-pinned documentation QA assistants.

``from doceval import evaluate, compare, gate, load_summary`` is the Python API (:mod:`doceval.api`), loaded on first use so
that ``import doceval`` (and every CLI command) stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.2.0"
__all__ = ["Summary", "__version__", "compare", "evaluate", "gate", "load_summary"]


def __getattr__(name: str) -> Any:
    if name in ("evaluate", "compare", "gate", "load_summary", "Summary"):
        return getattr(importlib.import_module("doceval.api"), name)
    raise AttributeError(f"module 'doceval' has no attribute {name!r}")
