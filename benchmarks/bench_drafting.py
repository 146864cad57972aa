"""`doceval golden draft` measured, not claimed (issue 45): time to draft, recall, precision, ranking agreement.

    python benchmarks/bench_drafting.py [--docs data/docs] [--index data/index] [--cache data/cache]
        [--floors eval/calibration/floors.json] [--skip-ranking] [--boot 2000] [--coverage 200]
        [--write-pairs] [--write-audit]

- **Time** to draft the default corpus (every difference, no --max), wall clock, on this machine.
- **Recall** against ``benchmarks/drafting/v2.1_trap_pairs.jsonl``, derived mechanically from v2.1's
  ``version_trap`` entries (:func:`derive_pairs`: each entry's expected names E, from ``expected_apis`` and
  every ``expected_any`` alternative, and forbidden names F, each read as the API it names; entries with both
  non-empty). An item is recalled when one reported difference of its library links a name of E with a name
  of F (its old and new names, either way round; names compared on their last dotted component). The list is
  checked against a fresh derivation first: a changed v2.1 means regenerating it (``--write-pairs``).
- **Precision** from the seeded audit sheet ``benchmarks/drafting/audit_sheet.jsonl`` (``--write-audit``: 60
  drafts of the default corpus, `golden review --sample 60 --seed 45`), filled by two reviewers who did not
  write the drafter as ``audit_<reviewer>.jsonl`` beside it: per reviewer, the share of OK + MINOR verdicts
  with the audit's Wilson interval (``doceval.results.audit``), and both reviewers' agreement. Until two
  sheets are filled, precision is "not measured".
- **Ranking**: 11 configurations (retriever x k, floors, the extractive agent's version strings) evaluated on
  v2.1's test split and on the test split of a drafted set of similar size; Kendall's tau-b between the two
  orders of the configurations by hit_rate and by version_correctness, with a percentile bootstrap interval
  resampling the entries of both sets, whose coverage is checked here by simulation (``--coverage`` sets drawn
  from the observed entries, the interval built on each, the share that holds the observed tau).

The index and the embedding cache are copied to a scratch folder first: nothing under --docs/--index/--cache
is written.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from doceval import api
from doceval.drafting.differences import Difference
from doceval.drafting.review import review_rows
from doceval.drafting.run import DraftOptions, DraftResult, draft_golden
from doceval.inputs.doc_examples import api_name
from doceval.inputs.golden import parse_golden
from doceval.inputs.marks import api_names

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PAIRS = HERE / "drafting" / "v2.1_trap_pairs.jsonl"
AUDIT = HERE / "drafting" / "audit_sheet.jsonl"
V21 = ROOT / "data" / "golden" / "v2.1.jsonl"
AUDIT_SIZE, AUDIT_SEED = 60, 45
RANKING_SEED, RANKING_MAX = 7, 40  # the drafted set compared with v2.1 (--max per kind per library)
CONFIGS: list[tuple[str, list[str]]] = [
    *((f"{r} k={k}", [f"retriever={r}", f"k={k}", "floors=zero"]) for r in ("overlap", "bm25", "dense", "hybrid")
      for k in (3, 10)),
    ("dense k=5 floor 0.3", ["retriever=dense", "k=5", "floors=zero", "floors.global=0.3"]),
    ("dense k=5 floor 0.5", ["retriever=dense", "k=5", "floors=zero", "floors.global=0.5"]),
    ("dense k=5 calibrated floors", ["retriever=dense", "k=5", "floors=calibrated"]),
]  # fmt: skip


# ------------------------------------------------------------------------------------------------- recall
def names_of(strings: Sequence[str]) -> list[str]:
    """The API each version string names (``.dict(`` -> dict, ``Base = declarative_base(`` ->
    declarative_base, ``pattern=`` -> pattern), by the scope checks' and grading rule's own readings."""
    out: list[str] = []
    for s in strings:
        for candidate in api_names(s)[::-1]:
            name = api_name(candidate)
            if name:
                out.append(name)
                break
    return sorted(dict.fromkeys(out))


def derive_pairs(golden: Path) -> list[dict[str, Any]]:
    """One item per v2.1 ``version_trap`` entry with expected and forbidden names."""
    items = []
    for line in golden.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec.get("kind") != "version_trap":
            continue
        expected = names_of([*rec["expected_apis"], *(a for g in rec.get("expected_any", []) for a in g)])
        forbidden = names_of(rec["forbidden_apis"])
        if expected and forbidden:
            items.append({"id": rec["id"], "library": rec["library"], "version": rec["version"],
                          "expected": expected, "forbidden": forbidden})  # fmt: skip
    return items


def _same(a: str, b: str) -> bool:
    return bool(a) and bool(b) and a.rsplit(".", 1)[-1].casefold() == b.rsplit(".", 1)[-1].casefold()


def links(diff: Difference) -> list[tuple[str, str]]:
    """The (old, new) name pairs a difference links."""
    pairs = [(diff.old, diff.new)]
    pairs += [(diff.old, part) for part in diff.new_path.split(".") if part and not part.startswith("_")]
    if diff.kind == "added" and diff.alternative:
        pairs.append((diff.alternative, diff.new))
    return [(a, b) for a, b in pairs if a and b and not _same(a, b)]


def recall(items: Sequence[dict[str, Any]], differences: Sequence[Difference]) -> dict[str, Any]:
    by_library: dict[str, list[tuple[str, str]]] = {}
    for d in differences:
        by_library.setdefault(d.library, []).extend(links(d))
    hits: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    missed = []
    for item in items:
        lib = item["library"]
        totals[lib] += 1
        found = any((_same(a, e) and _same(b, f)) or (_same(a, f) and _same(b, e))
                    for a, b in by_library.get(lib, []) for e in item["expected"] for f in item["forbidden"])  # fmt: skip
        hits[lib] += found
        if not found:
            missed.append(item["id"])
    return {"by_library": {lib: [hits[lib], totals[lib]] for lib in sorted(totals)},
            "total": [sum(hits.values()), sum(totals.values())], "missed": missed}  # fmt: skip


# ---------------------------------------------------------------------------------------------- precision
def reviewer_sheets() -> list[Path]:
    """The reviewers' filled copies of the audit sheet (``audit_<reviewer>.jsonl``), never the blank sheet itself."""
    return sorted(p for p in AUDIT.parent.glob("audit_*.jsonl") if p != AUDIT)


def precision(sheets: Sequence[Path]) -> dict[str, Any] | None:
    """Per filled sheet: OK + MINOR share and its Wilson interval; with two, their agreement on WRONG."""
    # lazy: the results package loads numpy-heavy modules only when sheets are filled
    from doceval.results.audit import summarise
    from doceval.scoring.agreement import cohen_kappa

    if len(sheets) < 2:
        return None
    blank = [json.loads(line)["id"] for line in AUDIT.read_text(encoding="utf-8").splitlines()]
    out: dict[str, Any] = {"reviewers": {}}
    verdicts = {}
    for sheet in sheets:
        rows = [json.loads(line) for line in sheet.read_text(encoding="utf-8").splitlines() if line.strip()]
        if sorted(r["id"] for r in rows) != sorted(blank) or any(r.get("verdict") is None for r in rows):
            raise SystemExit(f"{sheet}: every row of {AUDIT.name} needs a verdict (OK, MINOR, WRONG)")
        summary = summarise(rows)
        wrong = summary["wrong_rate"]
        out["reviewers"][sheet.stem.removeprefix("audit_")] = {
            "n": len(rows), "precision": 1 - wrong, "ci95": [1 - summary["wrong_ci95"][1], 1 - summary["wrong_ci95"][0]],
            "verdicts": dict(Counter(r["verdict"] for r in rows)),
        }  # fmt: skip
        verdicts[sheet.stem] = {r["id"]: r["verdict"] == "WRONG" for r in rows}
    a, b = list(verdicts.values())[:2]
    ids = sorted(a)
    out["agreement"] = sum(a[i] == b[i] for i in ids) / len(ids)
    out["kappa"] = cohen_kappa([a[i] for i in ids], [b[i] for i in ids])
    return out


def write_audit(result: DraftResult, out: Path) -> None:
    """The seeded sheet: `golden review --sample AUDIT_SIZE --seed AUDIT_SEED` over the default corpus's drafts."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "d.jsonl"
        path.write_text("".join(json.dumps(d.record) + "\n" for d in result.drafts), encoding="utf-8")
        rows = review_rows(parse_golden(path, allow_drafts=True), AUDIT_SIZE, AUDIT_SEED)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


# ------------------------------------------------------------------------------------------------ ranking
def tau_b(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b between the columns of x and y, row by row (rows: replicates; columns: configs)."""
    i, j = np.triu_indices(x.shape[1], k=1)
    dx, dy = np.sign(x[:, i] - x[:, j]), np.sign(y[:, i] - y[:, j])
    n0 = len(i)
    denom = np.sqrt((n0 - (dx == 0).sum(axis=1)) * (n0 - (dy == 0).sum(axis=1)))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (dx * dy).sum(axis=1) / denom, np.nan)


def _means(m: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Per replicate (rows of idx), each configuration's mean over the resampled entries (NaN: not scored)."""
    picked = m[:, idx]  # configs x replicates x entries
    return np.nanmean(picked, axis=2).T


def tau_interval(a: np.ndarray, b: np.ndarray, boot: int, rng: np.random.Generator) -> tuple[float, float]:
    ia = rng.integers(0, a.shape[1], (boot, a.shape[1]))
    ib = rng.integers(0, b.shape[1], (boot, b.shape[1]))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a replicate where every configuration ties: no tau
        taus = tau_b(_means(a, ia), _means(b, ib))
        lo, hi = np.nanpercentile(taus, [2.5, 97.5])
    return float(lo), float(hi)


def coverage(a: np.ndarray, b: np.ndarray, sets: int, boot: int, seed: int) -> float:
    """Share of simulated sets (entries drawn from the observed ones) whose interval holds the observed tau."""
    rng = np.random.default_rng(seed)
    truth = float(tau_b(np.nanmean(a, axis=1)[None], np.nanmean(b, axis=1)[None])[0])
    held = 0
    for _ in range(sets):
        sa = a[:, rng.integers(0, a.shape[1], a.shape[1])]
        sb = b[:, rng.integers(0, b.shape[1], b.shape[1])]
        lo, hi = tau_interval(sa, sb, boot, rng)
        held += lo <= truth <= hi
    return held / sets


def scores(summary: dict[str, Any], metric: str) -> list[float]:
    return [
        np.nan if e["scores"].get(metric) is None else float(e["scores"][metric]) for e in summary["entries"]
    ]


def ranking(
    golden_sets: dict[str, Path], paths: list[str], boot: int, sets: int, floors: Path
) -> dict[str, Any]:
    matrices: dict[str, dict[str, list[list[float]]]] = {name: {"hit_rate": [], "version_correctness": []}
                                                         for name in golden_sets}  # fmt: skip
    means: dict[str, dict[str, dict[str, float]]] = {}
    for label, overrides in CONFIGS:
        calibrated = [f"floors.path={floors}"] if "floors=calibrated" in overrides else []
        for name, golden in golden_sets.items():
            summary = api.evaluate(
                golden, split="test", overrides=[*overrides, *calibrated, *paths], allow_drafts=True
            )
            for metric in matrices[name]:
                matrices[name][metric].append(scores(summary, metric))
                means.setdefault(label, {}).setdefault(name, {})[metric] = summary["metrics"][metric]
        print(f"  evaluated {label}", file=sys.stderr, flush=True)
    out: dict[str, Any] = {"configs": means, "n": {}}
    rng = np.random.default_rng(RANKING_SEED)
    first, second = list(golden_sets)
    for metric in ("hit_rate", "version_correctness"):
        a, b = np.array(matrices[first][metric]), np.array(matrices[second][metric])
        a, b = a[:, ~np.isnan(a).all(axis=0)], b[:, ~np.isnan(b).all(axis=0)]
        observed = float(tau_b(np.nanmean(a, axis=1)[None], np.nanmean(b, axis=1)[None])[0])
        out[metric] = {"tau_b": observed, "ci95": tau_interval(a, b, boot, rng),
                       "coverage": coverage(a, b, sets, max(200, boot // 5), RANKING_SEED) if sets else None}  # fmt: skip
        out["n"][metric] = [a.shape[1], b.shape[1]]
    return out


# -------------------------------------------------------------------------------------------------- main
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=Path, default=ROOT / "data" / "docs")
    p.add_argument("--index", type=Path, default=ROOT / "data" / "index")
    p.add_argument("--cache", type=Path, default=ROOT / "data" / "cache")
    p.add_argument("--floors", type=Path, default=ROOT / "eval" / "calibration" / "floors.json")
    p.add_argument("--boot", type=int, default=2000)
    p.add_argument(
        "--coverage", type=int, default=200, help="simulated sets for the interval's coverage (0: skip)"
    )
    p.add_argument("--skip-ranking", action="store_true")
    p.add_argument("--write-pairs", action="store_true", help=f"rewrite {PAIRS.name} from v2.1")
    p.add_argument("--write-audit", action="store_true", help=f"rewrite {AUDIT.name} (the blank sheet)")
    p.add_argument("--json", type=Path, help="also write every figure here")
    args = p.parse_args()
    if not (args.docs / "corpus.jsonl").is_file():
        sys.exit(f"{args.docs}: no built corpus (dvc repro docs); nothing measured")
    figures: dict[str, Any] = {
        "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
    }
    pairs = derive_pairs(V21)
    if args.write_pairs:
        PAIRS.write_text("".join(json.dumps(i) + "\n" for i in pairs), encoding="utf-8")
    committed = [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines()]
    if committed != pairs:
        sys.exit(f"{PAIRS}: differs from v2.1's version traps; rerun with --write-pairs and commit it")
    with tempfile.TemporaryDirectory(prefix="bench-drafting-") as tmp:
        started = time.perf_counter()
        full = draft_golden(DraftOptions(args.docs, Path(tmp) / "all.jsonl"))
        figures["time_s"] = time.perf_counter() - started
        figures["counts"] = {"differences": dict(Counter(d.kind for d in full.differences)),
                             "drafts": len(full.drafts), "dropped": dict(full.dropped)}  # fmt: skip
        figures["recall"] = recall(committed, full.differences)
        if args.write_audit:
            write_audit(full, AUDIT)
        figures["precision"] = precision(reviewer_sheets())
        if not args.skip_ranking:
            figures["ranking"] = _ranking(args, Path(tmp))
    print(format_figures(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n", encoding="utf-8")


def _ranking(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    drafted = tmp / "ranking.jsonl"
    result = draft_golden(DraftOptions(args.docs, drafted, seed=RANKING_SEED, max_per_kind=RANKING_MAX))
    shutil.copytree(args.index, tmp / "index", symlinks=False)
    (tmp / "cache").mkdir()
    if (args.cache / "embeddings.sqlite").is_file():
        shutil.copy2(args.cache / "embeddings.sqlite", tmp / "cache" / "embeddings.sqlite")
    paths = [f"paths.docs={args.docs}", f"paths.index={tmp / 'index'}", f"paths.cache={tmp / 'cache'}",
             f"paths.runs={tmp / 'runs'}", f"paths.eval={tmp / 'eval'}"]  # fmt: skip
    out = ranking({"v2.1": V21, "drafted": drafted}, paths, args.boot, args.coverage, args.floors)
    out["drafted_set"] = {"seed": RANKING_SEED, "max": RANKING_MAX, "entries": len(result.drafts)}
    return out


def format_figures(f: dict[str, Any]) -> str:
    c = f["counts"]
    lines = [f"machine: {f['machine']}",
             f"time to draft the default corpus: {f['time_s']:.1f} s wall ({sum(c['differences'].values())} "
             f"differences {c['differences']}; {c['drafts']} drafts written; dropped by the validator: {c['dropped']})"]  # fmt: skip
    r = f["recall"]
    per = ", ".join(f"{lib} {h}/{n}" for lib, (h, n) in r["by_library"].items())
    lines.append(f"recall vs v2.1's version-trap pairs: {r['total'][0]}/{r['total'][1]} = "
                 f"{r['total'][0] / r['total'][1]:.3f} ({per}); missed: {', '.join(r['missed'])}")  # fmt: skip
    prec = f["precision"]
    if prec is None:
        lines.append(f"precision: not measured (the sheet {AUDIT.name} awaits two reviewers' verdicts)")
    else:
        for who, p in prec["reviewers"].items():
            lines.append(
                f"precision ({who}): {p['precision']:.3f} [{p['ci95'][0]:.3f}, {p['ci95'][1]:.3f}] n={p['n']} {p['verdicts']}"
            )
        lines.append(f"reviewers agree on WRONG/not: {prec['agreement']:.3f}, kappa {prec['kappa']}")
    rank = f.get("ranking")
    if rank:
        lines.append(f"ranking: {len(CONFIGS)} configurations on v2.1 test vs a drafted test split "
                     f"(seed {rank['drafted_set']['seed']}, --max {rank['drafted_set']['max']})")  # fmt: skip
        for metric in ("hit_rate", "version_correctness"):
            m = rank[metric]
            cov = "coverage not checked"
            if m["coverage"] is not None:
                cov = f"simulated coverage of the 95% interval {m['coverage']:.3f}"
                cov += ", below 0.94: read the interval as too narrow" if m["coverage"] < 0.94 else ""
            lines.append(f"  {metric}: Kendall tau-b {m['tau_b']:.3f} [{m['ci95'][0]:.3f}, {m['ci95'][1]:.3f}] "
                         f"(entries {rank['n'][metric][0]} vs {rank['n'][metric][1]}; {cov})")  # fmt: skip
        lines.append(
            "  config                         hit_rate v2.1 / drafted   version_correctness v2.1 / drafted"
        )
        for label, by_set in rank["configs"].items():
            hv, hd = by_set["v2.1"]["hit_rate"], by_set["drafted"]["hit_rate"]
            vv, vd = by_set["v2.1"]["version_correctness"], by_set["drafted"]["version_correctness"]
            lines.append(f"  {label:30s} {hv:.3f} / {hd:.3f}             {vv:.3f} / {vd:.3f}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
