"""The side-by-side comparison plot (PNG): each metric's change with its 95% interval."""

from __future__ import annotations

from io import BytesIO
from pathlib import Path

from doceval.common.io import write_bytes_atomic
from doceval.results.comparison import CompareResult, _signed
from doceval.scoring.registry import LOWER_IS_BETTER


def plot_compare(result: CompareResult, path: str | Path) -> Path:
    """A PNG of each metric's change (new - baseline) with its paired 95% interval, around 0."""
    # lazy: start-up (matplotlib, ~0.5 s; only a compare that draws a plot needs it)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    out = Path(path)
    rows = list(reversed(result.rows))  # first metric on top
    fig = Figure(figsize=(8.5, 0.5 * len(rows) + 1.6), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.axvline(0.0, color="0.3", linewidth=1)
    span = 0.0
    for y, r in enumerate(rows):
        if r.change is None:
            ax.text(
                0.0, y, "n/a (not measured in both runs)", va="center", ha="center", color="0.45", fontsize=9
            )
            continue
        better = -r.change if r.metric in LOWER_IS_BETTER else r.change
        color = "tab:green" if better > 1e-12 else "tab:red" if better < -1e-12 else "0.4"
        lo, hi = r.ci if r.ci is not None else (r.change, r.change)
        ax.errorbar(
            [r.change],
            [y],
            xerr=[[max(r.change - lo, 0.0)], [max(hi - r.change, 0.0)]],
            fmt="o",
            color=color,
            ecolor=color,
            capsize=4,
            markersize=6,
        )
        ax.annotate(
            _signed(r.change) + (f" (no interval: {r.ci_note})" if r.ci is None and r.ci_note else ""),
            (r.change, y),
            textcoords="offset points",
            xytext=(0, 7),
            ha="center",
            fontsize=8,
            color=color,
        )
        span = max(span, abs(lo), abs(hi), abs(r.change))
    span = span * 1.15 if span > 0 else 0.05
    ax.set_xlim(-span, span)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r.metric + (" (lower=better)" if r.metric in LOWER_IS_BETTER else "") for r in rows])
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel("change (new - baseline), paired 95% interval")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(
        f"{Path(result.new_label).name} vs {Path(result.base_label).name} ({result.n_compared} entries)",
        fontsize=10,
    )
    fig.tight_layout()
    png = BytesIO()
    fig.savefig(png, format="png")
    write_bytes_atomic(out, png.getvalue())  # a regular file replaced whole, never a device or a FIFO
    return out
