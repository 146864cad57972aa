"""Writing per-entry MLflow traces (built by :mod:`doceval.tracking.traces`) to a tracking store, batched: one
``start_trace`` per entry carrying its tags, metadata and assessments (many at once on a SQL store), and the spans
of many entries in one ``log_spans`` call, in one transaction (the public one-assessment-per-call API costs
~10 ms per assessment on sqlite).
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from doceval.summary import Summary
from doceval.tracking.secrets import leaks, scrub
from doceval.tracking.traces import _after_previous_turn, _trace_id, build_trace

if TYPE_CHECKING:
    from mlflow.entities import TraceInfo
    from mlflow.store.tracking.abstract_store import AbstractStore

SPAN_BATCH = 500  # entries whose spans go in one log_spans call


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


def log_traces(
    store: AbstractStore,
    *,
    run_id: str,
    experiment_id: str,
    summary: Mapping[str, Any],
    secrets: list[str],
    env_secrets: list[str],
    texts: Mapping[str, str] | None = None,
) -> int:
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
            info, span_dicts = build_trace(
                entry,
                run_id=run_id,
                experiment_id=experiment_id,
                recorded=recorded,
                start_ms=start_ms + i,
                texts=texts,
            )
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
