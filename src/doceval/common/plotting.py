"""The panel grid the per-library PNGs share (matplotlib, headless): up to three panels a row, unused cells
hidden, written once and closed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def panel_grid(n: int, path: Path, title: str, panel_height: float = 3.2) -> Iterator[list[Any]]:
    """Yields ``n`` axes in a grid of at most three columns; on exit hides the unused cells, sets the title and
    saves the figure to ``path``."""
    # lazy: start-up (matplotlib, ~0.5 s; only a run that draws a plot needs it)
    import matplotlib

    matplotlib.use("Agg")
    # lazy: as above, and pyplot only once the headless backend is chosen
    import matplotlib.pyplot as plt

    cols = max(1, min(3, n))
    rows = max(1, (n + cols - 1) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, panel_height * rows), squeeze=False)
    cells = list(axes.flat)
    try:
        yield cells[:n]
        for ax in cells[n:]:
            ax.axis("off")
        fig.suptitle(title)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
