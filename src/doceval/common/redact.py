"""One scrubber for everything doceval records or prints: summaries, MLflow params/tags/artifacts, messages.

What counts as a secret (docs/design.md section 8.6; the rule itself is :mod:`doceval.common.secret_rule`):
the credentials of a URL (``user:password@``, a bare ``token@``, and the value of a query parameter whose name
is secret by the one name rule) wherever the URL appears in a string (``redact_url``, ``redact_urls``); the
value of a config key at any depth (a user's kwargs included) whose name is secret by the same rule; known
secret values: the contents of the variables named by ``*_env`` keys and of ``DEFAULT_SECRET_ENV``, the
credentials of URLs in the configuration and in any environment variable (``MLFLOW_TRACKING_URI``,
``RAY_ADDRESS``); a value shorter than ``MIN_SUBSTRING_SECRET`` only counts when a whole string equals it.

Every secret doceval learns during a run is registered once (:func:`register_secret`, :func:`register_config`,
:func:`register_overrides`, :func:`register_environment`) with its other forms (``secret_forms``: without its
scheme, a Basic token's parts, base64, ``quote_plus``, JSON and ``\\/`` escapes, ``repr``). Every writer then
passes what it writes through the registry: :func:`scrub_data` for data text (answers, questions, journals:
only known values are replaced, a URL in a doc stays as written), :func:`scrub_message` for messages (known
values, URL credentials, key-shaped strings), :func:`scrub` and :func:`redact_text` for config blocks and
MLflow (both include the registered values), :class:`ScrubbingStream` for stdout and stderr, and
:func:`install_log_scrubber` for every log record. Standard library only.
"""

from __future__ import annotations

import base64
import copy
import logging
import os
import re
import sys
import threading
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import is_dataclass
from typing import Any, TextIO

from doceval.common.secret_rule import (
    MIN_REGISTERED_SECRET,
    env_secret_values,
    extend_secret_names,
    forget_secret_names,
    secret_forms,
    secret_name,
)

REDACTED = "<redacted>"  # a secret value, or the value of a secret-named key
MASK = "***"  # a URL's credentials, a secret query value
MIN_SUBSTRING_SECRET = 8  # shorter secrets are only matched as whole values

# A URL inside free text: scheme://, then anything up to whitespace, a quote or an angle bracket.
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>`]+")
_USERINFO = re.compile(r"(//)[^/?#@]*@")  # fallback for a URL urlsplit rejects


def _secret_param(piece: str) -> bool:
    """``name=value`` (one query parameter as written) whose name is secret by the one name rule."""
    name, sep, _ = piece.partition("=")
    return bool(sep) and secret_name(urllib.parse.unquote_plus(name))


def _has_credentials(parts: urllib.parse.SplitResult) -> bool:
    return "@" in parts.netloc or any(_secret_param(p) for p in parts.query.split("&"))


def redact_url(url: str) -> str:
    """``url`` safe to record: ``user:password@`` replaced by ``***@``, the values of secret-looking query
    parameters by ``***``. A URL without credentials comes back unchanged."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # e.g. an unbalanced IPv6 bracket: mask what looks like userinfo, drop the query
        return _USERINFO.sub(r"\1" + MASK + "@", url.split("?", 1)[0])
    if not _has_credentials(parts):
        return url
    netloc = parts.netloc
    if "@" in netloc:
        netloc = MASK + "@" + netloc.rsplit("@", 1)[1]
    # Parameter by parameter as written (other parameters keep their exact spelling).
    query = "&".join(
        p.partition("=")[0] + "=" + MASK if _secret_param(p) else p for p in parts.query.split("&")
    )
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


_TRAILING = ".,;:!?)]}"  # punctuation that ends a sentence rather than the URL in free text


def _redact_match(match: re.Match[str]) -> str:
    url = match.group(0)
    stripped = url.rstrip(_TRAILING)
    return redact_url(stripped) + url[len(stripped) :]


def redact_urls(text: str) -> str:
    """Every URL in ``text`` with its credentials masked (see :func:`redact_url`); the rest unchanged."""
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(_redact_match, text)


def url_credentials(url: str) -> list[str]:
    """The secret parts of one URL, as written and percent-decoded: the password (or a bare user name, which
    is then a token) and the values of secret-named query parameters."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return []
    found: list[str] = []
    if "@" in parts.netloc:
        userinfo = parts.netloc.rsplit("@", 1)[0]
        user, sep, password = userinfo.partition(":")
        found += [password] if sep else [user]
    for key, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        if secret_name(key):
            found.append(value)
    out: list[str] = []
    for raw in found:
        for form in (raw, urllib.parse.unquote(raw), urllib.parse.quote(urllib.parse.unquote(raw), safe="")):
            if form and form not in out:
                out.append(form)
    return out


def _strings(obj: Any) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, Mapping):
        for k, v in obj.items():
            if isinstance(k, str):
                yield k
            yield from _strings(v)
    elif isinstance(obj, list | tuple | set | frozenset):
        for v in obj:
            yield from _strings(v)


def url_secret_values(*objs: Any) -> list[str]:
    """The credentials of every URL found in any string of ``objs`` (long enough to be matched inside other
    text: see ``MIN_SUBSTRING_SECRET``; a shorter one is still masked wherever its URL appears)."""
    out: set[str] = set()
    for obj in objs:
        for s in _strings(obj):
            if "://" in s:
                for m in _URL_IN_TEXT.finditer(s):
                    out.update(v for v in url_credentials(m.group(0)) if len(v) >= MIN_SUBSTRING_SECRET)
    return sorted(out, key=len, reverse=True)


def _plain(obj: Any) -> Any:
    """``obj`` as the walkers here read it. A typed config object is refused (a bug, not bad input): the walkers
    would see no keys in it and register nothing; callers pass ``config_dict(cfg)`` (common imports no config)."""
    if is_dataclass(obj) and not isinstance(obj, type):
        raise TypeError(f"pass config_dict() of the {type(obj).__name__}, not the typed object itself")
    return obj


def secret_values(*configs: Any, environ: Mapping[str, str] | None = None) -> list[str]:
    """Every known secret value in or behind ``configs`` (mappings or strings; ``config_dict`` of a typed one):
    :func:`env_secret_values` plus the credentials of the URLs they hold (:func:`url_secret_values`) and the
    registered secrets, longest first."""
    configs = tuple(_plain(c) for c in configs)
    merged = set(env_secret_values(*configs, environ=environ)) | set(url_secret_values(*configs))
    merged |= set(known_secrets())
    return sorted(merged, key=len, reverse=True)


def leaks(value: str, secrets: Iterable[str]) -> bool:
    """True when ``value`` is a secret or contains one (long enough to be matched as a substring)."""
    return any(value == s or (len(s) >= MIN_SUBSTRING_SECRET and s in value) for s in secrets if s)


def redact_text(value: str, secrets: Iterable[str] = ()) -> str:
    """``value`` with URL credentials masked and known secret values (``secrets`` and the registered ones)
    replaced by ``<redacted>``."""
    value = redact_urls(value)
    for s in _with_registered(secrets):
        if not s:
            continue
        if value == s:
            return REDACTED
        if len(s) >= MIN_SUBSTRING_SECRET:
            value = value.replace(s, REDACTED)
    return value


def redact_bytes(data: bytes, secrets: Iterable[str] = ()) -> bytes:
    """A file's content for recording: UTF-8 text as :func:`redact_text`; other bytes with the known secret
    values (long enough) replaced."""
    secrets = _with_registered(secrets)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        for s in secrets:
            if len(s) >= MIN_SUBSTRING_SECRET:
                data = data.replace(s.encode(), REDACTED.encode())
        return data
    return redact_text(text, secrets).encode("utf-8")


def scrub(obj: Any, secrets: Iterable[str] = (), *, drop_secret_keys: bool = True) -> Any:
    """A deep copy of a JSON-like ``obj`` that is safe to record: values of secret-named keys dropped (or
    ``<redacted>`` with ``drop_secret_keys=False``), URL credentials masked and known secret values redacted in
    every string (mapping keys included); tuples become lists. The registered secrets always count."""
    secrets = _with_registered(secrets)

    def walk(value: Any) -> Any:
        if isinstance(value, Mapping):
            out: dict[Any, Any] = {}
            for k, v in value.items():
                key = redact_text(k, secrets) if isinstance(k, str) else k
                if secret_name(str(k)):
                    if not drop_secret_keys:
                        out[key] = REDACTED
                    continue
                out[key] = walk(v)
            return out
        if isinstance(value, list | tuple):
            return [walk(v) for v in value]
        if isinstance(value, str):
            return redact_text(value, secrets)
        return copy.deepcopy(value)

    return walk(obj)


# ------------------------------------------------------------------------------------ the run's registry

_registry: set[str] = set()
_registry_lock = threading.Lock()
_sorted_cache: list[str] = []
# The registry as one matcher (a registered value in its forms is a few dozen strings: one regex pass over a
# string is several times faster than a substring test per form): long values anywhere, short ones whole.
_matcher: re.Pattern[str] | None = None
_whole: frozenset[str] = frozenset()
# Key-shaped strings in messages only (never in data text: "sk-learn" is a word in docs).
_KEYLIKE = re.compile(r"\b(sk-|Bearer\s+|Basic\s+)[A-Za-z0-9_\-.+/=*]{8,}")


def register_secret(value: Any) -> None:
    """Remember ``value`` (and its other forms) as a secret of this process: every writer scrubs it from now
    on. Blank values are ignored; one shorter than ``MIN_SUBSTRING_SECRET`` is masked only as a whole value."""
    if value is None or isinstance(value, bool) or len(str(value).strip()) < MIN_REGISTERED_SECRET:
        return
    global _sorted_cache
    forms = secret_forms(str(value))
    with _registry_lock:
        if forms <= _registry:
            return
        _registry.update(forms)
        _sorted_cache = sorted(_registry, key=len, reverse=True)
        _compile_registry()
    install_log_scrubber()


def register_basic_token(user: str, password: str) -> str:
    """The ``Basic`` token of ``user:password`` (as an HTTP client sends it), registered with its parts."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    register_secret(f"Basic {token}")
    register_secret(password)
    return token


def _secret_items(obj: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """``(dotted key, value as written)`` for every secret-named key holding a scalar, at any depth; and
    ``(dotted key, "")`` for every string holding URL credentials."""
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if secret_name(key) and isinstance(v, str | int | float) and not isinstance(v, bool) and str(v):
                yield key, str(v)
            else:
                yield from _secret_items(v, key)
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            yield from _secret_items(v, f"{prefix}[{i}]")
    elif isinstance(obj, str) and any(url_credentials(m.group(0)) for m in _URL_IN_TEXT.finditer(obj)):
        yield prefix, ""


def register_config(*configs: Mapping[Any, Any], environ: Mapping[str, str] | None = None) -> None:
    """Register every secret a configuration (the mapping composition validates, or ``config_dict`` of a typed
    :class:`~doceval.config.schema.Config`) holds or points at: the contents of ``*_env`` variables (and
    ``DEFAULT_SECRET_ENV``), URL credentials, and the values of secret-named keys at any depth (a retriever's
    ``kwargs.token``), plus the Basic token a URL's userinfo becomes; the names of a ``secrets:`` list join the rule first, and the
    environment's URL credentials are registered too (:func:`register_environment`)."""
    configs = tuple(_plain(c) for c in configs)
    for composed in configs:  # the `secrets:` list, read before composition has typed it (compose calls here)
        listed = composed.get("secrets") if isinstance(composed, Mapping) else None
        if isinstance(listed, list | tuple):
            extend_secret_names(str(n) for n in listed)
    register_environment(environ)
    found = [value for cfg in configs for _, value in _secret_items(cfg) if value]
    found += env_secret_values(*configs, environ=environ) + url_secret_values(*configs)
    for value in found:
        register_secret(value)
    for cfg in configs:
        for text in _strings(cfg):
            for m in _URL_IN_TEXT.finditer(text) if "@" in text else ():
                _register_userinfo(m.group(0).rstrip(_TRAILING))


def _register_userinfo(url: str) -> None:
    try:
        parts = urllib.parse.urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return
    if user is not None or password is not None:
        register_basic_token(urllib.parse.unquote(user or ""), urllib.parse.unquote(password or ""))


_LIST_ITEM = re.compile(r"[^\s,\[\]'\"]+")


def register_overrides(overrides: Iterable[str]) -> None:
    """Register secrets in command-line overrides before anything parses them (a Hydra syntax error quotes
    the override): the value of a secret-named key and the credentials of a URL, as written. A ``secrets=``
    override's names join the rule first, so the other overrides are judged by it."""
    overrides = [str(o) for o in overrides]
    for override in overrides:
        key, sep, value = override.partition("=")
        if sep and key.strip().lstrip("+~") == "secrets":
            extend_secret_names(_LIST_ITEM.findall(value))
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep:
            continue
        value = value.strip().strip("'\"")
        if secret_name(key.lstrip("+~")):
            register_secret(value)
            register_secret(value.rstrip(_TRAILING))
        for m in _URL_IN_TEXT.finditer(value):
            url = m.group(0).rstrip(_TRAILING)
            for cred in url_credentials(url):
                register_secret(cred)
            _register_userinfo(url)


def register_environment(environ: Mapping[str, str] | None = None) -> None:
    """Register ``DEFAULT_SECRET_ENV`` and the credentials of every URL in an environment variable (MLflow and
    Ray read ``MLFLOW_TRACKING_URI``, ``RAY_ADDRESS`` and print them); a bare ``user@`` only in an http(s) or ray
    URL (``https://TOKEN@host``: ``ssh://git@host`` names an account)."""
    env = os.environ if environ is None else environ
    for value in env_secret_values(environ=env):
        register_secret(value)
    for value in env.values():
        for m in _URL_IN_TEXT.finditer(value) if "://" in value else ():
            url = m.group(0).rstrip(_TRAILING)
            scheme, _, rest = url.partition("://")
            account = ":" not in rest.split("/")[0].rpartition("@")[0]  # a user name alone
            if account and scheme.lower() not in ("http", "https", "ray"):
                url = _USERINFO.sub(r"\1", url)
            for cred in url_credentials(url):
                register_secret(cred)
            if "@" in url:
                _register_userinfo(url)


def known_secrets() -> list[str]:
    """The registered secrets, longest first (so a secret inside a longer one is replaced whole)."""
    return _sorted_cache


def forget_secrets() -> None:
    """Empty the registry, and the names a ``secrets:`` list added to the rule (tests; a long-lived process
    between unrelated runs)."""
    global _sorted_cache
    with _registry_lock:
        _registry.clear()
        _sorted_cache = []
        _compile_registry()
    forget_secret_names()


def _with_registered(secrets: Iterable[str]) -> list[str]:
    given = [s for s in secrets if s]
    if not _sorted_cache:
        return given
    return sorted(set(given) | set(_sorted_cache), key=len, reverse=True)


def _compile_registry() -> None:
    """Rebuild the matcher from the registry (called with the registry's lock held). Longest first, so a
    secret inside a longer one is replaced whole."""
    global _matcher, _whole
    long = [s for s in _sorted_cache if len(s) >= MIN_SUBSTRING_SECRET]
    _matcher = re.compile("|".join(map(re.escape, long))) if long else None
    _whole = frozenset(_sorted_cache)


def _replace_registered(text: str) -> str:
    """``text`` with every registered secret replaced: a whole string equal to one, or a long one anywhere."""
    if text in _whole:
        return REDACTED
    matcher = _matcher
    return text if matcher is None else matcher.sub(REDACTED, text)


def scrub_data(obj: Any) -> Any:
    """``obj`` (a string or JSON-like value) with every registered secret replaced by ``<redacted>``; nothing
    else changes (data text keeps the URLs it quotes). Returns ``obj`` itself when nothing is registered."""
    if not _sorted_cache:
        return obj

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return _replace_registered(value)
        if isinstance(value, Mapping):
            return {walk(k) if isinstance(k, str) else k: walk(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [walk(v) for v in value]
        return value

    return walk(obj)


def scrub_message(text: str) -> str:
    """A message safe to print or log: registered secrets, URL credentials and key-shaped strings
    (``sk-...``, ``Bearer ...``) masked."""
    text = _replace_registered(redact_urls(text))
    return _KEYLIKE.sub(lambda m: m.group(1) + MASK, text)


class ScrubbingStream:
    """A text stream (stdout, stderr) whose writes are scrubbed of every registered secret first, so no print,
    progress bar or library message (MLflow's "View run at" line, a user's ``print(repr(token))``) shows one."""

    def __init__(self, stream: TextIO | Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(scrub_data(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # fileno, flush, isatty, encoding...: the real stream's
        return getattr(self._stream, name)


def scrub_stdio() -> None:
    """Put :class:`ScrubbingStream` in front of this process's stdout and stderr (once): a worker process
    (a sweep point) that prints for the user code it runs."""
    if not isinstance(sys.stdout, ScrubbingStream):
        sys.stdout = ScrubbingStream(sys.stdout)
    if not isinstance(sys.stderr, ScrubbingStream):
        sys.stderr = ScrubbingStream(sys.stderr)


_log_scrubber_installed = False


def install_log_scrubber() -> None:
    """Scrub every log record (doceval's and its libraries') as it is made: its message is rendered, scrubbed
    and frozen, so no handler, formatter or later argument can bring a secret back."""
    global _log_scrubber_installed
    with _registry_lock:
        if _log_scrubber_installed:
            return
        _log_scrubber_installed = True
    make_record = logging.getLogRecordFactory()

    def scrubbed_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        if _sorted_cache:
            try:
                message = record.getMessage()
            except (TypeError, ValueError):  # a record whose arguments do not fit: leave it to logging
                return record
            record.msg, record.args = scrub_message(message), None
        return record

    logging.setLogRecordFactory(scrubbed_record)


def secret_locations(recorded: Mapping[str, Any]) -> list[str]:
    """The dotted keys of ``recorded`` (a config as a mapping) that hold a secret as written: a secret-named key
    with a value, a string with URL credentials, or a string holding a registered secret in any of its forms. A
    file that is committed (params.yaml) must hold none of them."""
    plain = _plain(recorded)
    found = [key for key, _ in _secret_items(plain)]
    secrets = known_secrets()
    for key, value in _string_items(plain):
        if key not in found and leaks(value, secrets):
            found.append(key)
    return found


def _string_items(obj: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """``(dotted key, string)`` for every string value at any depth."""
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            yield from _string_items(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            yield from _string_items(v, f"{prefix}[{i}]")
    elif isinstance(obj, str):
        yield prefix, obj
