"""What per-entry MLflow traces add to logging a run, on a 10,000-entry run, sqlite store.

    .venv/bin/python benchmarks/bench_traces.py [--entries 10000] [--naive 200]

The entries are the pipeline's test summary (eval/summary.json, from `dvc repro evaluate`) repeated under new
ids. In one fresh sqlite store: ``log_run`` without traces, then with (the added time per entry is the cost of
traces: spans, expectations, feedback, the golden dataset), then reading them back as ``compare RUN_ID`` does.
Side by side, the naive path through MLflow's public fluent API (``mlflow.start_span`` per span,
``log_expectation``/``log_feedback`` per assessment) on ``--naive`` entries. Target: at most 5 ms per entry.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _summary(n: int) -> dict[str, Any]:
    source = ROOT / "eval" / "summary.json"
    if not source.is_file():
        raise SystemExit(f"{source} not found: run `dvc repro evaluate` first")
    summary: dict[str, Any] = json.loads(source.read_text(encoding="utf-8"))
    base = summary["entries"]
    entries = []
    for i in range(n):
        e = copy.deepcopy(base[i % len(base)])
        e["id"] = f"{e['id']}~{i}"
        entries.append(e)
    summary["entries"] = entries
    summary["config"]["golden"]["path"] = str(ROOT / summary["config"]["golden"]["path"])
    return summary


def _naive(uri: str, summary: dict[str, Any], n: int) -> float:
    """Seconds per entry through the public fluent API (synchronous export, one call per assessment)."""
    import os

    os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"  # written when the call returns, as ours
    import mlflow
    from mlflow.entities import AssessmentSource, SpanType

    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("naive")
    human, code = AssessmentSource("HUMAN", "golden"), AssessmentSource("CODE", "doceval")
    start = time.perf_counter()
    for e in summary["entries"][:n]:
        with mlflow.start_span("probe", span_type=SpanType.AGENT) as root:
            root.set_inputs({"question": e["question"]})
            for name, kind in (("router", SpanType.TOOL), ("search", SpanType.RETRIEVER),
                               ("memory", SpanType.MEMORY), ("answerer", SpanType.LLM)):  # fmt: skip
                with mlflow.start_span(name, span_type=kind) as span:
                    span.set_outputs(e["retrieved"] if kind == SpanType.RETRIEVER else e.get("answer"))
            root.set_outputs({"answer": e.get("answer")})
        trace_id = root.trace_id
        for label in ("relevant_ids", "reference_answer", "expected_apis", "forbidden_apis", "out_of_scope"):
            if e.get(label) is None:
                continue
            mlflow.log_expectation(trace_id=trace_id, name=label, value=e.get(label), source=human)
        for metric, value in e["scores"].items():
            if value is not None:
                mlflow.log_feedback(trace_id=trace_id, name=metric, value=value, source=code)
    return (time.perf_counter() - start) / n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=10_000)
    ap.add_argument("--naive", type=int, default=200, help="entries through the public API (0: skip)")
    ap.add_argument("--target-ms", type=float, default=5.0)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger("mlflow").setLevel(logging.ERROR)

    from mlflow import MlflowClient

    from doceval.tracking import ensure_store, load_summary_from_run, log_run

    summary = _summary(args.entries)
    golden = Path(summary["config"]["golden"]["path"])
    with tempfile.TemporaryDirectory(prefix="bench-traces-") as tmp:
        root = Path(tmp)
        uri = f"sqlite:///{root / 'mlflow.db'}"
        ensure_store(uri, root)
        t0 = time.perf_counter()
        log_run(summary, uri=uri, root=root, run_name="plain", golden_path=golden, traces=False)
        plain = time.perf_counter() - t0
        t0 = time.perf_counter()
        run_id = log_run(summary, uri=uri, root=root, run_name="traced", golden_path=golden, traces=True)
        traced = time.perf_counter() - t0
        t0 = time.perf_counter()
        loaded = load_summary_from_run(run_id, uri, root)
        read = time.perf_counter() - t0
        client = MlflowClient(uri)
        tag = client.get_run(run_id).data.tags["doceval.traces"]
        naive = _naive(uri, summary, args.naive) if args.naive else None
        db_mb = (root / "mlflow.db").stat().st_size / 2**20

    n = args.entries
    added_ms = (traced - plain) / n * 1000
    print(f"{n} entries (eval/summary.json repeated), sqlite store, traces tag {tag}, "
          f"{len(loaded['entries'])} read back")  # fmt: skip
    print(f"log_run without traces   {plain:8.1f} s")
    print(
        f"log_run with traces      {traced:8.1f} s   added {added_ms:.2f} ms/entry (target <= {args.target_ms:g})"
    )
    print(f"read back (compare)      {read:8.1f} s   {read / n * 1000:.2f} ms/entry")
    if naive is not None:
        print(f"public fluent API        {naive * 1000:8.2f} ms/entry on {args.naive} entries "
              f"({naive * 1000 / added_ms:.1f}x the batched writer)")  # fmt: skip
    print(f"store size               {db_mb:8.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
