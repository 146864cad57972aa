"""Loading and checking run summaries (files or MLflow run ids through a loader), and the same-k check."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from doceval.common.bounded_json import loads
from doceval.common.io import finite_or_null
from doceval.common.naming import ASSISTANT_REFUSED_CORRECTLY, judged_share_label
from doceval.common.paths import input_file
from doceval.errors import UsageError
from doceval.results.judges import answer_label
from doceval.scoring.registry import BY_NAME, METRIC_NAMES, names
from doceval.summary import Summary as TypedSummary
from doceval.summary import as_summary, settings_of

# A run summary as readers take it: typed (what the harness returns) or its JSON object (a file, MLflow).
Summary = TypedSummary | Mapping[str, Any]
MlflowLoader = Callable[[str], Mapping[str, Any]]

_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
_FIX = "pass a summary JSON written by `doceval eval --output PATH`"


def load_summary(path_or_run_id: str | Path, mlflow_loader: MlflowLoader | None = None) -> dict[str, Any]:
    """A run summary from a JSON file, or from MLflow when the argument is a run id (32 hex characters).

    Anything that is not a summary (missing file, bad JSON, missing ``metrics``/``entries``, malformed
    entries, duplicate entry ids) raises a :class:`UsageError` naming the file and the fix.
    """
    if not isinstance(path_or_run_id, str | Path) or not str(path_or_run_id).strip():
        raise UsageError(
            f"load_summary({path_or_run_id!r:.60}): expected a summary JSON path (str or pathlib.Path) or an "
            "MLflow run id (e.g. load_summary('eval/runs/latest.json'))"
        )
    text = str(path_or_run_id)
    path = input_file(Path(text), "run summary", _FIX)  # a folder, device or FIFO is named as such
    if not path.is_file():
        if _RUN_ID.match(text.lower()):
            if mlflow_loader is None:
                raise UsageError(
                    f"{text}: no such file, and it looks like an MLflow run id but MLflow lookup is not "
                    "available "
                    f"here; {_FIX}"
                )
            data: Any = finite_or_null(mlflow_loader(text.lower()))
            return check_summary(data, f"MLflow run {text}")
        raise UsageError(f"{path}: run summary not found; {_FIX}, or an MLflow run id (32 hex characters)")
    try:
        # An older doceval wrote NaN and -Infinity (an assistant's floors): read as the null written now.
        data = finite_or_null(loads(path.read_text(encoding="utf-8")))
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not a text file, so not a run summary; {_FIX}") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{path}:{exc.lineno}: not valid JSON ({exc.msg}), so not a run summary; {_FIX}"
        ) from exc
    return check_summary(data, str(path))


def check_summary(data: Any, where: str) -> dict[str, Any]:
    """Check the shape of a summary (``where`` names it in errors) and return it as a dict."""

    def bad(what: str) -> UsageError:
        return UsageError(f"{where}: not a doceval run summary ({what}); {_FIX}")

    if not isinstance(data, dict):
        raise bad(f"top level is a JSON {type(data).__name__}, expected an object")
    missing = [k for k in ("metrics", "entries") if k not in data]
    if missing:
        raise bad(f"missing key{'s' if len(missing) > 1 else ''} {', '.join(repr(k) for k in missing)}")
    metrics, entries = data["metrics"], data["entries"]
    if not isinstance(metrics, dict):
        raise bad("'metrics' is not an object")
    if not isinstance(entries, list):
        raise bad("'entries' is not a list")
    if not isinstance(data.get("config", {}), dict):
        raise bad("'config' is not an object")
    for m in METRIC_NAMES:
        v = metrics.get(m)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
            raise bad(f"metrics.{m} is {v!r}, expected a number or null")
    seen: set[str] = set()
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise bad(f"entries[{i}] is not an object")
        if not isinstance(e.get("id"), str):
            raise bad(f"entries[{i}] has no string 'id'")
        if not isinstance(e.get("scores"), dict):
            raise bad(f"entries[{i}] ({e['id']}) has no 'scores' object")
        if e["id"] in seen:
            raise bad(f"entries[{i}]: duplicate entry id {e['id']!r}")
        seen.add(e["id"])
        for m in METRIC_NAMES:
            v = e["scores"].get(m)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
                raise bad(f"entries[{i}] ({e['id']}).scores.{m} is {v!r}, expected a number or null")
    return data


def checked_summary(data: Summary, where: str) -> TypedSummary:
    """``data`` typed: a typed summary as it is (the harness built it), a mapping once its shape is checked
    (:func:`check_summary`; ``where`` names it in errors)."""
    return data if isinstance(data, TypedSummary) else TypedSummary.from_mapping(check_summary(data, where))


def _golden_md5(summary: Summary) -> str | None:
    return settings_of(summary).golden.md5 or None


def _doc_ids(entry: Mapping[str, Any]) -> list[str]:
    """The document ids an entry retrieved (after floors and the cut at k), in rank order."""
    out: list[str] = []
    for item in entry.get("retrieved") or []:
        if isinstance(item, list | tuple) and item:
            out.append(str(item[0]))
        elif isinstance(item, dict) and "id" in item:
            out.append(str(item["id"]))
        else:
            out.append(str(item))
    return out


def _entries(n: int) -> str:
    return f"{n} {'entry' if n == 1 else 'entries'}"


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


def _k(summary: Summary) -> int | None:
    return settings_of(summary).k


def _pins(summary: Summary) -> list[str] | None:
    pins = settings_of(summary).golden.corpus_pins
    return None if pins is None else list(pins)


def check_same_corpus(
    base: Summary, new: Summary, base_label: str, new_label: str, *, allow_different_corpus: bool = False
) -> str | None:
    """Refuse two runs whose corpora index different pins: "out of scope" means "not indexed", so their
    refusal metrics count different questions. Returns a note when allowed or when a summary does not say."""
    bp, np_ = _pins(base), _pins(new)
    if bp is None or np_ is None:
        return (
            None
            if bp is None and np_ is None
            else "corpus pins missing from a summary: same corpus not verified"
        )
    if bp == np_:
        return None
    only_b = sorted(set(bp) - set(np_))
    only_n = sorted(set(np_) - set(bp))
    what = (
        f"{base_label} indexes {len(bp)} pins, {new_label} {len(np_)}; only in {base_label}: "
        f"{', '.join(only_b) or '-'}; only in {new_label}: {', '.join(only_n) or '-'}"
    )
    if not allow_different_corpus:
        raise UsageError(
            f"{what}: their out-of-scope sets mean different things; compare runs over the same corpus, or "
            "pass --allow-different-corpus"
        )
    return f"different corpora ({what}) (--allow-different-corpus)"


def check_same_k(
    base: Summary, new: Summary, base_label: str, new_label: str, *, allow_different_k: bool = False
) -> str | None:
    """Refuse two runs cut at different k (hit_rate@3 vs hit_rate@10 is no comparison); returns a note.

    With ``allow_different_k`` the comparison goes ahead and the note says so; a summary without a k
    (hand-written) gives a note that the cut-off was not verified.
    """
    bk, nk = _k(base), _k(new)
    if bk is None or nk is None:
        return "k missing from a summary's config: same cut-off not verified"
    if bk == nk:
        return None
    if not allow_different_k:
        raise UsageError(
            f"{base_label} and {new_label} were cut at different k (k={bk} vs k={nk}): their retrieval metrics "
            "measure different things; compare runs with the same k, or pass --allow-different-k"
        )
    return f"different cut-offs: {base_label} k={bk}, {new_label} k={nk} (--allow-different-k)"


def graded(summary: Summary) -> bool:
    """Whether the run's metrics at grade >= 1 (``*_rel1``) can differ from their grade-2 ones: its judgments
    have a grade 1 and relevance.threshold is 2 (``config.golden.graded``). A summary written before that was
    recorded: whether any entry's ``*_rel1`` score differs from its grade-2 one."""
    recorded = settings_of(summary).golden.graded
    if recorded is not None:
        return recorded
    pairs = [(m, m.removesuffix("_rel1")) for m in names("graded")]
    scored = [e.scores for e in as_summary(summary).entries]
    return any(
        s.get(a) is not None and s.get(b) is not None and s[a] != s[b] for s in scored for a, b in pairs
    )


def shown_metrics(*summaries: Summary) -> tuple[str, ...]:
    """The metrics a table shows for these runs: every one, less the ``*_rel1`` rows unless a run's judgments
    are graded (with binary judgments they repeat hit_rate, recall and mrr)."""
    hidden = () if any(graded(s) for s in summaries) else names("graded")
    return tuple(m for m in METRIC_NAMES if m not in hidden)


def rel1_note(*summaries: Summary) -> str:
    """The line under a table that left the ``*_rel1`` rows out ("" when it shows them)."""
    if any(graded(s) for s in summaries):
        return ""
    return f"{', '.join(names('graded'))} not shown: binary judgments (they equal hit_rate, recall, mrr)"


def metric_labels(summary: Summary, at_k: bool = True) -> dict[str, str]:
    """Each metric's name as the headline and report.md show it: with k (``hit_rate@5``; ``at_k=False``: the
    bare name), refused_correctly of a user's assistant as what it measures there, answer_accuracy with its
    judge's label ("heuristic", "unvalidated") when that judge has not cleared the bar (results.judges); judged_share as what it measures (common.naming.judged_share_label)."""
    settings = settings_of(summary)
    labels = {name: metric.label(settings.k) if at_k else name for name, metric in BY_NAME.items()}
    labels["judged_share"] = judged_share_label(settings.recorded, settings.k if at_k else None)
    if settings.is_assistant:
        labels["refused_correctly"] += f" ({ASSISTANT_REFUSED_CORRECTLY})"
    tag = answer_label(summary)[0]
    if tag:
        labels["answer_accuracy"] += f" ({tag})"
    return labels
