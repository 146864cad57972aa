"""Bounded concurrency for LLM work: re-exports :mod:`doceval.common.concurrency` (its home since external
agents use it too, without loading openai); this import path keeps working."""

from __future__ import annotations

from doceval.common.concurrency import iter_concurrent, map_concurrent

__all__ = ["iter_concurrent", "map_concurrent"]
