"""What every `doceval` command shares: the argument parser class, stage flags and the headline table."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval.common.naming import (
    ASSISTANT_LEGEND,
    judged_share_label,
    judged_share_note,
)
from doceval.common.table import format_table
from doceval.common.text import one_line
from doceval.errors import EXIT_USAGE
from doceval.summary import Summary, as_summary

if TYPE_CHECKING:
    from doceval.config.schema import Config

Command = Callable[[argparse.Namespace], int]


class Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage already; make the message say how to get help."""

    def error(self, message: str) -> Any:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


PARAMS_DEFAULT = "params.yaml"


def add_stage(sub: Any, name: str, func: Command, help_text: str) -> argparse.ArgumentParser:
    """A DVC stage command: reads params.yaml (--params) and shows progress bars unless --quiet."""
    p: argparse.ArgumentParser = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument("--params", default=PARAMS_DEFAULT, help="composed configuration (default: params.yaml)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=func)
    return p


def add_allow_drafts(p: argparse.ArgumentParser) -> None:
    """``--allow-drafts``: score entries marked draft (unreviewed) instead of refusing them; the same as the
    override ``allow_drafts=true`` (docs/design.md 3.5)."""
    p.add_argument(
        "--allow-drafts",
        action="store_true",
        help="score entries marked draft (written by `doceval golden draft`, not reviewed) instead of refusing "
        "them; the summary records it (same as allow_drafts=true)",
    )


def with_drafts(overrides: list[str], args: argparse.Namespace) -> list[str]:
    """The command's overrides, plus ``allow_drafts=true`` under ``--allow-drafts``."""
    return [*overrides, "allow_drafts=true"] if getattr(args, "allow_drafts", False) else list(overrides)


def stage_params(args: argparse.Namespace) -> Config:
    """params.yaml (or ``--params``) as the typed, frozen config the stages read, refused when stale against
    conf/ + doceval.yaml (doceval.config.drift)."""
    # lazy: start-up (the config schema and yaml, ~0.2 s; `doceval --help`, gate and compare need neither)
    from doceval.config.compose import load_params

    # lazy: start-up (the drift check composes with Hydra, ~0.35 s; only stages pay for it)
    from doceval.config.drift import check_fresh

    path = Path(args.params)
    check_fresh(path)
    return load_params(path)


def print_headline(summary: Summary | Mapping[str, Any], conversations: bool = True) -> None:
    """The run's metrics as a terminal table: value, 95% interval and the population size n (and, with
    ``conversations``, a conversation block's tables). Values from the summary are printed with control
    characters escaped (doceval.common.text.one_line)."""
    # lazy: start-up (the metric registry imports numpy; `doceval --help` must not pay for it)
    from doceval.results.judges import answer_label
    from doceval.results.summaries import metric_labels, rel1_note, shown_metrics

    typed = as_summary(summary)
    m, settings = typed.metrics.recorded, typed.settings  # the settings the run recorded, not a config object
    k = settings.k
    print(
        f"split={one_line(settings.split or 'all')} k={one_line(k)} system={one_line(settings.system_label)} "
        f"floors={one_line(settings.floors.label)}"
    )
    rows: list[list[str]] = []
    labels = metric_labels(summary)
    for key in shown_metrics(summary):
        value = m[key]
        n = str(m["counts"].get(f"n_{key}", ""))
        if value is None:
            rows.append([one_line(labels[key]), _unmeasured_text(m, key), "", "", n])
            continue
        ci = m["ci95"].get(key)
        ci_text = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
        method = one_line((m.get("ci_method") or {}).get(key) or "")
        rows.append([one_line(labels[key]), f"{value:.4f}", ci_text, method, n])
    print("\n".join(format_table(("metric", "value", "95% CI", "interval", "n"), rows, left=(0, 2, 3))))
    if rel1_note(summary):
        _note(rel1_note(summary))
    if m.get("judged_share") is not None:
        _note(judged_share_note(settings.recorded, k))
    if settings.is_assistant:
        _note(ASSISTANT_LEGEND)
    judge_line = answer_label(summary)[1]
    if judge_line:
        _note(f"answer_accuracy: {judge_line}")
    unmeasured = m.get("not_measured") or {}
    c = m["counts"]
    print(
        f"entries={c['n_entries']} in_scope={c['n_in_scope']} out_of_scope={c['n_out_of_scope']} "
        f"judged={c['n_judged']} judge_errors={c['judge_errors']} system_errors={c.get('system_errors', 0)}"
    )
    for why in sorted(set(unmeasured.values())):
        listed = ", ".join(k for k, v in unmeasured.items() if v == why)
        _note(f"not measured: {listed}: {why}")
    if "conversations" in m and conversations:
        _print_conversations(m, k, shown_metrics(summary), judged_share_label(settings.recorded, k))
    if not typed.complete:
        _note(f"INCOMPLETE: {typed.incomplete.reason if typed.incomplete else 'stopped early'}")


def _note(text: str) -> None:
    """A note under a table, on one logical line wrapped to the terminal tables' 120 columns."""
    print(textwrap.fill(one_line(text), width=120, break_on_hyphens=False))


def _unmeasured_text(m: Mapping[str, Any], key: str) -> str:
    """What the headline prints for a null metric: why it has no value."""
    if key in (m.get("not_measured") or {}):
        return "not measured"
    return "not judged" if key == "answer_accuracy" and m.get("not_judged") else "n/a"


def _print_conversations(m: Mapping[str, Any], k: Any, shown: Sequence[str], judged_label: str) -> None:
    """The conversation block (docs/design.md 4.6): every metric over all turns with its interval (resampled
    by conversation), then by turn position and by needs_memory; below it, all turns correct per conversation
    and where conversations first failed."""
    # lazy: start-up (the metric registry imports numpy; `doceval --help` must not pay for it)
    from doceval.scoring.registry import BY_NAME

    conv = m["conversations"]
    groups = [(f"turn {p}", b) for p, b in conv["by_position"].items()]
    groups += [
        (f"memory={'yes' if key == 'true' else 'no'}", b) for key, b in conv["by_needs_memory"].items()
    ]
    header = ("metric", "turns", "95% CI", *(name for name, _ in groups))
    rows: list[list[str]] = []
    for metric in (BY_NAME[name] for name in shown):
        value = conv["turns"][metric.name]
        label = one_line(judged_label) if metric.name == "judged_share" else metric.label(k)
        if value is None:
            rows.append([label, _unmeasured_text(m, metric.name)])
            continue
        ci = conv["turns"]["ci95"].get(metric.name)
        cells = [_format_value(block[metric.name]) for _, block in groups]
        rows.append([label, f"{value:.4f}", f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "", *cells])
    print(
        f"conversations={conv['n_conversations']} turns={conv['n_turns']} needs_memory={conv['n_needs_memory']}"
        " (intervals resample whole conversations)"
    )
    print("\n".join(format_table(header, rows, left=(0, 2))))
    per = conv["per_conversation"]
    correct, ci = per["all_turns_correct"], per["ci95"]
    if correct is None:
        shown = "not measured" if per["n_not_measured"] else "n/a"
    else:
        shown = f"{correct:.4f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")
    unscored = f", not measured={per['n_not_measured']}" if per["n_not_measured"] else ""
    firsts = " ".join(f"{turn}:{n}" for turn, n in per["first_failing_turn"].items())
    print(f"all_turns_correct={shown} (n={per['n_measured']}{unscored}) first_failing_turn {firsts}")
    if "memory_benefit" in conv:
        _print_memory(conv)


# The conversations stage's memory figures (docs/design.md 4.6): block key, column title, value key.
_MEMORY_COLUMNS = (
    ("memory_benefit", "benefit", "benefit"),
    ("standalone_ceiling", "ceiling", "ceiling"),
    ("memory_recovery", "recovery", "recovery"),
    ("memory_leak", "leak*", "leak"),
)


def _memory_cell(row: Mapping[str, Any] | None, key: str) -> str:
    if not isinstance(row, Mapping):
        return "-"
    value = row.get(key)
    if value is None:
        return "not measured"
    ci = row.get("ci95")
    return f"{value:+.4f}" + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else " (no interval)")


def _print_memory(conv: Mapping[str, Any]) -> None:
    """Memory benefit, standalone ceiling, recovery (benefit / ceiling) and leak per metric, and why a figure
    was not measured."""
    # lazy: start-up (the metric registry imports numpy; `doceval --help` must not pay for it)
    from doceval.scoring.registry import names

    columns = [c for c in _MEMORY_COLUMNS if isinstance(conv.get(c[0]), Mapping)]
    rows = [
        [metric, *(_memory_cell(conv[key].get(metric), value) for key, _, value in columns)]
        for metric in names("memory")
    ]
    print(
        "memory (needs_memory turns; leak: the other turns, * lower is better; intervals resample conversations)"
    )
    print("\n".join(format_table(("metric", *(title for _, title, _ in columns)), rows, left=(0,))))
    reasons = {
        row["not_measured"]
        for key, _, _ in columns
        for row in conv[key].values()
        if isinstance(row, Mapping) and row.get("not_measured")
    }
    for why in sorted(reasons):
        print(f"not measured: {one_line(why)}")


def conversation_line(summary: Summary | Mapping[str, Any]) -> str:
    """A conversation replay in one line: conversations and turns, all turns correct, and hit_rate's memory
    benefit and leak, each with its 95% interval (intervals resample whole conversations)."""
    # lazy: start-up (the registry imports numpy)
    from doceval.scoring.conversation_names import PREFIX, conversation_figures

    metrics = as_summary(summary).metrics
    conv = metrics.conversations
    if conv is None:
        return "conversations: none in this summary"
    figures = conversation_figures(metrics.recorded)

    def shown(name: str, signed: bool = False) -> str:
        figure = figures.get(f"{PREFIX}.{name}")
        if figure is None or figure.value is None:
            return "not measured"
        ci = f" [{figure.ci95[0]:.2f},{figure.ci95[1]:.2f}]" if figure.ci95 else ""
        return (f"{figure.value:+.2f}" if signed else f"{figure.value:.3f}") + ci

    return (
        f"conversations={conv['n_conversations']} turns={conv['n_turns']}: all_turns_correct "
        f"{shown('all_turns_correct')}; hit_rate: memory benefit {shown('memory_benefit.hit_rate', True)}, "
        f"leak {shown('memory_leak.hit_rate', True)}"
    )


def _format_value(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _file_identity(path: Path) -> tuple[int, int, int, int] | None:
    """What tells one file from its replacement: device, inode, mtime and size (None: nothing there)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size


@contextlib.contextmanager
def stale_on_failure(output: Path, command: str) -> Iterator[None]:
    """A run that fails must not leave an earlier run's summary at its ``--output``, where a gate would take it
    for this run's. On any failure inside the block (an error, a usage error found mid-run, Ctrl-C) a file
    still at ``output`` is the earlier one: it is moved to ``<output>.stale`` (nothing is lost) and stderr says
    so. Once this run has written its own summary (an incomplete run's, exit 4, included) it is left alone."""
    before = _file_identity(output)
    try:
        yield
    except BaseException:
        if before is not None and _file_identity(output) == before:
            stale = output.with_name(output.name + ".stale")
            try:
                os.replace(output, stale)  # a symlink moves as the link: its target is untouched
            except OSError as exc:
                print(
                    f"doceval {command}: the previous summary at {output} could not be moved aside "
                    f"({exc.strerror or exc}); it is not this run's: delete it",
                    file=sys.stderr,
                )
            else:
                print(
                    f"doceval {command}: the previous summary at {output} was moved to {stale}: this run "
                    "failed",
                    file=sys.stderr,
                )
        raise
