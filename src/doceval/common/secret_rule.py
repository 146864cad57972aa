"""What is secret (docs/design.md section 8.6): one name rule and the forms a secret value takes elsewhere.

The name rule is the same for config keys (at any depth: ``retriever.kwargs.hf_token``), a user's kwargs, HTTP
header names and URL query parameter names. A name is split into segments on every character that is not a
letter or digit (``_``, ``-``, ``.``) and on camelCase (``hfToken`` -> ``hf``, ``token``), and is secret when a
segment is one of :data:`SECRET_WORDS`, or is ``key`` standing alone (``?key=``, ``kwargs.key``) or after
``api``/``private``/``access`` (``api_key``, ``X-Api-Key``); ``apikey``, ``privatekey`` and ``accesskey`` as one
word count too. Whole segments only: ``max_tokens``, ``floors.signal`` and ``max_passages`` are no secrets.

A name ending in ``_env`` (a segment ``env`` after another: ``api_key_env``, ``headers_env.Authorization``)
names an environment variable, never holds a secret, and is exempt. A config's ``secrets:`` list
(``+secrets=[session_id]``) adds names: each is split the same way and matches wherever its segments appear in
that order in one part of a dotted name.

:func:`secret_forms` is what one secret value looks like elsewhere (with its scheme or without, decoded, and
after the encodings an assistant or a library applies to it: :func:`derived_forms`); every registered value is
registered with them (:mod:`doceval.common.redact`). :func:`env_secret_values` are the secret values the
environment holds. Standard library only.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

# A segment that makes a name secret wherever it stands.
SECRET_WORDS = frozenset(
    {
        "token",
        "secret",
        "password",
        "passwd",
        "passphrase",
        "pass",
        "pwd",
        "auth",
        "authorization",
        "bearer",
        "credential",
        "credentials",
        "cookie",
        "jwt",
        "sig",
        "signature",
        "apikey",
        "privatekey",
        "accesskey",
    }
)
# ``key`` is secret alone, or right after one of these (``api_key``); ``sort_key``, ``cache_key`` are not.
KEY_QUALIFIERS = frozenset({"api", "private", "access"})
ENV_SUFFIX = "env"  # ``*_env``: the name of an environment variable, exempt
# Shorter values get no derived forms: they are only matched as a whole string (doceval.common.redact).
MIN_DERIVED = 8
# Shorter values are not registered: masking every "0" or "ab" in the data would corrupt it, protect nothing.
MIN_REGISTERED_SECRET = 4
# Always treated as secret sources, whether or not the config names them (defence in depth).
DEFAULT_SECRET_ENV = ("OPENAI_API_KEY", "QDRANT_API_KEY", "MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_PASSWORD")
# An Authorization-style value: a scheme word, then the credential a reply may quote without it.
_SCHEME_VALUE = re.compile(r"^([A-Za-z][A-Za-z0-9_\-]*)\s+(\S.*)$")

_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_PARTS = re.compile(r"[.\[\]]+")  # dotted keys and list positions: each part is checked on its own
_extra: set[tuple[str, ...]] = set()
_extra_lock = threading.Lock()


def segments(name: str) -> list[str]:
    """``name``'s segments, lowercased: split on every non-alphanumeric character and on camelCase."""
    return [s.lower() for word in re.split(r"[^A-Za-z0-9]+", name) for s in _CAMEL.findall(word)]


def _parts(name: str) -> list[list[str]]:
    return [seg for part in _PARTS.split(name) if (seg := segments(part))]


def _names_variable(part: list[str]) -> bool:
    return len(part) > 1 and part[-1] == ENV_SUFFIX


def _secret_part(part: list[str]) -> bool:
    for i, seg in enumerate(part):
        if seg in SECRET_WORDS:
            return True
        if seg == "key" and (len(part) == 1 or (i > 0 and part[i - 1] in KEY_QUALIFIERS)):
            return True
    return any(_contains(part, extra) for extra in _extra)


def _contains(part: list[str], words: tuple[str, ...]) -> bool:
    n = len(words)
    return any(tuple(part[i : i + n]) == words for i in range(len(part) - n + 1))


def secret_name(name: str) -> bool:
    """Whether a config key (dotted, any depth), kwarg, header or query parameter named ``name`` holds a
    secret (the module docstring states the rule); a ``*_env`` name, or one under a ``*_env`` mapping, never."""
    parts = _parts(str(name))
    if any(_names_variable(part) for part in parts):
        return False
    return any(_secret_part(part) for part in parts)


def extend_secret_names(names: Iterable[str]) -> None:
    """Add a config's ``secrets:`` names to the rule, for the rest of this process."""
    found = {tuple(seg) for name in names if isinstance(name, str) and (seg := segments(name))}
    with _extra_lock:
        _extra.update(found)


def forget_secret_names() -> None:
    """Drop the names a ``secrets:`` list added (tests; a long-lived process between unrelated runs)."""
    with _extra_lock:
        _extra.clear()


def _base64_forms(text: str) -> set[str]:
    raw = text.encode("utf-8", "surrogatepass")
    out: set[str] = set()
    for encoded in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
        out.update({encoded.decode("ascii"), encoded.decode("ascii").rstrip("=")})
    return out


def _escaped_forms(text: str) -> set[str]:
    """``text`` as a JSON string's body (ASCII-only and not), a Python ``repr`` body, and ``quote_plus``."""
    return {
        json.dumps(text)[1:-1],
        json.dumps(text, ensure_ascii=False)[1:-1],
        repr(text)[1:-1],
        urllib.parse.quote_plus(text, safe=""),
    }


def derived_forms(value: str) -> set[str]:
    """What ``value`` looks like once encoded: base64 (standard and URL-safe, with and without padding) of the
    value and of ``Bearer <value>`` (a ``user:password`` pair is registered as a value of its own, so its
    base64, a Basic token, is among its forms); the value's ``quote_plus``,
    JSON-escaped and ``repr`` bodies; and every form (the value included) with ``/`` written ``\\/`` (JSON
    from PHP and others). Values shorter than ``MIN_DERIVED`` get none."""
    if len(value) < MIN_DERIVED:
        return set()
    forms = _base64_forms(value) | _base64_forms(f"Bearer {value}") | _escaped_forms(value)
    forms |= {form.replace("/", "\\/") for form in (*forms, value) if "/" in form}
    forms.discard(value)
    return forms


def secret_forms(value: str) -> set[str]:
    """``value`` and what the same secret looks like elsewhere: percent-encoded and decoded, without its
    scheme prefix (``Bearer x`` -> ``x``), a Basic token's decoded ``user:password`` and password, and each of
    these encoded (:func:`derived_forms`); forms shorter than ``MIN_REGISTERED_SECRET`` are left out."""
    forms = {value, urllib.parse.unquote(value), urllib.parse.quote(value, safe="")}
    match = _SCHEME_VALUE.match(value.strip())
    if match is not None:
        scheme, credential = match.group(1), match.group(2).strip()
        forms.add(credential)
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(credential, validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError, ValueError):
                decoded = ""
            user, sep, password = decoded.partition(":")
            forms.update({decoded, password} if sep else {decoded})
    forms = {f for f in forms if len(f.strip()) >= MIN_REGISTERED_SECRET}
    return forms.union(*(derived_forms(f) for f in forms))


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


def env_secret_values(*configs: Any, environ: Mapping[str, str] | None = None) -> list[str]:
    """Contents of the environment variables named by ``*_env`` keys of ``configs`` (mappings) and of
    ``DEFAULT_SECRET_ENV``, longest first."""
    env = os.environ if environ is None else environ
    names: set[str] = set(DEFAULT_SECRET_ENV)
    for block in configs:
        _env_names(block, names)
    values = {env.get(n, "") for n in names}
    return sorted((v for v in values if v.strip()), key=len, reverse=True)
