"""`doceval history`: a metric across commits for one configuration family (the runs come from
doceval.tracking.history): the table with intervals and the change from the previous run, and a PNG per metric
with the intervals shaded and the gate thresholds drawn."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from io import BytesIO
from pathlib import Path
from typing import Any

from doceval.common.io import write_bytes_atomic
from doceval.common.table import format_table
from doceval.scoring.conversation_names import MEMORY_FIGURES, PREFIX, lower_is_better
from doceval.summary import settings_of


def family_of(summary: Mapping[str, Any]) -> dict[str, str]:
    """The tags that make two runs comparable over time (tracking.history.FAMILY_TAGS), from a summary."""
    settings = settings_of(summary)
    return {
        "golden_md5": settings.golden.md5 or "",
        "system": settings.system_label,
        "retriever": settings.retriever_name,
        "k": str(settings.k),
        "split": settings.split or "all",
    }


def format_history(rows: Sequence[Mapping[str, Any]], metrics: Sequence[str]) -> list[str]:
    """The family's line, then one row per run: commit, date, dirty, and per metric its value, interval and
    change from the previous run, each column as wide as its content (doceval.common.table)."""
    if not rows:
        return ["no tracked runs of this configuration family (log runs with tracking enabled)"]
    fam = rows[0]["family"]
    lines = [
        f"{len(rows)} runs: golden {fam.get('golden_md5', '')[:8]}, system {fam.get('system')}, "
        f"retriever {fam.get('retriever')}, k {fam.get('k')}, split {fam.get('split')}"
    ]
    previous: dict[str, float | None] = {}
    table = []
    for r in rows:
        cells = [
            str(r["commit"])[:8],
            time.strftime("%Y-%m-%d", time.gmtime(r["time"])),
            "yes" if r["dirty"] else "",
        ]
        for m in metrics:
            block = r["metrics"].get(m) or {}
            v = block.get("value")
            if v is None:
                cells.append("n/a")
                continue
            prev = previous.get(m)
            ci = block.get("ci")
            interval = f" [{ci[0]:.2f},{ci[1]:.2f}]" if ci else ""
            delta = "" if prev is None else f" {v - prev:+.3f}"
            cells.append(f"{v:.3f}{interval}{delta}")
            previous[m] = v
        table.append(cells)
    others = sorted({str(r["other_judge"]) for r in rows if "other_judge" in r})
    if others:
        n = sum("other_judge" in r for r in rows)
        lines.append(
            f"answer_accuracy: n/a for {n} run(s) judged by another judge ({', '.join(others)}): the "
            "family is split by judge (another judge is another scale)"
        )
    return lines + format_table(("commit", "date", "dirty", *metrics), table, left=(0, 1, 2))


def plot_history(
    rows: Sequence[Mapping[str, Any]], metrics: Sequence[str], thresholds: Mapping[str, float], path: Path
) -> Path:
    """One panel per metric: value per run in commit order, the 95% interval shaded, the gate threshold dashed,
    runs from dirty trees drawn hollow."""
    # lazy: start-up (matplotlib, ~0.5 s; only --plot draws)
    import matplotlib

    matplotlib.use("Agg")
    # lazy: as above, and pyplot only once the headless backend is chosen
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(len(metrics), 1, figsize=(8, 2.6 * len(metrics)), squeeze=False)
    x = np.arange(len(rows))
    labels = [str(r["commit"])[:7] for r in rows]
    for ax, m in zip(axes[:, 0], metrics, strict=True):
        vals = np.array(
            [np.nan if (v := (r["metrics"].get(m) or {}).get("value")) is None else v for r in rows]
        )
        lo = np.array(
            [((r["metrics"].get(m) or {}).get("ci") or [np.nan, np.nan])[0] for r in rows], dtype=float
        )
        hi = np.array(
            [((r["metrics"].get(m) or {}).get("ci") or [np.nan, np.nan])[1] for r in rows], dtype=float
        )
        ax.fill_between(x, lo, hi, alpha=0.2, label="95% interval")
        ax.plot(x, vals, "-", color="tab:blue")
        dirty = np.array([bool(r["dirty"]) for r in rows])
        ax.plot(x[~dirty], vals[~dirty], "o", color="tab:blue", label="run")
        if dirty.any():
            ax.plot(x[dirty], vals[dirty], "o", mfc="none", color="tab:blue", label="run (dirty tree)")
        if m in thresholds:
            word = "<=" if lower_is_better(m) else ">="
            ax.axhline(thresholds[m], ls="--", color="tab:red", lw=1, label=f"gate {word} {thresholds[m]:g}")
        ax.set_ylabel(m)
        signed = any(m.startswith(f"{PREFIX}.{figure}.") for figure in MEMORY_FIGURES)  # a change: [-1, 1]
        ax.set_ylim(-1.02 if signed else -0.02, 1.02)
        ax.set_xticks(x, labels, rotation=45, fontsize=7)
        ax.legend(fontsize=7, loc="lower left")
    axes[-1, 0].set_xlabel("commit (oldest first)")
    fig.tight_layout()
    png = BytesIO()
    fig.savefig(png, format="png", dpi=110)
    plt.close(fig)
    write_bytes_atomic(path, png.getvalue())  # a regular file replaced whole, never a device or a FIFO
    return path
