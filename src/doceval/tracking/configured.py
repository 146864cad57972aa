"""Tracking driven by a composed configuration: the `tracking` block decides whether and where runs are logged."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from doceval.config.compose import flatten
from doceval.tracking.runs import log_run
from doceval.tracking.uris import check_reachable, tracking_uri


def enabled(cfg: Mapping[str, Any]) -> bool:
    return bool(cfg.get("tracking", {}).get("enabled", True))


def check_configured(cfg: Mapping[str, Any]) -> None:
    """Fail fast (exit 2) on an unreachable tracking store, before any work is done."""
    if enabled(cfg):
        check_reachable(tracking_uri(cfg["tracking"].get("uri"), Path.cwd()))


def log_configured_run(
    cfg: Mapping[str, Any],
    summary: Mapping[str, Any],
    artifacts: Mapping[str, Path],
    run_name: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> str | None:
    """Log a run when tracking is enabled (log_run creates the store once); returns the run id."""
    if not enabled(cfg):
        return None
    root = Path.cwd()
    uri = tracking_uri(cfg["tracking"].get("uri"), root)
    flat = flatten({k: v for k, v in cfg.items() if k not in ("docs", "paths")})
    run_id = log_run(
        dict(summary),
        uri=uri,
        root=root,
        run_name=run_name,
        artifacts=dict(artifacts),
        extra_tags={**(tags or {}), **({"complete": "false"} if summary.get("complete") is False else {})},
        flat_config=flat,
        golden_path=Path(summary["config"]["golden"]["path"]),
    )
    print(f"mlflow: logged run {run_id} ({uri})")
    return run_id
