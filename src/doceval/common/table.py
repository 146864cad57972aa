"""Terminal tables sized to their content: every column as wide as its widest cell (header included), so a
metric name or an interval is never cut ("refused_co", "overrefusal_rat" were). Used by the headline, compare,
history and sweep tables. Standard library only."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["format_table"]


def format_table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    left: Sequence[int] = (0,),
    gap: int = 2,
    rule: bool = True,
) -> list[str]:
    """The table's lines: the header, a rule of dashes (``rule``), then one line per row. Columns whose index
    is in ``left`` are left-aligned (names, intervals), the rest right-aligned (numbers); ``gap`` spaces
    between columns; trailing spaces stripped. A row shorter than the header is padded with empty cells."""
    ncols = len(header)
    padded = [[*row, *([""] * (ncols - len(row)))] for row in rows]
    if any(len(row) > ncols for row in padded):
        raise ValueError(f"a row has more cells than the header's {ncols}")
    widths = [max(len(str(r[i])) for r in [list(header), *padded]) for i in range(ncols)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            str(c).ljust(w) if i in left else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return (" " * gap).join(parts).rstrip()

    lines = [line(header)]
    if rule:
        lines.append((" " * gap).join("-" * w for w in widths))
    lines += [line(r) for r in padded]
    return lines
