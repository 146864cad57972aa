"""Per-entry MLflow traces: each scored entry of a summary as one trace linked to its run, so the MLflow UI
lists, filters and compares a run question by question (docs/design.md section 6.7).

A trace is built from the scored summary, after scoring (nothing here runs the system): a root span for the
probe, the router decision, a RETRIEVER span with the ranked documents after floors and k, the memory
surfaced, the answerer and judge calls with their token usage (or one span for an external system's call).
The golden labels become expectations, the per-entry outcomes feedback. Writing them to the store, batched,
is :mod:`doceval.tracking.trace_store`.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from doceval.scoring.judge import judge_input

if TYPE_CHECKING:
    from mlflow.entities import Assessment, TraceInfo

ENTRY_TAG = "doceval.entry_id"  # the golden entry id: the key two runs are compared on
RUN_TAG = "doceval.run_id"
CONVERSATION_TAG = "doceval.conversation"  # on a turn's trace: its conversation id
TURN_TAG = "doceval.turn"  # on a turn's trace: its position in the conversation, from 1
TRACES_TAG = "doceval.traces"  # on the run: how many entry traces it has (compare checks it)
# Expectations (what the golden set says) and feedback (what the entry scored): names shown in the UI.
EXPECTATIONS = (
    "relevant_ids",
    "reference_answer",
    "expected_apis",
    "expected_any",
    "forbidden_apis",
    "out_of_scope",
)
# Feedback: every per-entry score of the summary under its metric name (hit_rate of one entry is its hit,
# mrr its reciprocal rank), plus "refused", "stage" and the judge's "answer_correct" with its reason.
STAGE, REFUSED, VERDICT = "stage", "refused", "answer_correct"
_MAX_ATTR = 20000  # characters of one span input/output kept (a huge answer must not bloat the store)


def _trace_id(run_id: str, entry_id: str) -> tuple[str, bytes]:
    """A deterministic trace id per (run, entry): MLflow's ``tr-<32 hex>`` and the 16 OTel bytes behind it."""
    raw = hashlib.sha256(f"{run_id}\0{entry_id}".encode()).digest()[:16]
    return "tr-" + raw.hex(), raw


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _clip(value: Any) -> Any:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return value if len(text) <= _MAX_ATTR else text[: _MAX_ATTR - 3] + "..."


class _SpanWriter:
    """Span dicts of one trace in MLflow's v3 wire format (``Span.from_dict`` reads them back)."""

    def __init__(self, trace_id: str, raw_id: bytes, start_ns: int) -> None:
        self.trace_id, self.raw_id, self.start_ns = trace_id, raw_id, start_ns
        self.dicts: list[dict[str, Any]] = []

    def add(
        self,
        name: str,
        span_type: str,
        inputs: Any,
        outputs: Any,
        *,
        parent: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        error: str | None = None,
        at: tuple[int, int] | None = None,
    ) -> str:
        span_id = _b64(hashlib.sha256(f"{self.trace_id}\0{len(self.dicts)}".encode()).digest()[:8])
        attrs = {
            "mlflow.traceRequestId": json.dumps(self.trace_id),
            "mlflow.spanType": json.dumps(span_type),
            "mlflow.spanInputs": json.dumps(_clip(inputs), default=str, ensure_ascii=False),
            "mlflow.spanOutputs": json.dumps(_clip(outputs), default=str, ensure_ascii=False),
        }
        for key, value in (attributes or {}).items():
            attrs[key] = json.dumps(value, default=str, ensure_ascii=False)
        # ``at``: the span's measured (start, end) in ns. Without it (a step doceval does not time, or a reply
        # journaled before timing was recorded) spans are laid out one microsecond apart: a zero-length span
        # would render as nothing in the UI's timeline.
        n = len(self.dicts)
        start = self.start_ns + n * 1000
        end = self.start_ns + (n + 1) * 1000 if parent else self.start_ns + 100_000
        if at is not None:
            start, end = at[0], max(at[1], at[0] + 1000)
        self.dicts.append(
            {
                "trace_id": _b64(self.raw_id),
                "span_id": span_id,
                "parent_span_id": parent,
                "name": name,
                "start_time_unix_nano": start,
                "end_time_unix_nano": end,
                "events": [],
                "status": {
                    "code": "STATUS_CODE_ERROR" if error else "STATUS_CODE_OK",
                    "message": error or "",
                },
                "attributes": attrs,
                "links": [],
            }
        )
        return span_id


def _token_usage(usage: Mapping[str, Any] | None) -> dict[str, int] | None:
    """MLflow's chat usage attribute from one call's usage block (prompt/completion tokens), if any."""
    if not usage:
        return None
    inp = usage.get("prompt_tokens", usage.get("input_tokens"))
    out = usage.get("completion_tokens", usage.get("output_tokens"))
    if not isinstance(inp, int | float) or not isinstance(out, int | float):
        return None
    return {"input_tokens": int(inp), "output_tokens": int(out), "total_tokens": int(inp) + int(out)}


def _documents(retrieved: Sequence[Sequence[Any]], texts: Mapping[str, str] | None) -> list[dict[str, Any]]:
    """The RETRIEVER span's output: MLflow Documents (the UI renders doc_uri, score and content)."""
    docs = []
    for rank, (doc_id, score) in enumerate(retrieved, start=1):
        text = (texts or {}).get(str(doc_id)) or str(doc_id)
        docs.append(
            {
                "page_content": text[:2000],
                "id": str(doc_id),
                "metadata": {"doc_uri": str(doc_id), "chunk_id": str(doc_id), "score": score, "rank": rank},
            }
        )
    return docs


def _ns(seconds: float) -> int:
    return int(round(seconds * 1e9))


def measured_windows(timing: Mapping[str, float] | None) -> dict[str, tuple[int, int]]:
    """The (start, end) in ns of what the harness timed for one entry (the summary row's ``timing``): the call
    to the system ("call"), doceval's agent's search and answerer, a user's retriever function ("retrieve"),
    and "root" spanning them all. Empty when nothing was timed."""
    t = timing or {}
    out: dict[str, tuple[int, int]] = {}
    if "start" in t and "duration_s" in t:
        start, end = t["start"], t["start"] + t["duration_s"]
        out["call"] = (_ns(start), _ns(end))
        if "search_s" in t:
            out["search"] = (_ns(start), _ns(start + t["search_s"]))
        if "answerer_s" in t:
            out["answerer"] = (_ns(end - t["answerer_s"]), _ns(end))
    if "retrieve_start" in t and "retrieve_s" in t:
        out["retrieve"] = (_ns(t["retrieve_start"]), _ns(t["retrieve_start"] + t["retrieve_s"]))
    if "judge_start" in t and "judge_s" in t:  # the judge, asked after the system answered
        out["judge"] = (_ns(t["judge_start"]), _ns(t["judge_start"] + t["judge_s"]))
    if out:
        out["root"] = (min(s for s, _ in out.values()), max(e for _, e in out.values()))
    return out


def _assistant_spans(
    w: _SpanWriter,
    entry: Mapping[str, Any],
    probe: dict[str, Any],
    root: str,
    k: int | None,
    texts: Mapping[str, str] | None,
    windows: dict[str, tuple[int, int]],
) -> None:
    """An external assistant's spans: its one call, and the sources it returned."""
    usage = entry.get("usage") or {}
    retrieved = entry.get("retrieved") or []
    w.add(
        "assistant call",
        "AGENT",
        probe,
        {
            "answer": entry.get("answer"),
            "sources": entry.get("sources") or [],
            "refused": entry.get("refused"),
            "reason": entry.get("refusal_reason"),
            "extra": entry.get("extra") or {},
            "session_id": entry.get("session_id"),
        },
        parent=root,
        error=entry.get("system_error"),
        attributes={"doceval.usage": usage.get("system") or {}},
        at=windows.get("call"),
    )
    w.add(
        "sources",
        "RETRIEVER",
        {"query": entry.get("question"), "k": k},
        _documents(retrieved, texts),
        parent=root,
    )


def _agent_spans(
    w: _SpanWriter,
    entry: Mapping[str, Any],
    probe: dict[str, Any],
    root: str,
    k: int | None,
    texts: Mapping[str, str] | None,
    windows: dict[str, tuple[int, int]],
) -> None:
    """doceval's own agent's spans: the router decision, the search, the memory surfaced and the answerer."""
    usage = entry.get("usage") or {}
    retrieved = entry.get("retrieved") or []
    pin = f"{entry.get('library')}@{entry.get('version')}"
    router_refusal = entry.get("router_refusal")
    w.add(
        "router",
        "TOOL",
        probe,
        {"pin": None if router_refusal else pin, "refused": router_refusal},
        parent=root,
    )
    w.add(
        "search",
        "RETRIEVER",
        {"query": entry.get("question"), "pin": pin, "k": k},
        _documents(retrieved, texts),
        parent=root,
        at=windows.get("retrieve") or windows.get("search"),
    )
    w.add(
        "memory", "MEMORY", {"question": entry.get("question")}, entry.get("memory_used") or [], parent=root
    )
    answerer = usage.get("answerer") or {}
    tokens = _token_usage(answerer)
    w.add(
        "answerer",
        "LLM",
        {"question": entry.get("question"), "passages": [d for d, _ in retrieved]},
        {"answer": entry.get("answer"), "refused": entry.get("refused")},
        parent=root,
        attributes={"mlflow.chat.tokenUsage": tokens} if tokens else None,
        at=windows.get("answerer"),
    )


def build_spans(
    entry: Mapping[str, Any],
    trace_id: str,
    raw_id: bytes,
    start_ns: int,
    k: int | None,
    external: bool,
    texts: Mapping[str, str] | None = None,
    recorded: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The spans of one entry's trace (see the module docstring), as v3 span dicts; ``recorded`` (the summary's
    ``config``) rebuilds what the judge was sent."""
    windows = measured_windows(entry.get("timing"))
    w = _SpanWriter(trace_id, raw_id, windows["root"][0] if windows else start_ns)
    probe = {
        "question": entry.get("question"),
        "library": entry.get("library"),
        "version": entry.get("version"),
    }
    outputs = {
        "answer": entry.get("answer"),
        "refused": entry.get("refused"),
        "refusal_reason": entry.get("refusal_reason"),
        "sources": [d for d, _ in entry.get("retrieved") or []],
    }
    root = w.add(
        "probe",
        "AGENT",
        probe,
        outputs,
        error=entry.get("system_error"),
        attributes={
            "doceval.entry_id": entry.get("id"),
            "doceval.split": entry.get("split"),
            "doceval.kind": entry.get("kind"),
        },
        at=windows.get("root"),
    )
    usage = entry.get("usage") or {}
    if external:
        _assistant_spans(w, entry, probe, root, k, texts, windows)
    else:
        _agent_spans(w, entry, probe, root, k, texts, windows)
    if entry.get("verdict") is not None or entry.get("judge_error"):
        tokens = _token_usage(usage.get("judge") or {})
        w.add(
            "judge",
            "EVALUATOR",
            judge_input(recorded or {}, entry),
            {"verdict": entry.get("verdict"), "reason": entry.get("verdict_reason")},
            parent=root,
            error=entry.get("judge_error"),
            attributes={"mlflow.chat.tokenUsage": tokens} if tokens else None,
            at=windows.get("judge"),
        )
    return w.dicts


def build_assessments(
    entry: Mapping[str, Any], golden_source: str, judge_hash: str | None
) -> list[Assessment]:
    """Expectations from the golden labels, feedback from the entry's scores and verdict ("could not score"
    is an error on the feedback, not a 0)."""
    # lazy: start-up (mlflow, seconds; only a run that is logged loads it)
    from mlflow.entities import AssessmentError, AssessmentSource, Expectation, Feedback

    human = AssessmentSource("HUMAN", golden_source)
    code = AssessmentSource("CODE", "doceval")
    out: list[Assessment] = []
    for name in EXPECTATIONS:
        value = entry.get(name)
        if value is None or (name == "expected_any" and not value):
            continue
        out.append(Expectation(name=name, value=value, source=human))
    for name, value in (entry.get("scores") or {}).items():
        if value is not None:  # None: the metric does not apply to this entry
            out.append(Feedback(name=name, value=float(value), source=code))
    if entry.get("system_error"):
        out.append(
            Feedback(
                name=REFUSED, error=AssessmentError("SYSTEM_ERROR", str(entry["system_error"])), source=code
            )
        )
    else:
        out.append(Feedback(name=REFUSED, value=bool(entry.get("refused")), source=code))
    out.append(Feedback(name=STAGE, value=str(entry.get("stage")), source=code))
    meta = {"judge_config_hash": judge_hash} if judge_hash else None
    judge = AssessmentSource("LLM_JUDGE", judge_hash or "judge")
    if entry.get("judge_error"):
        out.append(
            Feedback(
                name=VERDICT,
                error=AssessmentError("JUDGE_ERROR", str(entry["judge_error"])),
                source=judge,
                metadata=meta,
            )
        )
    elif entry.get("verdict") is not None:
        out.append(
            Feedback(
                name=VERDICT,
                value=bool(entry["verdict"]),
                rationale=entry.get("verdict_reason"),
                source=judge,
                metadata=meta,
            )
        )
    return out


def _preview(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)[:1000]


def session_of(run_id: str, conversation: str) -> str:
    """The MLflow session of one conversation in one run: the UI's Sessions view groups its turns. Not the
    session id the system received (under ``--warm-memory`` that is one for the whole run)."""
    return f"{conversation} @ {run_id}"


def _session_metadata(entry: Mapping[str, Any], run_id: str, key: str) -> dict[str, str]:
    """``{key: session}`` for a turn of a conversation; nothing for a single question (its own session)."""
    conversation = entry.get("conversation")
    return {} if conversation is None else {key: session_of(run_id, str(conversation))}


def _turn_tags(entry: Mapping[str, Any]) -> dict[str, str]:
    """A turn's conversation, position and needs_memory as trace tags (searchable, shown in the UI)."""
    if entry.get("conversation") is None:
        return {}
    return {
        CONVERSATION_TAG: str(entry["conversation"]),
        TURN_TAG: str(entry.get("turn")),
        "doceval.needs_memory": str(bool(entry.get("needs_memory"))).lower(),
    }


def build_trace(
    entry: Mapping[str, Any],
    *,
    run_id: str,
    experiment_id: str,
    recorded: Mapping[str, Any],
    start_ms: int,
    texts: Mapping[str, str] | None = None,
) -> tuple[TraceInfo, list[dict[str, Any]]]:
    """One entry's TraceInfo (tags, metadata, assessments) and its span dicts (``recorded``: the summary's
    ``config`` block)."""
    # lazy: start-up (mlflow, seconds; only a run that is logged loads it)
    from mlflow.entities import TraceInfo, TraceLocation, TraceState

    # lazy: start-up (mlflow, seconds; only a run that is logged loads it)
    from mlflow.tracing.constant import TraceMetadataKey

    trace_id, raw = _trace_id(run_id, str(entry["id"]))
    external = "session_id" in entry  # rows of an external system carry its session
    judge_id = recorded.get("judge_id") or {}
    spans = build_spans(
        entry, trace_id, raw, start_ms * 1_000_000, recorded.get("k"), external, texts, recorded
    )
    # The root span's window: measured when the harness timed the call, else the layout's own 0.1 ms.
    root_start, root_end = spans[0]["start_time_unix_nano"], spans[0]["end_time_unix_nano"]
    golden = recorded.get("golden") or {}
    source = f"{golden.get('path')}@{str(golden.get('md5') or '')[:8]}"
    assessments = build_assessments(entry, source, judge_id.get("hash"))
    probe = json.loads(spans[0]["attributes"]["mlflow.spanInputs"])
    answer = json.loads(spans[0]["attributes"]["mlflow.spanOutputs"])
    tags = {
        ENTRY_TAG: str(entry["id"]),
        RUN_TAG: run_id,
        "doceval.split": str(entry.get("split")),
        "doceval.kind": str(entry.get("kind")),
        "doceval.pin": f"{entry.get('library')}@{entry.get('version')}",
        "doceval.out_of_scope": str(bool(entry.get("out_of_scope"))).lower(),
        "doceval.stage": str(entry.get("stage")),
        "doceval.golden_md5": str(golden.get("md5")),
        "mlflow.traceName": "probe",
    }
    info = TraceInfo(
        trace_id=trace_id,
        trace_location=TraceLocation.from_experiment_id(experiment_id),
        request_time=root_start // 1_000_000,
        execution_duration=(root_end - root_start) // 1_000_000,
        state=TraceState.ERROR if entry.get("system_error") else TraceState.OK,
        request_preview=_preview(probe),
        response_preview=_preview(answer),
        client_request_id=str(entry["id"]),
        trace_metadata={
            "mlflow.sourceRun": run_id,
            "mlflow.trace_schema.version": "3",
            "mlflow.traceInputs": _preview(probe),
            "mlflow.traceOutputs": _preview(answer),
            **_session_metadata(entry, run_id, TraceMetadataKey.TRACE_SESSION),
        },
        tags={**tags, **_turn_tags(entry)},
        assessments=assessments,
    )
    return info, spans


def _after_previous_turn(
    info: TraceInfo, spans: list[dict[str, Any]], entry: Mapping[str, Any], turn_times: dict[str, int]
) -> None:
    """A turn starts at least 1 ms after its conversation's previous turn: the session view orders turns by
    start time (ms, taken from the root span), and a turn answered within its predecessor's millisecond would
    otherwise share it. The whole trace moves, so its spans keep their measured durations."""
    conversation = entry.get("conversation")
    if conversation is None:
        return
    before = turn_times.get(str(conversation))
    shift_ms = 0 if before is None else max(0, before + 1 - info.request_time)
    if shift_ms:
        info.request_time += shift_ms
        for span in spans:
            span["start_time_unix_nano"] += shift_ms * 1_000_000
            span["end_time_unix_nano"] += shift_ms * 1_000_000
    turn_times[str(conversation)] = info.request_time
