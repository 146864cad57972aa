"""The ``agent=http`` system under test: POST each probe as JSON to the user's endpoint and read a JSON object
back, with the standard library only (urllib), on the shared retry loop of :mod:`doceval.common.retry`.

Request body: ``{"question", "library", "version", "session_id"}``. Headers come from the environment
(``headers_env``: header name -> variable name); their values are sent and nothing else: never logged, never
in a message, a journal or :meth:`HttpAgent.describe`. Redirects are not followed, so credentials never travel
to another host.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import logging
import os
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from doceval.common.redact import (
    SECRET_QUERY,
    redact_url,
    register_basic_token,
    register_secret,
    scrub_message,
)
from doceval.common.retry import Classification, RetriesExhausted, RetryPolicy, call_with_retries
from doceval.errors import UsageError
from doceval.seam import Probe

log = logging.getLogger(__name__)

_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # an RFC 9110 token


class AgentCallError(Exception):
    """A call to an external agent that failed for good. The message is ``"<what>: <message>"`` and safe to
    record: no header value or URL credential is in it."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A redirect would resend the credential headers to wherever the server points; surface it instead.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _classify(exc: BaseException) -> Classification | None:
    """Transient failures (worth a retry) as (kind, status); None for the rest."""
    if isinstance(exc, urllib.error.HTTPError):  # before URLError: it is one
        if exc.code == 429:
            return "rate_limit", 429
        if exc.code == 408 or exc.code >= 500:
            return "server", exc.code
        return None
    if isinstance(exc, TimeoutError):
        return "timeout", None
    if isinstance(exc, urllib.error.URLError):
        return ("timeout", None) if isinstance(exc.reason, TimeoutError) else ("connection", None)
    if isinstance(exc, ConnectionError | http.client.HTTPException):  # reset, dropped, torn reply
        return "connection", None
    return None


def _retry_after(exc: BaseException) -> float | None:
    """Retry-After in seconds: delta-seconds or an HTTP date."""
    if not isinstance(exc, urllib.error.HTTPError) or exc.headers is None:
        return None
    value = exc.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


class HttpAgent:
    """An external agent behind an HTTP endpoint (see the module docstring)."""

    name = "http"

    def __init__(
        self,
        url: str,
        *,
        headers_env: Mapping[str, str] | None = None,
        timeout_s: float = 30.0,
        max_retries: int = 3,
        retry_base_delay_s: float = 1.0,
        retry_max_delay_s: float = 30.0,
        environ: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(
                f"agent.url={redact_url(url)}: expected an http:// or https:// URL "
                "(e.g. agent.url=http://127.0.0.1:8000/ask)"
            )
        if not timeout_s > 0:
            raise UsageError(f"agent.timeout_s={timeout_s}: expected a number > 0 (e.g. agent.timeout_s=30)")
        if max_retries < 0:
            raise UsageError(f"agent.max_retries={max_retries}: expected an integer >= 0")
        env = os.environ if environ is None else environ
        self.headers_env = dict(headers_env or {})
        self._headers: dict[str, str] = {}
        for header, var in self.headers_env.items():
            if not _HEADER_NAME.fullmatch(header):
                raise UsageError(f"agent.headers_env.{header}: not a valid HTTP header name")
            if not isinstance(var, str) or not var:
                raise UsageError(f"agent.headers_env.{header}: expected the name of an environment variable")
            value = env.get(var)
            if value is None:
                raise UsageError(
                    f"agent.headers_env.{header}: environment variable {var} is not set "
                    f"(export {var}=..., or drop the header)"
                )
            if "\n" in value or "\r" in value:
                raise UsageError(f"agent.headers_env.{header}: the value of {var} contains a line break")
            self._headers[header] = value
            register_secret(value)  # with and without its scheme prefix: a reply may quote either
        # urllib sends no credentials from the URL itself: move user:password into Basic auth.
        if parts.username is not None or parts.password is not None:
            user = urllib.parse.unquote(parts.username or "")
            password = urllib.parse.unquote(parts.password or "")
            token = register_basic_token(user, password)
            self._headers.setdefault("Authorization", f"Basic {token}")
            parts = parts._replace(netloc=parts.netloc.rsplit("@", 1)[1])
        for key, value in urllib.parse.parse_qsl(parts.query):
            if SECRET_QUERY.search(key):
                register_secret(value)
        self._url = urllib.parse.urlunsplit(parts)
        self.url = redact_url(url)  # for messages and provenance
        self.timeout_s = float(timeout_s)
        self.policy = RetryPolicy(max_retries, retry_base_delay_s, retry_max_delay_s)
        self._sleep = sleep
        self._opener = urllib.request.build_opener(_NoRedirect())
        self._lock = threading.Lock()
        self._counts = {"requests": 0, "retries": 0}

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], **kwargs: Any) -> HttpAgent:
        """From the ``agent`` block (``url``, ``headers_env``, ``timeout_s``, ``max_retries`` and, when present,
        ``retry_base_delay_s`` and ``retry_max_delay_s``)."""
        url = cfg.get("url")
        if not isinstance(url, str) or not url.strip():
            raise UsageError("agent=http needs agent.url=URL (e.g. agent.url=http://127.0.0.1:8000/ask)")
        headers_env = cfg.get("headers_env") or {}
        if not isinstance(headers_env, Mapping):
            raise UsageError("agent.headers_env: expected a mapping of header name -> environment variable")
        optional = {k: cfg[k] for k in ("retry_base_delay_s", "retry_max_delay_s") if cfg.get(k) is not None}
        return cls(
            url.strip(),
            headers_env={str(k): v for k, v in headers_env.items()},
            timeout_s=float(cfg.get("timeout_s", 30.0)),
            max_retries=int(cfg.get("max_retries", 3)),
            **optional,
            **kwargs,
        )

    # ------------------------------------------------------------------------------------- the protocol

    def describe(self) -> dict[str, Any]:
        # Header names and variable names say how to reproduce the run; the values never leave the process.
        return {
            "name": self.name,
            "url": self.url,
            "headers_env": dict(sorted(self.headers_env.items())),
            "timeout_s": self.timeout_s,
            "max_retries": self.policy.max_retries,
        }

    def check(self) -> None:
        """One request, no retries: a URL that does not answer (or rejects the route or the credentials) is a
        usage error before any work; a server that answers with an error is only a warning."""
        payload = {
            "question": "doceval connectivity check: please ignore",
            "library": "doceval",
            "version": "0",
            "session_id": f"doceval-check-{uuid.uuid4().hex[:12]}",
        }
        try:
            self._post(payload)
        except urllib.error.HTTPError as exc:
            hint = {
                401: "check the credentials sent from agent.headers_env",
                403: "check the credentials sent from agent.headers_env",
                404: "check the path in agent.url (doceval POSTs JSON to it)",
                405: "the URL does not take POST: check the path in agent.url",
            }.get(exc.code)
            if hint is not None:
                raise UsageError(f"agent.url={self.url}: {self._describe(exc)}; {hint}") from None
            log.warning("agent.url=%s answers, but the check got %s", self.url, self._describe(exc))
        except AgentCallError as exc:
            log.warning("agent.url=%s answers, but the check got %s", self.url, exc)
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            raise UsageError(
                f"agent.url={self.url} does not answer ({self._describe(exc)}); start the agent or fix agent.url"
            ) from None

    def call(self, probe: Probe, session_id: str) -> Mapping[str, Any]:
        payload = {
            "question": probe.question,
            "library": probe.library,
            "version": probe.version,
            "session_id": session_id,
        }
        try:
            return call_with_retries(
                lambda: self._post(payload),
                self.policy,
                classify=_classify,
                retry_after=_retry_after,
                what=f"agent call for {probe.id}",
                describe=self._describe,
                sleep=self._sleep,
                on_attempt=lambda: self._count("requests"),
                on_retry=lambda: self._count("retries"),
            )
        except RetriesExhausted as exc:
            raise AgentCallError(
                f"{exc.kind}: {self._describe(exc.last)} (gave up after {exc.attempts} attempt(s))"
            ) from None
        except urllib.error.HTTPError as exc:  # a 4xx a retry cannot fix
            raise AgentCallError(f"http: {self._describe(exc, body=True)}") from None

    def stats(self) -> dict[str, int]:
        """Requests sent (every attempt) and retries, over this agent's life; the check is not counted."""
        with self._lock:
            return dict(self._counts)

    # ------------------------------------------------------------------------------------------ helpers

    def _count(self, what: str) -> None:
        with self._lock:
            self._counts[what] += 1

    def _post(self, payload: Mapping[str, Any]) -> Mapping[str, Any]:
        request = urllib.request.Request(
            self._url,
            data=json.dumps(payload).encode("utf-8"),
            method="POST",
            headers={"Content-Type": "application/json", "Accept": "application/json", **self._headers},
        )
        with self._opener.open(request, timeout=self.timeout_s) as reply:
            raw = reply.read()
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            snippet = self._redact(raw[:80].decode("utf-8", "replace"))
            raise AgentCallError(f"malformed: the reply is not JSON ({exc}); it starts {snippet!r}") from None
        if not isinstance(data, dict):
            raise AgentCallError(
                f"malformed: the reply is JSON but not an object (got {type(data).__name__})"
            )
        return data

    def _describe(self, exc: BaseException, body: bool = False) -> str:
        if isinstance(exc, urllib.error.HTTPError):
            text = f"HTTP {exc.code} {exc.reason}"
            if body:
                try:
                    detail = exc.read()[:200].decode("utf-8", "replace").strip()
                except (OSError, http.client.HTTPException):
                    detail = ""
                text += f": {detail}" if detail else ""
        elif isinstance(exc, TimeoutError) or (
            isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, TimeoutError)
        ):
            text = f"no reply within {self.timeout_s:g}s"
        elif isinstance(exc, urllib.error.URLError):
            text = f"{exc.reason}"
        else:
            text = f"{type(exc).__name__}: {str(exc)[:300]}"
        return self._redact(text)

    def _redact(self, text: str) -> str:
        return scrub_message(text)  # the one scrubber: every secret above was registered with it
