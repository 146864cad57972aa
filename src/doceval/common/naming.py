"""Short names for what a run evaluated, shared by the headline, report.md and MLflow tags."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def system_label(recorded: Mapping[str, Any]) -> str:
    """One short name for the system under test, from a summary's recorded ``config`` block: the retriever,
    the user's function target, or the assistant's target or URL."""
    system = recorded.get("system") or {}
    agent = system.get("agent") or {}
    if agent.get("name", "docchat") != "docchat":
        return f"{agent['name']}:{agent.get('target') or agent.get('url') or '?'}"
    retriever = system.get("retriever") or {}
    if retriever.get("target"):
        return f"function:{retriever['target']}"
    return str(recorded.get("retriever", {}).get("name", "?"))
