"""Per-entry MLflow traces: each scored entry of a summary as one trace linked to its run, so the MLflow UI
lists, filters and compares a run question by question (docs/design.md section 6.7).

A trace is built from the scored summary, after scoring (nothing here runs the system): a root span for the
probe, the router decision, a RETRIEVER span with the ranked documents after floors and k, the memory
surfaced, the answerer and judge calls with their token usage (or one span for an external system's call).
The golden labels become expectations, the per-entry outcomes feedback. Logging is batched: one
``start_trace`` per entry carrying its tags, metadata and assessments, and the spans of many entries in one
``log_spans`` call (the public one-assessment-per-call API costs ~10 ms per assessment on sqlite).
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from doceval.scoring.judge import judge_input
from doceval.summary import Summary
from doceval.tracking.secrets import leaks, scrub

if TYPE_CHECKING:
    from mlflow.entities import Assessment, TraceInfo
    from mlflow.store.tracking.abstract_store import AbstractStore

ENTRY_TAG = "doceval.entry_id"  # the golden entry id: the key two runs are compared on
RUN_TAG = "doceval.run_id"
CONVERSATION_TAG = "doceval.conversation"  # on a turn's trace: its conversation id
TURN_TAG = "doceval.turn"  # on a turn's trace: its position in the conversation, from 1
TRACES_TAG = "doceval.traces"  # on the run: how many entry traces it has (compare checks it)
SPAN_BATCH = 500  # entries whose spans go in one log_spans call
# Expectations (what the golden set says) and feedback (what the entry scored): names shown in the UI.
EXPECTATIONS = ("relevant_ids", "reference_answer", "expected_apis", "expected_any", "forbidden_apis",
                "out_of_scope")  # fmt: skip
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

    def add(self, name: str, span_type: str, inputs: Any, outputs: Any, *, parent: str | None = None,
            attributes: Mapping[str, Any] | None = None, error: str | None = None,
            at: tuple[int, int] | None = None) -> str:  # fmt: skip
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
        docs.append({"page_content": text[:2000], "id": str(doc_id),
                     "metadata": {"doc_uri": str(doc_id), "chunk_id": str(doc_id), "score": score,
                                  "rank": rank}})  # fmt: skip
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


def build_spans(entry: Mapping[str, Any], trace_id: str, raw_id: bytes, start_ns: int,
                k: int | None, external: bool, texts: Mapping[str, str] | None = None,
                recorded: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:  # fmt: skip
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
    root = w.add("probe", "AGENT", probe, outputs, error=entry.get("system_error"),
                 attributes={"doceval.entry_id": entry.get("id"), "doceval.split": entry.get("split"),
                             "doceval.kind": entry.get("kind")}, at=windows.get("root"))  # fmt: skip
    usage = entry.get("usage") or {}
    retrieved = entry.get("retrieved") or []
    pin = f"{entry.get('library')}@{entry.get('version')}"
    if external:
        w.add("assistant call", "AGENT", probe,
              {"answer": entry.get("answer"), "sources": entry.get("sources") or [],
               "refused": entry.get("refused"), "reason": entry.get("refusal_reason"),
               "extra": entry.get("extra") or {}, "session_id": entry.get("session_id")},
              parent=root, error=entry.get("system_error"),
              attributes={"doceval.usage": usage.get("system") or {}}, at=windows.get("call"))  # fmt: skip
        w.add("sources", "RETRIEVER", {"query": entry.get("question"), "k": k},
              _documents(retrieved, texts), parent=root)  # fmt: skip
    else:
        router_refusal = entry.get("router_refusal")
        w.add("router", "TOOL", probe, {"pin": None if router_refusal else pin, "refused": router_refusal},
              parent=root)  # fmt: skip
        w.add("search", "RETRIEVER", {"query": entry.get("question"), "pin": pin, "k": k},
              _documents(retrieved, texts), parent=root,
              at=windows.get("retrieve") or windows.get("search"))  # fmt: skip
        w.add("memory", "MEMORY", {"question": entry.get("question")}, entry.get("memory_used") or [],
              parent=root)  # fmt: skip
        answerer = usage.get("answerer") or {}
        tokens = _token_usage(answerer)
        w.add("answerer", "LLM", {"question": entry.get("question"), "passages": [d for d, _ in retrieved]},
              {"answer": entry.get("answer"), "refused": entry.get("refused")}, parent=root,
              attributes={"mlflow.chat.tokenUsage": tokens} if tokens else None,
              at=windows.get("answerer"))  # fmt: skip
    if entry.get("verdict") is not None or entry.get("judge_error"):
        tokens = _token_usage(usage.get("judge") or {})
        w.add("judge", "EVALUATOR", judge_input(recorded or {}, entry),
              {"verdict": entry.get("verdict"), "reason": entry.get("verdict_reason")}, parent=root,
              error=entry.get("judge_error"),
              attributes={"mlflow.chat.tokenUsage": tokens} if tokens else None,
              at=windows.get("judge"))  # fmt: skip
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
        out.append(Feedback(name=REFUSED, error=AssessmentError("SYSTEM_ERROR", str(entry["system_error"])),
                            source=code))  # fmt: skip
    else:
        out.append(Feedback(name=REFUSED, value=bool(entry.get("refused")), source=code))
    out.append(Feedback(name=STAGE, value=str(entry.get("stage")), source=code))
    meta = {"judge_config_hash": judge_hash} if judge_hash else None
    judge = AssessmentSource("LLM_JUDGE", judge_hash or "judge")
    if entry.get("judge_error"):
        out.append(Feedback(name=VERDICT, error=AssessmentError("JUDGE_ERROR", str(entry["judge_error"])),
                            source=judge, metadata=meta))  # fmt: skip
    elif entry.get("verdict") is not None:
        out.append(Feedback(name=VERDICT, value=bool(entry["verdict"]),
                            rationale=entry.get("verdict_reason"), source=judge, metadata=meta))  # fmt: skip
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


def build_trace(entry: Mapping[str, Any], *, run_id: str, experiment_id: str, recorded: Mapping[str, Any],
                start_ms: int, texts: Mapping[str, str] | None = None) -> tuple[TraceInfo, list[dict[str, Any]]]:  # fmt: skip
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


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


@contextmanager
def _one_transaction(store: Any) -> Iterator[None]:
    """All writes of a SQL store in one transaction: its per-call session (one commit, so one fsync, per
    trace on sqlite: ~11 ms) is swapped for one shared session for the block. Any error rolls every trace of
    the block back, so a run never holds half its traces. Other stores (REST) write as they are."""
    original = getattr(store, "ManagedSessionMaker", None)
    if original is None:
        yield
        return
    with original(read_only=False) as shared:

        @contextmanager
        def reuse(read_only: bool = True) -> Iterator[Any]:
            yield shared

        experiments: dict[str, Any] = {}
        lookup = store.get_experiment

        def cached(experiment_id: str) -> Any:  # start_trace reads the experiment once per trace
            if experiment_id not in experiments:
                experiments[experiment_id] = lookup(experiment_id)
            return experiments[experiment_id]

        store.ManagedSessionMaker, store.get_experiment = reuse, cached
        try:
            yield
        finally:
            store.ManagedSessionMaker = original
            del store.get_experiment  # the class's method again


def _columns(obj: Any) -> dict[str, Any]:
    """The column values a model object was given (unset ones are left to the table's defaults)."""
    names = {c.key for c in obj.__table__.columns}
    return {k: v for k, v in vars(obj).items() if k in names}


def _bulk_start_traces(store: Any, infos: Sequence[TraceInfo]) -> bool:
    """``start_trace`` for many new traces at once on a SQL store: the rows of MLflow's own
    ``SqlAlchemyStore._start_trace_once`` (happy path: trace ids are new, derived from a new run id), built by
    its own model classes and inserted per table in one executemany, without its per-trace experiment lookup,
    flush and ORM unit of work (measured: ~6 ms -> ~1.3 ms per entry on sqlite). False (nothing written) when the store is not MLflow's SQL store: the caller writes one by one.
    tests/test_traces.py checks the stored traces against ``start_trace``'s."""
    # lazy: start-up (sqlalchemy comes with mlflow; only a SQL tracking store writes traces this way)
    from sqlalchemy import insert

    try:  # typed Any: these are the store module's internals, pinned with mlflow in constraints.txt
        sql: Any = importlib.import_module("mlflow.store.tracking.sqlalchemy_store")
    except ImportError:
        return False
    if not isinstance(store, sql.SqlAlchemyStore) or not infos:
        return False
    experiment = store.get_experiment(infos[0].experiment_id)
    store._check_experiment_is_active(experiment)
    experiment_int = int(str(infos[0].experiment_id))  # one experiment per call: the run's
    tables: dict[Any, list[dict[str, Any]]] = {}  # model class -> its rows, inserted parents first

    def add(obj: Any) -> None:
        tables.setdefault(type(obj), []).append(_columns(obj))

    for info in infos:
        trace_id, metadata = info.trace_id, dict(info.trace_metadata)
        add(
            sql.SqlTraceInfo(
                request_id=trace_id,
                experiment_id=info.experiment_id,
                timestamp_ms=info.request_time,
                execution_time_ms=info.execution_duration,
                status=info.state.value,
                client_request_id=info.client_request_id,
                request_preview=info.request_preview,
                response_preview=info.response_preview,
                trace_name=sql.validate_trace_name(info.tags.get(sql.TraceTagKey.TRACE_NAME)),
                **sql.analytics_columns_from_metadata(metadata),
            )
        )
        for k, v in info.tags.items():
            if k != sql.TraceTagKey.TRACE_NAME:
                add(sql.SqlTraceTag(request_id=trace_id, key=k, value=v))
        add(store._get_trace_artifact_location_tag(experiment, trace_id))
        for key in sql.PROMOTED_TRACE_METADATA_KEYS:
            metadata.pop(key, None)
        metadata[sql.TraceMetadataKey.TRACE_INFO_FINALIZED] = "true"
        for k, v in sorted(metadata.items()):
            add(sql.SqlTraceMetadata(request_id=trace_id, key=k, value=v))
        for a in info.assessments:
            sa = sql.SqlAssessments.from_mlflow_entity(a)
            sa.trace_id, sa.experiment_id, sa.trace_timestamp_ms = trace_id, experiment_int, info.request_time
            add(sa)
    times = sorted({i.request_time for i in infos})
    with store.ManagedSessionMaker(read_only=False) as session:
        sql.enqueue_rollup_rebuild_partitions(
            session,
            [
                (family, experiment_int, times)
                for family in (sql.RollupFamily.TRACE_METRIC, sql.RollupFamily.ASSESSMENT)
            ],
        )
        # One executemany per table and column set instead of the ORM's unit of work (~0.2 ms per row, and
        # an entry is ~30 rows); the rows are the model objects' own column values.
        for model, rows in tables.items():
            by_keys: dict[tuple[str, ...], list[dict[str, Any]]] = {}
            for row in rows:
                by_keys.setdefault(tuple(sorted(row)), []).append(row)
            for group in by_keys.values():
                session.execute(insert(model.__table__), group)
    return True


def log_traces(store: AbstractStore, *, run_id: str, experiment_id: str, summary: Mapping[str, Any],
               secrets: list[str], env_secrets: list[str],
               texts: Mapping[str, str] | None = None) -> int:  # fmt: skip
    """Log every entry of ``summary`` as a trace of ``run_id``; returns how many. Inputs, outputs, span
    attributes, tags and assessments are built from the scrubbed summary; a value still holding a key
    variable's content stops the logging (it would be a leak) rather than being written."""
    # lazy: start-up (mlflow, seconds; only a run that is logged loads it)
    from mlflow.entities import Span

    clean = Summary.from_mapping(scrub(summary, secrets))
    recorded = clean.settings.recorded
    entries = clean.rows
    start_ms = int(time.time() * 1000)
    turn_times: dict[str, int] = {}  # conversation -> its last turn's request time (ms)
    for offset in range(0, len(entries), SPAN_BATCH):
        infos, spans = [], []
        for i, entry in enumerate(entries[offset : offset + SPAN_BATCH], start=offset):
            # An untimed entry starts 1 ms after the one before: a conversation's turns sort in order.
            info, span_dicts = build_trace(entry, run_id=run_id, experiment_id=experiment_id,
                                           recorded=recorded, start_ms=start_ms + i, texts=texts)  # fmt: skip
            _after_previous_turn(info, span_dicts, entry, turn_times)
            if env_secrets and leaks(json.dumps([span_dicts, info.to_dict()], default=str), env_secrets):
                raise ValueError(f"trace of entry {entry['id']}: a secret value would be logged")
            infos.append(info)
            spans += [Span.from_dict(d) for d in span_dicts]
        with _one_transaction(store):
            if not _bulk_start_traces(store, infos):
                for info in infos:
                    store.start_trace(info)
            store.log_spans(experiment_id, spans)
    if entries:
        for ids in _chunks([_trace_id(run_id, str(e["id"]))[0] for e in entries], 100):
            store.link_traces_to_run(list(ids), run_id)
    return len(entries)
