"""External agents as systems under test: the user's own assistant behind a Python callable (``agent=function``)
or an HTTP endpoint (``agent=http``, :mod:`doceval.harness.agent_http`), and the loop that replays probes
through one (:func:`run_external`).

A system is called with the probe only (question, library, version) plus a session id; labels never leave the
harness. Its reply must be a JSON object/mapping with ``answer`` (str or null), ``sources`` (a list of id
strings or ``{"id": str, "score": number}`` objects, best first) and ``refused`` (bool); optional ``reason``
(the refusal reason) and ``usage`` (a mapping); every other key is kept verbatim in ``extra``. A reply of
another shape, an exception (a SystemExit included), a call past its deadline or one that failed after its
retries is an *error* for that entry: recorded with its message, never scored (in particular never as a
refusal), and tried again on a rerun. A KeyboardInterrupt is never caught: it stops the run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tqdm import tqdm

from doceval.common.concurrency import (
    DEFAULT_TIMEOUT_S,
    CallTimedOut,
    DeadlineCaller,
    iter_concurrent,
    timeout_of,
)
from doceval.common.io import json_text, non_finite_path
from doceval.common.journal import Journal, load_records
from doceval.common.targets import load_target, provenance_of
from doceval.errors import UsageError
from doceval.harness.agent_http import DEFAULT_MAX_REPLY_BYTES, AgentCallError, HttpAgent, reply_cap
from doceval.seam import InvalidRetrieval, Probe, Reply, Source, require_unique_ids, source_problem

log = logging.getLogger(__name__)

__all__ = [
    "AgentCallError",
    "ExternalAgent",
    "ExternalOutcome",
    "FunctionAgent",
    "HttpAgent",
    "function_agent",
    "load_journal",
    "make_agent",
    "parse_response",
    "run_external",
]

AGENT_NAMES = ("docchat", "function", "http")
_CALL = "(question=..., library=..., version=..., session_id=...)"
_RESERVED = ("answer", "sources", "refused", "reason", "usage")


class ExternalAgent(Protocol):
    name: str  # "function" or "http"

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

    name = "function"

    def __init__(
        self,
        fn: Callable[..., Mapping[str, Any]],
        target: str,
        *,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> None:
        self._fn = fn
        self.target = target
        self.timeout_s = timeout_of(timeout_s, "agent.timeout_s")
        self.max_reply_bytes = reply_cap(max_reply_bytes)
        self._caller = DeadlineCaller("doceval-agent")
        self._provenance = provenance_of(fn)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "target": self.target, **self._provenance}

    def check(self) -> None:
        return None  # resolving the target and its signature already ran in make_agent/function_agent

    @property
    def abandoned(self) -> int:
        """Calls abandoned past their deadline so far (their threads may still be running)."""
        return self._caller.abandoned

    def call(self, probe: Probe, session_id: str) -> Mapping[str, Any]:
        reply = self._caller.call(
            lambda: self._fn(
                question=probe.question, library=probe.library, version=probe.version, session_id=session_id
            ),
            self.timeout_s,
        )
        self._check_size(reply)
        return reply

    def _check_size(self, reply: Any) -> None:
        # The same cap as an HTTP reply's body: a huge answer would be copied into the journal and the summary.
        try:
            size = len(json.dumps(reply, ensure_ascii=False, default=lambda _: None).encode("utf-8"))
        except (TypeError, ValueError):
            return  # not JSON at all (a circular reference, a non-str key): parse_response says so
        if size > self.max_reply_bytes:
            raise AgentCallError(
                f"oversize: reply over agent.max_reply_bytes={self.max_reply_bytes} bytes "
                f"({size} bytes as JSON)"
            )


def function_agent(fn: Callable[..., Mapping[str, Any]], name: str = "callable") -> ExternalAgent:
    """An external agent from a callable, for the Python API (``name`` is recorded as its target)."""
    if not callable(fn):
        raise UsageError(f"function_agent({name}): {type(fn).__name__} object is not callable")
    _check_signature(fn, f"function_agent({name})", "accept these keyword arguments (or **kwargs)")
    return FunctionAgent(fn, name)


def resolve_target(target: str) -> Callable[..., Mapping[str, Any]]:
    """``MODULE:ATTR`` imported with the current directory first on sys.path (:mod:`doceval.common.targets`),
    callable with the agent's keyword arguments; every failure a UsageError naming ``agent.target``."""
    importlib.invalidate_caches()  # a module file written moments ago (tests, notebooks)
    obj = load_target(target, "agent.target")
    attr = target.strip().partition(":")[2]
    if not callable(obj):
        raise UsageError(
            f"agent.target={target}: {attr!r} is a {type(obj).__name__}, not callable; "
            "point agent.target at a function"
        )
    _check_signature(obj, f"agent.target={target}", f"give {attr} these keyword parameters (or **kwargs)")
    fn: Callable[..., Mapping[str, Any]] = obj
    return fn


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


def make_agent(cfg: Mapping[str, Any]) -> ExternalAgent | None:
    """The system under test named by the ``agent`` block; None for ``agent=docchat`` (doceval's own)."""
    name = cfg.get("name", "docchat")
    if name == "docchat":
        return None
    if name == "function":
        target = cfg.get("target")
        if not isinstance(target, str) or not target.strip():
            raise UsageError(
                "agent=function needs agent.target=MODULE:ATTR (e.g. agent.target=my_agent:answer, for a "
                f"function answer{_CALL} in my_agent.py in the current directory)"
            )
        return FunctionAgent(
            resolve_target(target.strip()),
            target.strip(),
            timeout_s=timeout_of(cfg.get("timeout_s", DEFAULT_TIMEOUT_S), "agent.timeout_s"),
            max_reply_bytes=reply_cap(cfg.get("max_reply_bytes", DEFAULT_MAX_REPLY_BYTES)),
        )
    if name == "http":
        return HttpAgent.from_config(cfg)
    raise UsageError(f"agent.name={name}: expected one of {', '.join(AGENT_NAMES)}")


# --------------------------------------------------------------------------------- reading a reply


class InvalidResponse(Exception):
    """A reply of the wrong shape; the message is ``"invalid response: ..."``."""

    def __init__(self, message: str) -> None:
        super().__init__(f"invalid response: {message}")


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _score_text(score: int | float) -> str:
    return str(score) if isinstance(score, float) else "an integer too large for a float"


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


def abandoned_stop(system: object, max_abandoned: int | None) -> str | None:
    """Why the run must stop because of calls abandoned past their deadline (threads that may run on), or None."""
    abandoned = int(getattr(system, "abandoned", 0))
    if max_abandoned is None or abandoned <= max_abandoned:
        return None
    return f"stopped after {abandoned} calls abandoned past their deadline (more than run.max_abandoned={max_abandoned})"


def errors_stop(n_errors: int, max_errors: int | None) -> str | None:
    """Why the run must stop after ``n_errors`` system errors (``--max-errors``), or None."""
    if max_errors is None or n_errors <= max_errors:
        return None
    return f"stopped after {n_errors} system errors (more than --max-errors)"


# -------------------------------------------------------------------------------------------- the run


@dataclass
class ExternalOutcome:
    responses: dict[str, Reply]  # every probe answered OR errored, in probe order
    n_errors: int
    stopped: bool  # max_errors or max_abandoned exceeded: entries not attempted are absent from responses
    resumed: int
    stop_reason: str | None = None  # why it stopped, for the summary's "incomplete"


def load_journal(path: Path) -> dict[str, Reply]:
    """Replies already journaled (last one wins per id), errored ones included."""
    records = load_records(path, Reply.from_json, "an external agent journal record")
    return {r.id: _strict(r) for r in records}


def _strict(response: Reply) -> Reply:
    """A journaled reply an older doceval accepted with a NaN or +-Infinity in it (a score, usage) counts as
    an invalid response now, so a resumed run asks again instead of writing a summary that is not JSON."""
    where = None if response.error is not None else non_finite_path(response.to_json())
    if where is None:
        return response
    return dataclasses.replace(
        response,
        error=f"invalid response: {where.split(' = ')[0].removeprefix('$.')} must be a finite number",
    )


class _ExternalRun:
    """One run's calls of the user's system: each reply (or its error) journaled as it comes back, so calls
    in flight at a stop still count, and kept in ``results``."""

    def __init__(
        self,
        agent: ExternalAgent,
        journal: Journal,
        results: dict[str, Reply],
        session_of: Callable[[Probe], str],
    ) -> None:
        self.agent = agent
        self.journal = journal
        self.results = results
        self.session_of = session_of
        self._lock = threading.Lock()

    def process(self, probe: Probe) -> Reply:
        session_id = self.session_of(probe)
        try:
            response = parse_response(probe.id, session_id, self.agent.call(probe, session_id))
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - any failure of the system (a SystemExit too) is that
            # entry's error: the user's code never chooses doceval's exit code
            response = Reply(probe.id, None, session_id=session_id, error=system_error_text(exc))
        self.journal.append(
            response.to_json()
        )  # here, not in the loop: calls in flight at a stop still count
        with self._lock:
            self.results[probe.id] = response
        return response


def _session_namer(done: Mapping[str, Reply], warm_memory: bool) -> Callable[[Probe], str]:
    """A fresh session id per probe (``doceval-<run>-<probe id>``), or with warm memory one for the whole run:
    a resumed warm run keeps the journaled one, where the system's memory of the resumed entries lives."""
    run_tag = f"doceval-{uuid.uuid4().hex[:12]}"
    if not warm_memory:
        return lambda probe: f"{run_tag}-{probe.id}"
    earlier = {r.session_id for r in done.values()}
    session = (earlier.pop() if len(earlier) == 1 else None) or run_tag
    return lambda probe: session


def _drain_external(
    outcomes: Iterator[tuple[int, Reply]],
    agent: ExternalAgent,
    bar: Any,
    limits: tuple[int | None, int | None],
) -> str | None:
    """Consume the replies as they finish; why the run stopped early (``limits``: max errors, max abandoned
    calls) or None."""
    max_errors, max_abandoned = limits
    n_errors = 0
    for _, response in outcomes:
        bar.update(1)
        if response.error is None:
            continue
        n_errors += 1
        bar.set_postfix(errors=n_errors, refresh=False)
        log.warning("%s: %s", response.id, response.error)
        reason = errors_stop(n_errors, max_errors) or abandoned_stop(agent, max_abandoned)
        if reason is not None:
            log.error("stopping: %s", reason)
            return reason
    return None


def run_external(
    probes: Sequence[Probe],
    agent: ExternalAgent,
    *,
    warm_memory: bool = False,
    journal_path: Path | None = None,
    max_concurrency: int = 8,
    max_errors: int | None = None,
    max_abandoned: int | None = None,
    progress: bool = True,
) -> ExternalOutcome:
    """Send every probe to ``agent`` once; see the module docstring for what a reply must hold.

    - Sessions: a fresh session id per probe (``doceval-<run>-<probe id>``), so the system's memory cannot
      carry one answer into the next; ``warm_memory`` uses one session id for the whole run and calls strictly
      in probe order, one at a time (a resumed warm run keeps the journaled session id).
    - ``journal_path``: every finished response (ok or error) is appended before it counts; a rerun skips
      entries journaled ok and calls the errored ones again.
    - ``max_errors``: once more entries than this have errored, no new call starts; calls in flight finish
      (and are journaled and returned) and the outcome says ``stopped``. ``max_abandoned`` likewise, once more
      calls than this were abandoned past their deadline (``agent.timeout_s`` of a function agent).
    """
    require_unique_ids(probes)
    wanted = {p.id for p in probes}
    previous = load_journal(journal_path) if journal_path is not None else {}
    done = {i: r for i, r in previous.items() if i in wanted and r.error is None}
    run = _ExternalRun(agent, Journal(journal_path), dict(done), _session_namer(done, warm_memory))
    todo = [p for p in probes if p.id not in done]
    concurrency = 1 if warm_memory else max(1, max_concurrency)
    bar = tqdm(total=len(probes), initial=len(done), desc=f"agent ({agent.name})", unit="entry",
               disable=not progress)  # fmt: skip
    try:
        with contextlib.closing(iter_concurrent(run.process, todo, concurrency)) as outcomes:
            reason = _drain_external(outcomes, agent, bar, (max_errors, max_abandoned))
    finally:
        bar.close()
        run.journal.close()

    ordered = {p.id: run.results[p.id] for p in probes if p.id in run.results}
    return ExternalOutcome(
        responses=ordered,
        n_errors=sum(1 for r in ordered.values() if r.error is not None),
        stopped=reason is not None,
        resumed=len(done),
        stop_reason=reason,
    )
