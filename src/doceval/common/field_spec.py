"""``spec``: a dataclass field carrying its validation rules, the one helper both the typed configuration
(:mod:`doceval.config.schema`) and the LLM settings (:mod:`doceval.common.llm_settings`) declare fields with.
The rules (``ge``/``gt``/``le``, ``choices``, ``nonempty``, ``example``, ``not_with``, ...) are listed in the
schema's module docstring and read by :mod:`doceval.config.validate`."""

from __future__ import annotations

from dataclasses import MISSING, field
from typing import Any


def spec(default: Any = MISSING, **rules: Any) -> Any:
    """A dataclass field with validation rules in its metadata; no default = the key is required."""
    return field(default=default, metadata=rules)
