"""The report's "ANN vs exact" section, from ``eval/ann_vs_exact.json`` (doceval.stages.ann)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from doceval.common.text import md_text


def describe(record: Mapping[str, Any] | None) -> str:
    """One phrase for the report: ``exact`` or ``HNSW (m=16, ef_construct=100, hnsw_ef=64), scalar int8 ...``."""
    if not record:
        return "unknown (no search recorded)"
    if record.get("exact", True):
        return f"exact ({record.get('store', '?')})"
    parts = [f"m={record.get('m')}", f"ef_construct={record.get('ef_construct')}"]
    parts.append(f"hnsw_ef={record.get('hnsw_ef') or 'default'}")
    text = f"HNSW ({', '.join(parts)})"
    quant = record.get("quantization")
    if quant:
        label = "scalar int8" if quant == "scalar" else quant
        rescore = "rescored" if record.get("rescore", True) else "not rescored"
        text += f", {label} quantization ({rescore}, oversampling {record.get('oversampling') or 'default'})"
    return f"{text} ({record.get('store', '?')})"


def _num(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def ann_lines(data: Mapping[str, Any]) -> list[str]:
    lines = ["", "## ANN vs exact", ""]
    search = data.get("search")
    if data.get("exact") is None:
        return [*lines, f"Not applicable: {data.get('note', 'no index search')}."]
    if data.get("exact"):
        return [
            *lines,
            f"The configured search is {describe(search)}: nothing to compare. Set "
            "`store.search.exact=false` (with your `hnsw_ef`, quantization) to measure the search production "
            "runs against exact search.",
        ]
    k = data.get("k")
    lines += [
        f"Configured search: {describe(search)}, against exact search on the same index, split "
        f"`{data.get('split')}`, same floors; paired 95% intervals of configured - exact.",
        "",
        f"| metric@{k} | exact | configured | change | 95% CI | p | n |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in data.get("rows") or []:
        ci = row.get("ci95")
        interval = f"[{ci[0]:+.4f}, {ci[1]:+.4f}]" if ci else md_text(row.get("ci_note") or "-")
        p = "-" if row.get("p") is None else f"{row['p']:.3g}"
        lines.append(
            f"| {row['metric']} | {_num(row.get('exact'))} | {_num(row.get('configured'))} | "
            f"{_num(row.get('change'), signed=True)} | {interval} | {p} | {row.get('n')} |"
        )
    overlap = data.get("overlap_at_k") or {}
    lines += [
        "",
        f"Mean top-{k} overlap with exact search: {_num(overlap.get('mean'))} over {overlap.get('n')} entries.",
    ]
    return lines
