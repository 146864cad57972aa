"""The ``agent=http`` system under test: POST each probe as JSON to the user's endpoint and read a JSON object
back, with the standard library only (urllib), on the shared retry loop of :mod:`doceval.common.retry`.

Request body: ``{"question", "library", "version", "session_id"}``, plus ``"params"`` (``agent.params``) when
it has any, and ``"repeat"`` and ``"seed"`` under ``eval --repeats N`` (N > 1). Headers come from the environment
(``headers_env``: header name -> variable name); their values are sent and nothing else: never logged, never
in a message, a journal or :meth:`HttpAgent.describe`. Redirects are not followed, so credentials never travel
to another host.

Limits: ``timeout_s`` is a deadline for the whole request, from connect to the last byte of the reply (a server
that drips its reply byte by byte cannot stretch it), and a reply body over ``max_reply_bytes`` is refused
without reading the rest.
"""

from __future__ import annotations

import email.utils
import functools
import http.client
import io
import json
import logging
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from doceval.common.bounded_json import loads
from doceval.common.redact import (
    redact_url,
    register_basic_token,
    register_secret,
    scrub,
    scrub_message,
    url_credentials,
)
from doceval.common.retry import Classification, RetriesExhausted, RetryPolicy, call_with_retries
from doceval.errors import UsageError
from doceval.seam import Probe

if TYPE_CHECKING:
    from doceval.config import schema

log = logging.getLogger(__name__)

_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # an RFC 9110 token
_CHUNK = 64 * 1024


def _params(value: Any) -> dict[str, Any]:
    """``agent.params``: a mapping with string keys whose values JSON can carry."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise UsageError(
            "agent.params: expected a mapping of request parameters (set them as +agent.params.NAME=VALUE)"
        )
    try:
        json.dumps(dict(value), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UsageError(
            f"agent.params: not representable as JSON ({exc}); use strings, numbers, "
            "booleans, lists and mappings"
        ) from None
    return dict(value)


def reply_cap(value: Any) -> int:
    """``agent.max_reply_bytes``: an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"agent.max_reply_bytes={value!r}: expected an integer >= 1 (e.g. 4194304, 4 MiB)")
    return value


class AgentCallError(Exception):
    """A call to an external agent that failed for good. The message is ``"<what>: <message>"`` and safe to
    record: no header value or URL credential is in it."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A redirect would resend the credential headers to wherever the server points; surface it instead.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _DeadlineIO(io.RawIOBase):
    """The reply's socket, read with at most the time left before the deadline per read: a socket timeout
    alone bounds each read, so a server sending a byte every second would never time out."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        super().__init__()
        self._sock = sock
        self._raw = sock.makefile("rb", buffering=0)  # holds the socket open as http.client expects
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline passed while reading the reply")
        self._sock.settimeout(left)
        n: int | None = self._raw.readinto(buffer)
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


class _DeadlineResponse(http.client.HTTPResponse):
    """A response whose status line, headers and body are all read before ``deadline``."""

    def __init__(self, sock: socket.socket, *args: Any, deadline: float, **kwargs: Any) -> None:
        super().__init__(sock, *args, **kwargs)
        self.fp.close()  # the file super() opened; the one below keeps the socket open instead
        self.fp = io.BufferedReader(_DeadlineIO(sock, deadline))


class _DeadlineMixin:
    """For urllib's HTTP(S) handlers: the connection reads its response with the request's ``deadline``."""

    def do_open(self, http_class: Any, req: urllib.request.Request, **kwargs: Any) -> Any:
        deadline = getattr(req, "deadline", None)
        if deadline is None:
            return super().do_open(http_class, req, **kwargs)  # type: ignore[misc]

        def connection(*args: Any, **conn_kwargs: Any) -> http.client.HTTPConnection:
            conn: http.client.HTTPConnection = http_class(*args, **conn_kwargs)
            conn.response_class = functools.partial(_DeadlineResponse, deadline=deadline)  # type: ignore[assignment]
            return conn

        return super().do_open(connection, req, **kwargs)  # type: ignore[misc]


class _DeadlineHTTPHandler(_DeadlineMixin, urllib.request.HTTPHandler):
    pass


class _DeadlineHTTPSHandler(_DeadlineMixin, urllib.request.HTTPSHandler):
    pass


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
        params: Mapping[str, Any] | None = None,
        timeout_s: float,
        max_retries: int,
        max_reply_bytes: int,
        retry_base_delay_s: float | None = None,
        retry_max_delay_s: float | None = None,
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
        self.params = _params(params)
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
        for credential in url_credentials(url):  # secret-named query values (the one name rule)
            register_secret(credential)
        self._url = urllib.parse.urlunsplit(parts)
        self.url = redact_url(url)  # for messages and provenance
        self.timeout_s = float(timeout_s)
        self.max_reply_bytes = reply_cap(max_reply_bytes)
        # None: doceval.common.retry's own delay (conf/agent/http.yaml leaves them out)
        delays = {"base_delay_s": retry_base_delay_s, "max_delay_s": retry_max_delay_s}
        self.policy = RetryPolicy(max_retries, **{k: v for k, v in delays.items() if v is not None})
        self._sleep = sleep
        self._opener = urllib.request.build_opener(
            _NoRedirect(), _DeadlineHTTPHandler(), _DeadlineHTTPSHandler()
        )
        self._lock = threading.Lock()
        self._counts = {"requests": 0, "retries": 0}
        self.sampling: dict[str, int] | None = (
            None  # --repeats: the body's "repeat" and "seed" (with_sampling)
        )

    def __getstate__(self) -> dict[str, Any]:
        # engine=ray ships the agent to its actors with the header values read here (a worker on another host
        # has not got the driver's environment); the opener and lock are each process's own.
        state = dict(self.__dict__)
        for own in ("_opener", "_lock"):
            del state[own]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        for value in self._headers.values():
            register_secret(value)  # the worker's own scrubber must know them too (its error messages)
        self._opener = urllib.request.build_opener(
            _NoRedirect(), _DeadlineHTTPHandler(), _DeadlineHTTPSHandler()
        )
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, cfg: schema.AgentHttp, **kwargs: Any) -> HttpAgent:
        """From the ``agent`` block (``url``, ``headers_env``, ``params``, ``timeout_s``, ``max_retries``,
        ``max_reply_bytes`` and, when set, ``retry_base_delay_s`` and ``retry_max_delay_s``: None leaves
        doceval.common.retry's own delays)."""
        url = cfg.url
        if not isinstance(url, str) or not url.strip():
            raise UsageError("agent=http needs agent.url=URL (e.g. agent.url=http://127.0.0.1:8000/ask)")
        headers_env = cfg.headers_env  # free-form (config.schema.OPEN_MAPPINGS): read as the user wrote it
        if not isinstance(headers_env, Mapping):
            raise UsageError("agent.headers_env: expected a mapping of header name -> environment variable")
        return cls(
            url.strip(),
            headers_env={str(k): v for k, v in headers_env.items()},
            params=cfg.params,
            timeout_s=float(cfg.timeout_s),
            max_retries=cfg.max_retries,
            max_reply_bytes=reply_cap(cfg.max_reply_bytes),
            retry_base_delay_s=cfg.retry_base_delay_s,
            retry_max_delay_s=cfg.retry_max_delay_s,
            **kwargs,
        )

    # ------------------------------------------------------------------------------------- the protocol

    def describe(self) -> dict[str, Any]:
        # Header names and variable names say how to reproduce the run; the values never leave the process.
        # The request parameters tell two sweep points apart (the run key hashes this); secret-named ones and
        # registered secrets are recorded redacted (doceval.common.redact).
        return {
            "name": self.name,
            "url": self.url,
            "headers_env": dict(sorted(self.headers_env.items())),
            **({"params": scrub(self.params, drop_secret_keys=False)} if self.params else {}),
            **({"sampling": dict(self.sampling)} if self.sampling else {}),
            "timeout_s": self.timeout_s,
            "max_retries": self.policy.max_retries,
        }

    def check(self) -> None:
        """One request, no retries: a URL that does not answer (or rejects the route or the credentials) is a
        usage error before any work; a server that answers with an error is only a warning."""
        payload = self._body(
            question="doceval connectivity check: please ignore",
            library="doceval",
            version="0",
            session_id=f"doceval-check-{uuid.uuid4().hex[:12]}",
        )
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
        payload = self._body(
            question=probe.question, library=probe.library, version=probe.version, session_id=session_id
        )
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

    def _body(self, **fields: str) -> dict[str, Any]:
        """The request's JSON body: the probe's fields, ``params`` only when agent.params has any (an endpoint
        written before the key existed sees the same body as before), and under ``--repeats N > 1`` the repeat
        index and seed (``"repeat"``, ``"seed"``) beside them."""
        return {**fields, **({"params": self.params} if self.params else {}), **(self.sampling or {})}

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
        # One deadline from connect to the last byte: connect and send get the time left (all of it, here),
        # every read of the status line, headers and body the time left then (_DeadlineIO).
        deadline = time.monotonic() + self.timeout_s
        request.deadline = deadline  # type: ignore[attr-defined]  # read by _DeadlineMixin
        with self._opener.open(request, timeout=self.timeout_s) as reply:
            raw = self._read_capped(reply, deadline)
        try:
            data = loads(raw)  # nesting bounded: a 100k-deep reply is malformed, not a RecursionError
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            snippet = self._redact(raw[:80].decode("utf-8", "replace"))
            raise AgentCallError(f"malformed: the reply is not JSON ({exc}); it starts {snippet!r}") from None
        if not isinstance(data, dict):
            raise AgentCallError(
                f"malformed: the reply is JSON but not an object (got {type(data).__name__})"
            )
        return data

    def _read_capped(self, reply: Any, deadline: float) -> bytes:
        """The body, in chunks, up to ``max_reply_bytes``: a bigger one is refused (Content-Length first)."""
        cap = self.max_reply_bytes
        declared = reply.headers.get("Content-Length")
        if declared is not None and declared.strip().isdigit() and int(declared) > cap:
            raise AgentCallError(
                f"oversize: reply over agent.max_reply_bytes={cap} bytes (Content-Length {declared.strip()})"
            )
        chunks: list[bytes] = []
        size = 0
        while size <= cap:
            if time.monotonic() >= deadline:
                raise TimeoutError("the deadline passed while reading the reply")
            chunk = reply.read(min(_CHUNK, cap + 1 - size))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
        raise AgentCallError(f"oversize: reply over agent.max_reply_bytes={cap} bytes")

    def _describe(self, exc: BaseException, body: bool = False) -> str:
        if isinstance(exc, urllib.error.HTTPError):
            text = f"HTTP {exc.code} {exc.reason}"
            if body:
                try:
                    detail = exc.read(200).decode("utf-8", "replace").strip()  # never the whole body
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
