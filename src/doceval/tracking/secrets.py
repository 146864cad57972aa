"""Secrets in what tracking logs: the one scrubber of :mod:`doceval.common.redact`, under the names the
tracking modules use (there is no second implementation here)."""

from __future__ import annotations

from doceval.common.redact import (
    MIN_SUBSTRING_SECRET,
    REDACTED,
    leaks,
    redact_bytes,
    redact_text,
    redact_url,
    scrub,
    secret_values,
    url_secret_values,
)
from doceval.common.secret_rule import DEFAULT_SECRET_ENV, env_secret_values, secret_name

__all__ = [
    "DEFAULT_SECRET_ENV",
    "MIN_SUBSTRING_SECRET",
    "REDACTED",
    "env_secret_values",
    "leaks",
    "redact_bytes",
    "redact_text",
    "redact_url",
    "scrub",
    "secret_name",
    "secret_values",
    "url_secret_values",
]
