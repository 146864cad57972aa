"""The report's "Refusal trade-off" section, from eval/tradeoff/tradeoff.json (doceval.harness.tradeoff) and the
floors artifact: the operating point in words, fallbacks, AUROC per library, the answerability signals side by
side, per-library against global floors, and refusals by out-of-scope kind."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from doceval.common.text import md_text
from doceval.scoring.registry import names
from doceval.summary import as_summary

OOS_KINDS = ("unindexed_library", "nonexistent_api", "off_topic")


def _f(v: Any, digits: int = 3) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"


def _ci(block: Mapping[str, Any] | None) -> str:
    if not block or block.get("auroc") is None:
        return "n/a"
    ci = block.get("ci95")
    return f"{block['auroc']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def tradeoff_lines(
    data: Mapping[str, Any], calibration: Mapping[str, Any] | None, summary: Mapping[str, Any]
) -> list[str]:
    out = ["", "## Refusal trade-off", ""]
    if calibration and calibration.get("operating_point"):
        out.append(f"Operating point: {calibration['operating_point']} (on the calibration split).")
    for lib, why in ((calibration or {}).get("fallback") or {}).items():
        out.append(f"- {lib} falls back to the global floor: {why}.")
    out += [
        "",
        "AUROC of the top retrieval score as an answerability detector (1 = every answerable question "
        "outscores every out-of-scope one; 0.5 = chance), with its 95% bootstrap interval: where no floor "
        "separates the two sides (Calibration above), how far apart they are. Then the operating point the "
        "floors give on test, over the entries that reach a floor (router refusals of unindexed libraries "
        "excluded; curves in `eval/tradeoff/tradeoff.png`):",
        "",
    ]
    chosen_metrics = names("tradeoff_curve")  # the operating point holds what the curves show
    out.append(
        "| library | floor | AUROC calibration | AUROC test | "
        + " | ".join(f"test {m}" for m in chosen_metrics)
        + " |"
    )
    out.append("| --- | ---: | --- | --- |" + " ---: |" * len(chosen_metrics))
    for name, block in data["libraries"].items():
        test = block.get("test") or {}
        chosen = test.get("chosen") or {}
        floor = "per library" if name == "(pooled)" else _f(block.get("floor"), 4)
        cells = " | ".join(_f(chosen.get(m)) for m in chosen_metrics)
        out.append(
            f"| {name} | {floor} | {_ci((block.get('calibration') or {}).get('top_score'))} | "
            f"{_ci(test.get('top_score'))} | {cells} |"
        )
    signals = data.get("signals") or {}
    if signals:
        out += [
            "",
            "Answerability signals, pooled (AUROC [95% CI]); `floors.signal` selects the one a floor applies to:",
            "",
        ]
        splits = list(signals)
        out.append("| signal | " + " | ".join(splits) + " |")
        out.append("| --- | " + " | ".join("---" for _ in splits) + " |")
        for sig in next(iter(signals.values())):
            out.append(f"| {sig} | " + " | ".join(_ci(signals[s].get(sig)) for s in splits) + " |")
    versus = data.get("per_library_vs_global")
    if versus:
        out += [
            "",
            f"Per-library floors against the global floor {versus['global_floor']:.4f} alone, on the same "
            "test entries (paired 95% interval of the change; p: exact McNemar or sign-flip, Holm-adjusted):",
            "",
        ]
        out.append("| metric | global floor | per-library floors | change (95% CI) | p (Holm) | n |")
        out.append("| --- | ---: | ---: | --- | ---: | ---: |")
        for r in versus["rows"]:
            ci, note = r.get("ci95"), r.get("ci_note")
            interval = f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else f" ({md_text(note)})" if note else ""
            change = "n/a" if r["change"] is None else f"{r['change']:+.3f}{interval}"
            out.append(
                f"| {r['metric']} | {_f(r['global'])} | {_f(r['per_library'])} | {change} | "
                f"{_f(r.get('p_holm'))} | {r['n']} |"
            )
    by_kind = as_summary(summary).metrics.breakdown("by_kind")
    kinds = [k for k in OOS_KINDS if k in by_kind]
    if kinds:
        out += [
            "",
            "Refusals by out-of-scope kind (test): a similarity floor cannot catch a plausible but "
            "nonexistent API of an indexed library, whose question reads like an answerable one:",
            "",
        ]
        out.append("| kind | refused_correctly | n |")
        out.append("| --- | ---: | ---: |")
        for k in kinds:
            out.append(f"| {k} | {_f(by_kind[k].get('refused_correctly'))} | {by_kind[k].get('n')} |")
    return out
