"""The user's assistant as a system under test: the ``agent=function`` adapter (a Python callable) and the
factory for ``agent=function|http`` (the HTTP adapter is :mod:`doceval.system.external.http`), and how a reply
is read: a JSON object/mapping with ``answer`` (str or null), ``sources`` (id strings or ``{"id", "score"}``
objects, best first) and ``refused`` (bool); optional ``reason`` and ``usage``; every other key kept in
``extra``. A reply of another shape, an exception or a call that failed after its retries is an error for
that entry (``system_error_text``); the harness's run loop (:mod:`doceval.harness.agents`) records it.

:data:`AGENTS` (the one plug-in rule, :class:`~doceval.common.registry.Registry`) maps ``agent.name`` to its
builder; a builder returning None means doceval's own agent answers (``agent=docchat``).
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from doceval.common.bounded_json import MAX_JSON_DEPTH, deeper_than
from doceval.common.concurrency import CallTimedOut, DeadlineCaller, timeout_of
from doceval.common.io import json_text
from doceval.common.naming import OWN_AGENT, USER_FUNCTION
from doceval.common.redact import scrub
from doceval.common.registry import Registry, as_variant
from doceval.common.targets import build_from_factory, load_target, provenance_of
from doceval.config import schema
from doceval.errors import UsageError
from doceval.seam import InvalidRetrieval, Probe, Reply, Source, source_problem
from doceval.system.external.http import AgentCallError, HttpAgent, reply_cap

log = logging.getLogger(__name__)

__all__ = [
    "AGENTS",
    "AgentCallError",
    "ExternalAgent",
    "FunctionAgent",
    "HttpAgent",
    "InvalidResponse",
    "function_agent",
    "make_agent",
    "parse_response",
    "register_agent",
    "resolve_target",
    "system_error_text",
    "with_sampling",
]

_CALL = "(question=..., library=..., version=..., session_id=...)"
_RESERVED = ("answer", "sources", "refused", "reason", "usage")


class ExternalAgent(Protocol):
    name: str  # "function" or "http"
    # --repeats N > 1: {"repeat": r, "seed": s} sent with every call of repeat r (with_sampling); None: nothing
    sampling: dict[str, int] | None

    def describe(self) -> dict[str, Any]:
        """Provenance for the summary and MLflow: the target and its source sha256 (or package version), or
        the URL with credentials redacted; never a header value."""
        ...

    def check(self) -> None:
        """Before any work: raise UsageError when the system cannot be reached."""
        ...

    def call(self, probe: Probe, session_id: str) -> Mapping[str, Any]:
        """One raw call; raises on failure."""
        ...


# ----------------------------------------------------------------------------------- agent=function


class FunctionAgent:
    """A Python callable ``fn(question=..., library=..., version=..., session_id=...)`` returning the reply,
    called on a worker thread with a deadline (``timeout_s``; None: in the caller's thread, no deadline)."""

    name = USER_FUNCTION

    def __init__(
        self,
        fn: Callable[..., Mapping[str, Any]],
        target: str,
        *,
        timeout_s: float | None,
        max_reply_bytes: int,
        kwargs: Mapping[str, Any] | None = None,
        origin: Any = None,
    ) -> None:
        """``fn`` is the assistant; with ``kwargs`` it was made by the factory ``origin`` (whose code the
        provenance hashes) called with them."""
        self._fn = fn
        self.target = target
        self.timeout_s = timeout_of(timeout_s, "agent.timeout_s")
        self.max_reply_bytes = reply_cap(max_reply_bytes)
        self._caller = DeadlineCaller("doceval-agent")
        self.kwargs: dict[str, Any] = dict(kwargs or {})
        self._provenance = provenance_of(fn if origin is None else origin)
        self.sampling: dict[str, int] | None = None
        self._sampling_kwargs: dict[str, int] = {}  # the keys of ``sampling`` the function accepts

    def __getstate__(self) -> dict[str, Any]:
        # engine=ray ships the agent to its actors: the function goes by reference to its module (an import
        # path) or by value (a closure); the deadline threads are each process's own.
        state = dict(self.__dict__)
        del state["_caller"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._caller = DeadlineCaller("doceval-agent")

    def describe(self) -> dict[str, Any]:
        # The factory's kwargs tell two sweep points apart (the run key hashes this); secret-named ones and
        # registered secrets are recorded redacted (doceval.common.redact).
        kwargs = {"kwargs": scrub(self.kwargs, drop_secret_keys=False)} if self.kwargs else {}
        sampled = {"sampling": dict(self.sampling)} if self.sampling else {}
        return {"name": self.name, "target": self.target, **kwargs, **self._provenance, **sampled}

    def check(self) -> None:
        return None  # resolving the target and its signature already ran in make_agent/function_agent

    @property
    def abandoned(self) -> int:
        """Calls abandoned past their deadline so far (their threads may still be running)."""
        return self._caller.abandoned

    def call(self, probe: Probe, session_id: str) -> Mapping[str, Any]:
        reply = self._caller.call(
            lambda: self._fn(
                question=probe.question,
                library=probe.library,
                version=probe.version,
                session_id=session_id,
                **self._sampling_kwargs,
            ),
            self.timeout_s,
        )
        self._check_size(reply)
        return reply

    def _check_size(self, reply: Any) -> None:
        # The same bounds as an HTTP reply's: nesting (every walker of a reply recurses once per level) and the
        # size (a huge answer would be copied into the journal and the summary).
        if deeper_than(reply):
            raise AgentCallError(f"malformed: the reply nests deeper than {MAX_JSON_DEPTH} levels")
        try:
            size = len(json.dumps(reply, ensure_ascii=False, default=lambda _: None).encode("utf-8"))
        except (TypeError, ValueError):
            return  # not JSON at all (a circular reference, a non-str key): parse_response says so
        if size > self.max_reply_bytes:
            raise AgentCallError(
                f"oversize: reply over agent.max_reply_bytes={self.max_reply_bytes} bytes "
                f"({size} bytes as JSON)"
            )


def with_sampling(agent: ExternalAgent, repeat: int, seed: int) -> ExternalAgent:
    """A copy of ``agent`` that sends repeat ``repeat``'s index and seed with every call (``--repeats N > 1``): in
    an HTTP request's body beside ``params``, to a function that accepts ``repeat`` / ``seed`` keywords (or
    ``**kwargs``) as those; the run key and the summary record them (``describe``)."""
    sampled = copy.copy(agent)
    sampled.sampling = {"repeat": repeat, "seed": seed}
    if isinstance(sampled, FunctionAgent):
        sampled._sampling_kwargs = {k: v for k, v in sampled.sampling.items() if _accepts(sampled._fn, k)}
    return sampled


def _accepts(fn: Callable[..., Any], keyword: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return keyword in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def function_agent(
    fn: Callable[..., Mapping[str, Any]], cfg: schema.Agent, name: str = "callable"
) -> ExternalAgent:
    """An external agent from a callable, for the Python API (``name`` is recorded as its target), with the
    deadline and reply cap of the composed ``agent=function`` block ``cfg``."""
    block = as_variant(cfg, schema.AgentFunction, "agent")
    if not callable(fn):
        raise UsageError(f"function_agent({name}): {type(fn).__name__} object is not callable")
    _check_signature(fn, f"function_agent({name})", "accept these keyword arguments (or **kwargs)")
    timeout_s = timeout_of(block.timeout_s, "agent.timeout_s")
    return FunctionAgent(fn, name, timeout_s=timeout_s, max_reply_bytes=reply_cap(block.max_reply_bytes))


def resolve_target(
    target: str, kwargs: Mapping[str, Any] | None = None
) -> tuple[Callable[..., Mapping[str, Any]], Any]:
    """``MODULE:ATTR`` imported with the current directory first on sys.path (:mod:`doceval.common.targets`):
    the assistant, callable with the agent's keyword arguments, and the object its code comes from. With
    ``kwargs`` (``+agent.kwargs.NAME=VALUE``), or when ATTR is a class, ATTR is a factory called once with them
    that returns the assistant (or an object with an ``.answer`` method). Every failure is a UsageError naming
    ``agent.target``."""
    importlib.invalidate_caches()  # a module file written moments ago (tests, notebooks)
    obj = load_target(target, "agent.target")
    attr = target.strip().partition(":")[2]
    if not callable(obj):
        raise UsageError(
            f"agent.target={target}: {attr!r} is a {type(obj).__name__}, not callable; "
            "point agent.target at a function"
        )
    where = f"agent.target={target}"
    fn: Callable[..., Mapping[str, Any]] = build_from_factory(
        obj,
        dict(kwargs or {}),
        where=where,
        how="+agent.kwargs.NAME=VALUE",
        method="answer",
        example=f"def answer{_CALL}",
    )
    _check_signature(
        fn, where, f"give {getattr(fn, '__name__', attr)} these keyword parameters (or **kwargs)"
    )
    return fn, obj


def _check_signature(fn: Callable[..., Any], where: str, fix: str) -> None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # some builtins have none; the first call will tell
    try:
        sig.bind(question="", library="", version="", session_id="")
    except TypeError as exc:
        raise UsageError(
            f"{where}: the signature {sig} cannot be called as f{_CALL} ({exc}); {fix}"
        ) from None


# ----------------------------------------------------------------------------------------- factory


@dataclass(frozen=True)
class RegisteredAgent:
    build: Callable[[schema.Agent], ExternalAgent | None]  # None: doceval's own agent (docchat) answers


AGENTS: Registry[RegisteredAgent] = Registry("agent")


def register_agent(
    name: str,
) -> Callable[
    [Callable[[schema.Agent], ExternalAgent | None]], Callable[[schema.Agent], ExternalAgent | None]
]:
    """Decorator: ``build(block) -> ExternalAgent`` serves ``agent.name == name``."""

    def decorate(
        build: Callable[[schema.Agent], ExternalAgent | None],
    ) -> Callable[[schema.Agent], ExternalAgent | None]:
        AGENTS.add(name, RegisteredAgent(build))
        return build

    return decorate


def make_agent(cfg: schema.Agent) -> ExternalAgent | None:
    """The system under test named by the ``agent`` block; None for ``agent=docchat`` (doceval's own)."""
    return AGENTS.require(cfg.name).build(cfg)


@register_agent(OWN_AGENT)
def _build_docchat(cfg: schema.Agent) -> None:
    return None


@register_agent("http")
def _build_http(cfg: schema.Agent) -> ExternalAgent:
    return HttpAgent.from_config(as_variant(cfg, schema.AgentHttp, "agent"))


@register_agent(USER_FUNCTION)
def _build_function(block: schema.Agent) -> ExternalAgent:
    cfg = as_variant(block, schema.AgentFunction, "agent")
    target = cfg.target
    if not isinstance(target, str) or not target.strip():
        raise UsageError(
            "agent=function needs agent.target=MODULE:ATTR (e.g. agent.target=my_agent:answer, for a "
            f"function answer{_CALL} in my_agent.py in the current directory)"
        )
    kwargs = cfg.kwargs  # free-form (config.schema.OPEN_MAPPINGS): read as the mapping the user wrote
    if not isinstance(kwargs, Mapping) or not all(isinstance(key, str) for key in kwargs):
        raise UsageError(
            f"agent.kwargs={kwargs!r}: expected a mapping of keyword arguments for the factory "
            "(set them as +agent.kwargs.NAME=VALUE)"
        )
    # The settings are checked before the user's code runs (a factory may be slow, or fail for its own reasons).
    timeout_s, cap = timeout_of(cfg.timeout_s, "agent.timeout_s"), reply_cap(cfg.max_reply_bytes)
    fn, origin = resolve_target(target.strip(), kwargs)
    return FunctionAgent(
        fn,
        target.strip(),
        timeout_s=timeout_s,  # None: no deadline
        max_reply_bytes=cap,
        kwargs=kwargs,
        origin=origin,
    )


# --------------------------------------------------------------------------------- reading a reply


class InvalidResponse(Exception):
    """A reply of the wrong shape; the message is ``"invalid response: ..."``."""

    def __init__(self, message: str) -> None:
        super().__init__(f"invalid response: {message}")


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _source(item: Any, i: int) -> Source:
    if isinstance(item, str):
        doc_id, score = item, None
    elif isinstance(item, Mapping) and "id" in item:
        doc_id, score = item["id"], item.get("score")
    else:
        raise InvalidResponse(
            f'sources[{i}] must be an id string or {{"id": str, "score": number}}, got {_type_name(item)}'
        )
    # One rule with a retriever function's results (an empty id, a NaN or infinite score).
    problem = source_problem(doc_id, score)
    if problem is not None:
        raise InvalidResponse(f"sources[{i}] {problem}")
    return Source(doc_id, None if score is None else float(score))


def parse_response(probe_id: str, session_id: str, raw: Any) -> Reply:
    """A system's reply as a :class:`~doceval.seam.Reply` (a refusal's cause "system", its ``reason`` the
    refusal reason); :class:`InvalidResponse` on another shape."""
    if not isinstance(raw, Mapping):
        raise InvalidResponse(f"expected a JSON object/mapping, got {_type_name(raw)}")
    for key in ("answer", "sources", "refused"):
        if key not in raw:
            raise InvalidResponse(f"missing {key!r} (a reply needs answer, sources and refused)")
    answer, sources, refused = raw["answer"], raw["sources"], raw["refused"]
    if answer is not None and not isinstance(answer, str):
        raise InvalidResponse(f"'answer' must be a string or null, got {_type_name(answer)}")
    if not isinstance(sources, list):
        raise InvalidResponse(f"'sources' must be a list, got {_type_name(sources)}")
    if not isinstance(refused, bool):
        raise InvalidResponse(f"'refused' must be true or false, got {_type_name(refused)}")
    reason = raw.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise InvalidResponse(f"'reason' must be a string or null, got {_type_name(reason)}")
    usage = raw.get("usage")
    extra = {str(k): v for k, v in raw.items() if k not in _RESERVED}
    if "usage" in raw and not isinstance(usage, Mapping):
        extra["usage"] = usage  # not a usage block we understand: kept as returned
    response = Reply(
        id=probe_id,
        answer=answer,
        refused=refused,
        refusal_cause="system" if refused else None,
        refusal_reason=reason,
        sources=[_source(item, i) for i, item in enumerate(sources)],
        usage=dict(usage) if isinstance(usage, Mapping) else {},
        extra=extra,
        session_id=session_id,
    )
    try:  # the journal and the summary are strict JSON: a value that is not would fail far from its cause
        json_text({"usage": response.usage, "extra": response.extra})
    except (TypeError, ValueError) as exc:
        raise InvalidResponse(f"a value is not JSON-serialisable ({exc})") from None
    return response


def system_error_text(exc: BaseException) -> str:
    """An entry's ``system_error``, one shape for the user's assistant and retriever: ``"<kind>: <message>"``."""
    if isinstance(exc, AgentCallError | InvalidResponse):
        return str(exc)
    if isinstance(exc, InvalidRetrieval):
        return f"invalid response: {exc.problem}"
    if isinstance(exc, CallTimedOut):
        return f"timeout: {exc}"
    return f"exception: {type(exc).__name__}: {str(exc)[:300]}"
