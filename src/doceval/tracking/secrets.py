"""Secrets: which config values and environment variables are secret, and scrubbing them from everything logged."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass

REDACTED = "<redacted>"
# Always treated as secret sources, whether or not the config names them (defence in depth).
DEFAULT_SECRET_ENV = ("OPENAI_API_KEY", "QDRANT_API_KEY", "MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_PASSWORD")
_MIN_SUBSTRING_SECRET = 8  # shorter secrets are only matched as whole values


def _secret_key(key: str) -> bool:
    """A key whose value must never be logged: contains api_key/password/secret, unless it only names a
    variable (``*_env``)."""
    low = key.lower()
    last = low.rsplit(".", 1)[-1]
    if last.endswith("_env"):
        return False
    return any(word in low for word in ("api_key", "apikey", "password", "secret"))


def _env_names(obj: Any, out: set[str]) -> None:
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            if str(k).lower().endswith("_env") and isinstance(v, str) and v:
                out.add(v)
            elif str(k).lower().endswith("_env") and isinstance(v, Mapping):
                # e.g. agent.headers_env: {Authorization: MY_AGENT_TOKEN}: every value names a secret variable
                out.update(str(name) for name in v.values() if isinstance(name, str) and name)
            _env_names(v, out)
    elif isinstance(obj, list | tuple):
        for v in obj:
            _env_names(v, out)


def secret_values(*configs: Any) -> list[str]:
    """Contents of the environment variables named by ``*_env`` keys (and the usual key variables)."""
    names: set[str] = set(DEFAULT_SECRET_ENV)
    for cfg in configs:
        _env_names(cfg, names)
    values = {os.environ.get(n, "") for n in names}
    return sorted((v for v in values if v.strip()), key=len, reverse=True)


def _leaks(value: str, secrets: list[str]) -> bool:
    return any(value == s or (len(s) >= _MIN_SUBSTRING_SECRET and s in value) for s in secrets)


def _redact_str(value: str, secrets: list[str]) -> str:
    for s in secrets:
        if value == s:
            return REDACTED
        if len(s) >= _MIN_SUBSTRING_SECRET:
            value = value.replace(s, REDACTED)
    return value


def scrub(obj: Any, secrets: list[str]) -> Any:
    """A deep copy without secret-named keys and with secret values redacted."""
    if isinstance(obj, Mapping):
        return {k: scrub(v, secrets) for k, v in obj.items() if not _secret_key(str(k))}
    if isinstance(obj, list | tuple):
        return [scrub(v, secrets) for v in obj]
    if isinstance(obj, str):
        return _redact_str(obj, secrets)
    return copy.deepcopy(obj)
