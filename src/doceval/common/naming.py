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


def floors_label(floors: Mapping[str, Any]) -> str:
    """The floors a run used, in the words a user chose them with, from a summary's recorded ``floors`` block:
    ``zero``, ``calibrated (PATH)``, ``config (global 0.3; numpy 0.5)``, ``cli (...)``, ``none (why)``. The
    recorded ``source`` alone says ``config`` for ``floors=zero``, which tells a reader nothing."""
    source = str(floors.get("source") or "?")
    global_floor = floors.get("global")
    per_library = floors.get("per_library") or {}
    values = "; ".join(
        [*([] if global_floor is None else [f"global {global_floor:g}"]),
         *(f"{lib} {value:g}" for lib, value in sorted(per_library.items()))]
    )  # fmt: skip
    if source.startswith("calibrated:"):
        return f"calibrated ({source.split(':', 1)[1]})"
    if source.startswith("none"):
        return f"none ({source.split(':', 1)[1].strip()})" if ":" in source else "none"
    if global_floor is None and not per_library:
        return f"none ({source})"
    if source == "config" and global_floor == 0 and not per_library:
        return "zero"
    return f"{source} ({values})"
