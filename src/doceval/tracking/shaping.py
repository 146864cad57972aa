"""Shaping a summary for MLflow: flat params and metrics within MLflow's limits, tags, the per-entry CSV."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from doceval import __version__
from doceval.common.naming import system_label
from doceval.common.redact import scrub_data
from doceval.config.compose import flatten
from doceval.scoring.agreement import JUDGED_METRICS, evidence_label, evidence_tag, summary_evidence
from doceval.scoring.conversation_names import conversation_figures
from doceval.scoring.registry import names
from doceval.tracking.secrets import leaks, redact_bytes, redact_text, secret_name, url_secret_values

MAX_PARAM_LEN = 6000  # mlflow.utils.validation.MAX_PARAM_VAL_LENGTH
MAX_TAG_LEN = 8000  # MAX_TAG_VAL_LENGTH
MAX_KEY_LEN = 250  # MAX_ENTITY_KEY_LENGTH
# One row per entry that a person can read without summary.json: what was asked, of which pin, what happened
# (failure stage, the top documents with their scores, the answer's start, a system error, the call's time),
# then every score. docs/design.md section 6.6.
ENTRY_COLUMNS = (
    "id",
    "split",
    "kind",
    "pin",
    "question",
    "out_of_scope",
    "refused",
    "stage",
    "top_ids",
    "answer",
    "system_error",
    "duration_s",
)
CSV_TOP_IDS = 5  # documents listed in top_ids
CSV_ANSWER_CHARS = 200  # characters of the answer kept


def sanitize_key(key: str) -> str:
    """A valid MLflow param/metric/tag name: [\\w./ -] only (no colon: Windows), no path tricks, <= 250."""
    name = re.sub(r"[^\w.\-/ ]", "_", str(key))
    name = re.sub(r"/{2,}", "/", name).strip("/")
    name = "/".join(p if p not in (".", "..") else p.replace(".", "_") for p in name.split("/"))
    name = name.lstrip(".") or "_"
    return name[:MAX_KEY_LEN]


def _param_value(value: Any) -> str:
    if isinstance(value, str):
        text = value
    elif isinstance(value, Mapping | list | tuple):
        text = json.dumps(value, default=str, sort_keys=True)
    else:
        text = str(value)
    return text if len(text) <= MAX_PARAM_LEN else text[: MAX_PARAM_LEN - 3] + "..."


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    f = float(value)
    return f if math.isfinite(f) else None


def build_params(
    recorded: Mapping[str, Any], flat_config: Mapping[str, Any] | None, secrets: list[str]
) -> dict[str, str]:
    """Flat params (``flat_config``, else the summary's recorded ``config`` block): secret-named keys and values
    holding one of ``secrets`` are dropped; URLs are kept with their credentials masked (``http://***@host/v1``)."""
    source = (
        flat_config
        if flat_config is not None
        else {k: v for k, v in recorded.items() if k not in ("usage", "provenance")}
    )
    masked = [*secrets, *url_secret_values(source)]
    params: dict[str, str] = {}
    for key, value in flatten(source).items():
        if not key or secret_name(key):
            continue
        text = _param_value(value)
        if leaks(text, secrets) or (isinstance(value, str) and leaks(value, secrets)):
            continue
        params.setdefault(sanitize_key(key), _param_value(redact_text(text, masked)))
    return params


def build_metrics(
    metrics: Mapping[str, Any], usage: Mapping[str, Any] | None, repeats: Mapping[str, Any] | None = None
) -> dict[str, float]:
    """Every metric, count, interval bound, per-library value, conversation figure and usage figure; with a
    ``--repeats`` block also its spread (``repeats.n``, ``repeats.<metric>.sd|min|max``, ``repeats.flaky``,
    ``repeats.flaky_answer``: entries whose answer changed, not only its verdict)."""
    out: dict[str, float] = {}

    def put(name: str, value: Any) -> None:
        v = _num(value)
        if v is not None:
            out.setdefault(sanitize_key(name), v)

    for name, value in metrics.items():
        put(name, value)
    for name, value in (metrics.get("counts") or {}).items():
        put(name, value)
    for name, ci in (metrics.get("ci95") or {}).items():
        if isinstance(ci, list | tuple) and len(ci) == 2:
            put(f"{name}_ci_lo", ci[0])
            put(f"{name}_ci_hi", ci[1])
    for lib, block in (metrics.get("by_library") or {}).items():
        if isinstance(block, Mapping):
            for name, value in block.items():
                put(f"{lib}.{name}", value)
    for name, figure in conversation_figures(metrics).items():  # the names gate and history read
        put(name, figure.value)
        if figure.ci95 is not None:
            put(f"{name}_ci_lo", figure.ci95[0])
            put(f"{name}_ci_hi", figure.ci95[1])
    if usage:
        by_role = usage.get("by_role", usage) if isinstance(usage, Mapping) else {}
        totals: dict[str, float] = {}
        for role, fields in (by_role or {}).items():
            if not isinstance(fields, Mapping):
                continue
            for field, value in fields.items():
                v = _num(value)
                if v is not None:
                    put(f"usage.{role}.{field}", v)
                    totals[field] = totals.get(field, 0.0) + v
        if len([r for r in (by_role or {}).values() if isinstance(r, Mapping)]) > 1:
            for field, value in totals.items():
                put(f"usage.total.{field}", value)
        cache = usage.get("cache") if isinstance(usage, Mapping) else None
        for field, value in (cache or {}).items() if isinstance(cache, Mapping) else ():
            put(f"usage.cache.{field}", value)
    if isinstance(repeats, Mapping):
        put("repeats.n", repeats.get("n"))
        for name, spread in (repeats.get("metrics") or {}).items():
            for field in ("sd", "min", "max"):
                put(f"repeats.{name}.{field}", (spread or {}).get(field))
        flaky = repeats.get("flaky") or []
        put("repeats.flaky", len(flaky))
        put("repeats.flaky_answer", sum(bool(f.get("answer_changed")) for f in flaky))
    return out


def _split_of(recorded: Mapping[str, Any]) -> str | None:
    split = recorded.get("split")
    if isinstance(split, Mapping):
        split = split.get("name")
    return None if split is None else str(split)


def _source_sha(recorded: Mapping[str, Any]) -> str | None:
    """The hash (or package version) of the user's code under test, so two runs of different code differ."""
    system = recorded.get("system") or {}
    part = system.get("retriever") if isinstance(system.get("retriever"), Mapping) else system.get("agent")
    if not isinstance(part, Mapping):
        return None
    value = part.get("source_sha256") or part.get("package_version")
    return None if value is None else str(value)


def run_title(recorded: Mapping[str, Any]) -> str:
    """What a run is (from its summary's recorded ``config`` block), as its MLflow name: split · system · k ·
    floors · golden version, e.g. ``test · dense · k5 · floors calibrated(cal) · v2``."""
    floors = recorded.get("floors") or {}
    source = str(floors.get("source") or "")
    if source.startswith("calibrated"):
        split = str((floors.get("provenance") or {}).get("split") or "?")
        floor_text = f"floors calibrated({split[:3]})"
    elif source == "config":
        floor_text = f"floors {float(floors.get('global') or 0):g}" + (
            "+lib" if floors.get("per_library") else ""
        )
    else:
        floor_text = "floors none"
    if floors.get("signal") not in (None, "score"):
        floor_text += f" on {floors['signal']}"
    golden = recorded.get("golden") or {}
    stem = Path(str(golden.get("path") or "golden")).stem
    version = stem if stem.startswith("v") else f"{stem} {str(golden.get('md5') or '')[:6]}".strip()
    parts = [
        _split_of(recorded) or "all",
        system_label(recorded),
        f"k{recorded.get('k')}",
        floor_text,
        version,
    ]
    if (recorded.get("memory") or {}).get("isolate") is False:
        parts.append("warm memory")  # memory carried across entries: another system than the isolated run
    return " · ".join(parts)


def judge_label(recorded: Mapping[str, Any], metrics: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """answer_accuracy's label from its judge's evidence (doceval.scoring.agreement): ``(tag, line)``, both None
    when the judge cleared the bar or nothing was judged."""
    evidence = summary_evidence({"metrics": dict(metrics), "config": dict(recorded)})
    return evidence_tag(evidence), evidence_label(evidence, (recorded.get("judge_id") or {}).get("hash"))


def headline_line(metrics: Mapping[str, Any], judge_tag: str | None = None) -> str:
    """The run's description: its headline metrics with their intervals (answer_accuracy with its judge's
    label, ``judge_tag``, when that judge has not cleared the bar)."""
    ci95 = metrics.get("ci95") or {}
    parts = []
    for m in names("headline"):
        v = metrics.get(m)
        if m in (metrics.get("not_measured") or {}):
            parts.append(f"{m} not measured")
            continue
        if v is None:
            parts.append(f"{m} n/a" if m != "answer_accuracy" else "answer_accuracy not judged")
            continue
        ci = ci95.get(m)
        tag = f" ({judge_tag})" if judge_tag and m in JUDGED_METRICS else ""
        parts.append(f"{m}{tag} {v:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""))
    return ", ".join(parts)


def build_tags(
    recorded: Mapping[str, Any],
    metrics: Mapping[str, Any],
    extra: Mapping[str, Any] | None,
    secrets: list[str],
) -> dict[str, str]:
    prov = recorded.get("provenance") or {}
    retriever = recorded.get("retriever")
    dirty = prov.get("git_dirty")
    tags: dict[str, Any] = {
        "split": _split_of(recorded) or "all",
        "retriever": retriever.get("name") if isinstance(retriever, Mapping) else retriever,
        "system": system_label(recorded),
        "system_source_sha256": _source_sha(recorded),
        "k": recorded.get("k"),
        "git_commit": prov.get("git_commit"),
        "git_dirty": None if dirty is None else str(bool(dirty)).lower(),
        "golden_md5": (recorded.get("golden") or {}).get("md5"),
        "index_hash": (recorded.get("candidates") or {}).get("index_hash"),
        "floors_source": (recorded.get("floors") or {}).get("source"),
        "run_key": recorded.get("run_key"),
        "judge_hash": (recorded.get("judge_id") or {}).get("hash"),
        "doceval_version": __version__,
    }
    if isinstance(metrics.get("not_judged"), bool):
        tags["not_judged"] = str(metrics["not_judged"]).lower()
    judge_tag, judge_line = judge_label(recorded, metrics)
    evidence = recorded.get("judge_evidence")
    if isinstance(evidence, Mapping):
        tags["judge_evidence"] = evidence.get("status")  # cleared | below_bar | unvalidated
    if judge_line:
        tags["answer_accuracy_label"] = judge_line  # heuristic / unvalidated: why, with the labels' kappa
    if metrics:
        tags["mlflow.note.content"] = headline_line(metrics, judge_tag)  # the run's description in the UI
    for name, figure in conversation_figures(metrics).items():  # a figure without interval says why
        if figure.ci95 is None and figure.ci_note:
            tags[f"{name}_ci_note"] = figure.ci_note
    if prov.get("git_commit"):
        tags["mlflow.source.git.commit"] = prov["git_commit"]
    tags.update(extra or {})
    masked = [*secrets, *url_secret_values(recorded, dict(extra or {}))]
    out: dict[str, str] = {}
    for key, value in tags.items():
        if value is None or secret_name(str(key)):
            continue
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        if leaks(text, secrets):
            continue
        out[sanitize_key(key)] = redact_text(text, masked)[:MAX_TAG_LEN]
    return out


# A cell a spreadsheet would run as a formula (OWASP "CSV injection"): it starts with one of these (the
# full-width forms too); written with a leading apostrophe. A plain number ("-0.5", "+3") is left alone.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def csv_cell(value: Any) -> Any:
    """One CSV cell: None as empty, numbers as they are, text that starts a formula prefixed with ``'``.
    A carriage return becomes a newline (the writer quotes a cell holding ``\n``, not one holding a bare
    ``\r``, which would split the row for a reader)."""
    if value is None:
        return ""
    if isinstance(value, bool | int | float):
        return value
    text = str(value)
    if text.startswith(_FORMULA_START) and not _PLAIN_NUMBER.fullmatch(text):
        text = "'" + text
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _pin(entry: Mapping[str, Any]) -> str | None:
    library, version = entry.get("library"), entry.get("version")
    if library is None and version is None:
        return None  # a user's own golden set may name no library or version
    return f"{library}@{version}"


def _top_ids(retrieved: Any) -> str:
    """``"id:0.812 id2:0.790"``: the first documents retrieved (after floors and k), with their scores."""
    cells = []
    for doc_id, score in (retrieved or [])[:CSV_TOP_IDS]:
        cells.append(str(doc_id) if score is None else f"{doc_id}:{score:.3f}")
    return " ".join(cells)


def entry_cells(entry: Mapping[str, Any]) -> dict[str, Any]:
    """One entry's ENTRY_COLUMNS values; its text (question, answer, error) through the scrubber
    (doceval.common.redact.scrub_data), as everything written from a run is."""
    answer = entry.get("answer")
    timing = entry.get("timing") or {}
    cells = {
        "id": entry.get("id"),
        "split": entry.get("split"),
        "kind": entry.get("kind"),
        "pin": _pin(entry),
        "question": entry.get("question"),
        "out_of_scope": entry.get("out_of_scope"),
        "refused": entry.get("refused"),
        "stage": entry.get("stage"),
        "top_ids": _top_ids(entry.get("retrieved")),
        "answer": None if answer is None else str(answer)[:CSV_ANSWER_CHARS],
        "system_error": entry.get("system_error"),
        "duration_s": timing.get("duration_s"),
    }
    return {k: scrub_data(v) if isinstance(v, str) else v for k, v in cells.items()}


def entries_csv(entries: list[Mapping[str, Any]]) -> str:
    """entries.csv: ENTRY_COLUMNS, then every score key met, one row per entry; formula-safe cells."""
    score_keys: list[str] = []
    for e in entries:
        for k in e.get("scores") or {}:
            if k not in score_keys:
                score_keys.append(k)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([csv_cell(c) for c in (*ENTRY_COLUMNS, *score_keys)])
    for e in entries:
        scores = e.get("scores") or {}
        cells = entry_cells(e)
        writer.writerow(
            [csv_cell(cells[c]) for c in ENTRY_COLUMNS] + [csv_cell(scores.get(k)) for k in score_keys]
        )
    return buf.getvalue()


def _golden_input(golden_path: Path, md5: str | None, split: str | None) -> Any:
    # lazy: start-up (mlflow, seconds; only a run that is logged loads it)
    from mlflow.entities import Dataset, DatasetInput, InputTag
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    path = Path(golden_path)
    rows: int | None = None
    if path.is_file():
        data = path.read_bytes()
        md5 = md5 or hashlib.md5(data).hexdigest()
        rows = sum(1 for line in data.splitlines() if line.strip())
    digest = (md5 or "unknown")[:36]
    profile = json.dumps({"num_rows": rows}) if rows is not None else None
    dataset = Dataset(
        name="golden",
        digest=digest,
        source_type="local",
        source=json.dumps({"uri": path.resolve().as_uri()}),
        profile=profile,
    )
    tags = [InputTag(key=MLFLOW_DATASET_CONTEXT, value="evaluation")]
    if split:
        tags.append(InputTag(key="split", value=split))
    return DatasetInput(dataset=dataset, tags=tags)


def _redact_file(src: Path, dst: Path, secrets: list[str]) -> None:
    """Copy an artifact with the known secrets and URL credentials redacted (text) or the secrets (binary)."""
    dst.write_bytes(redact_bytes(src.read_bytes(), secrets))
