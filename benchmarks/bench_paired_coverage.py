"""Coverage of the paired intervals where most differences are 0: the sign-flip interval against the BCa
bootstrap it replaced, for entries (compare's graded rows, per-library vs global floors, ANN vs exact) and for
conversations (memory benefit and leak).

    python benchmarks/bench_paired_coverage.py [--sets 2000] [--reference-sets 500] [--workers 2]

- **Entries** (``doceval.scoring.intervals.paired_change``, graded values): n pairs of reciprocal ranks at k = 5
  (values 0, 1/5, 1/4, 1/3, 1/2, 1; a base run with P = .25, .05, .05, .08, .12, .45). A share of the pairs
  differ; a differing pair is two different values, drawn with probability proportional to
  P(base) P(new) exp(lambda (new - base)), lambda solved so the mean difference is the effect. An effect needs
  |effect| <= 0.9 x share (a mean difference of 1 per differing pair would need every one to go from 0 to 1).
- **Conversations** (``doceval.scoring.conversations.cluster_paired_interval``): C conversations of 1-3 turns
  (uniform); a conversation's chance that a turn differs is Beta-distributed around the share with
  intra-conversation correlation 0.3; a differing turn of a 0/1 metric (hit_rate, version_correctness) moves
  by +1 or -1, +1 with probability (1 + effect / share) / 2, so the turn-weighted mean difference is the
  effect (|effect| <= share).
- **Coverage over the samples that print an interval.** Fewer than 5 differing units (entries, conversations)
  print "too few differing ..." instead; the share of samples that do is exact (a binomial tail: the number of
  differing units is Binomial(units, p), p the share, or for conversations the chance one has a differing
  turn, from Beta functions) and the same for every effect of a row. Samples are drawn given at least 5
  differing units, so every cell has ``--sets`` scored samples, however rare they are.
- Each interval is computed as the command does: 1,000 sign flips (``intervals.bootstrap``), seed 0, the
  same vectors for every sample of a cell (every vector up to 12 units); the old BCa with 1,000 resamples,
  seed = the sample's index, on ``--reference-sets`` samples of the same cells.

- **Stress, outside the targets**: a lumpy, skewed population of 172 reciprocal-rank pairs (22 differ: ten drops,
  three of them by 1, against twelve small gains; skewness -3.3), resampled at n = 43, 100, 172, 500: where the
  grid's smooth families do not reach, rare large changes that a sample may miss.

Targets: every row's mean over its effects >= 0.94; every cell >= 0.92; judged on the rows where at least 1%
of all samples print an interval (the others are shown in parentheses: there printing one at all selects
samples far from the truth). The benchmark reports; it exits 0 whether or not they are met.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.special import betaln
from scipy.stats import binom

from doceval.scoring.conversations import ClusterSettings, cluster_paired_interval
from doceval.scoring.intervals import MIN_DIFFERING, paired_change
from doceval.scoring.stats import bca_ci, cluster_bca_ci, sign_flip_interval

ALPHA = 0.05
N_FLIPS = 1000  # the default intervals.bootstrap: what compare and the conversations stage use
SEED = 0
EPS = 1e-9  # a bound equal to the true value up to float rounding counts as covering it
SHARES: tuple[float, ...] = (0.05, 0.10, 0.20, 0.35, 0.50)
EFFECTS: tuple[float, ...] = (-0.05, -0.02, -0.01, 0.0, 0.01, 0.02, 0.05)
ENTRY_SIZES: tuple[int, ...] = (20, 50, 172)
CONVERSATIONS: tuple[int, ...] = (12, 24, 48)
ROW_MIN, CELL_MIN = 0.94, 0.92
# A row is judged when at least this share of all its samples print an interval; below, printing one at all
# selects samples far from the truth (5 of 12 conversations differing where 1 is expected), which no interval
# calibrated on every sample covers, so the row is shown in parentheses.
JUDGED_MIN = 0.01

LEVELS = np.array([0.0, 1 / 5, 1 / 4, 1 / 3, 1 / 2, 1.0])  # reciprocal ranks at k = 5
BASE_P = np.array([0.25, 0.05, 0.05, 0.08, 0.12, 0.45])
MAX_ENTRY_RATIO = 0.9
ICC = 0.3
TURNS = np.array([1, 2, 3])
# The stress population's differing pairs (the other 150 of its 172 pairs are equal): new - base.
STRESS_DIFFS = np.array([-1.0, -1.0, -1.0, -0.75, -0.5, -0.5, -0.5, -0.5, -0.2, -1 / 6, -1 / 12,
                         0.05, 1 / 12, 1 / 12, 2 / 15, 0.25, 0.25, 0.3, 0.3, 0.3, 0.5, 0.5])  # fmt: skip
STRESS_SIZES = (43, 100, 172, 500)

Cell = tuple[str, int, float, float, int, int]  # (design, units, share, effect, sets, reference sets)


@dataclass
class Result:
    coverage: float | None  # None: the effect is not reachable at this share
    width: float | None  # median width
    ref_coverage: float | None
    ref_width: float | None


def covers(ci: np.ndarray, truth: float) -> np.ndarray:
    return np.asarray((ci[:, 0] <= truth + EPS) & (ci[:, 1] >= truth - EPS))


def feasible(design: str, share: float, effect: float) -> bool:
    return abs(effect) <= (MAX_ENTRY_RATIO if design == "entries" else 1.0) * share + 1e-12


# ---------------------------------------------------------------------------------------------- entries


def pair_law(mean_difference: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(base values, new values, probabilities) of a differing pair, tilted to the given mean difference."""
    b, w = np.meshgrid(np.arange(LEVELS.size), np.arange(LEVELS.size), indexing="ij")
    off = b != w
    base, new = LEVELS[b[off]], LEVELS[w[off]]
    weight = (BASE_P[b] * BASE_P[w])[off]

    def tilted(lam: float) -> np.ndarray:
        p = weight * np.exp(lam * (new - base))
        return np.asarray(p / p.sum())

    lam = 0.0
    if mean_difference != 0.0:
        lam = brentq(lambda x: float(tilted(x) @ (new - base)) - mean_difference, -200.0, 200.0)
    return base, new, tilted(lam)


def differing_count(units: int, p: float, sets: int, rng: np.random.Generator) -> np.ndarray:
    """The number of differing units of each sample, Binomial(units, p) given >= MIN_DIFFERING."""
    ks = np.arange(MIN_DIFFERING, units + 1)
    pk = binom.pmf(ks, units, p)
    return np.asarray(rng.choice(ks, size=sets, p=pk / pk.sum()))


def entry_samples(n: int, share: float, effect: float, sets: int, rng: np.random.Generator) -> np.ndarray:
    """``sets`` samples of n paired (base, new) values, shape (sets, 2, n), each with >= 5 differing pairs."""
    base_d, new_d, p_d = pair_law(effect / share)
    k = differing_count(n, share, sets, rng)
    same = rng.choice(LEVELS, size=(sets, n), p=BASE_P)
    pick = rng.choice(p_d.size, size=(sets, n), p=p_d)
    differs = np.arange(n)[None, :] < k[:, None]
    differs = rng.permuted(differs, axis=1)
    base = np.where(differs, base_d[pick], same)
    new = np.where(differs, new_d[pick], same)
    return np.stack([base, new], axis=1)


# ---------------------------------------------------------------------------------------- conversations


def beta_params(share: float) -> tuple[float, float]:
    total = 1.0 / ICC - 1.0
    return share * total, (1.0 - share) * total


def conversation_differs(share: float) -> float:
    """P(a conversation has a differing turn) = 1 - E over turn counts m of E[(1 - q)^m], q ~ Beta."""
    a, b = beta_params(share)
    stays = [np.exp(betaln(a, b + m) - betaln(a, b)) for m in TURNS]
    return 1.0 - float(np.mean(stays))


def conversation_pool(
    share: float, effect: float, count: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``count`` conversations drawn independently: (summed turn differences, turns, has a differing turn)."""
    a, b = beta_params(share)
    turns = rng.choice(TURNS, size=count)
    q = rng.beta(a, b, size=count)
    differs = (rng.random((count, TURNS.max())) < q[:, None]) & (
        np.arange(TURNS.max())[None, :] < turns[:, None]
    )
    up = rng.random((count, TURNS.max())) < (1.0 + effect / share) / 2.0
    sums = (differs * np.where(up, 1.0, -1.0)).sum(axis=1)
    return sums, turns.astype(np.float64), differs.any(axis=1)


def conversation_samples(
    c: int, share: float, effect: float, sets: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``sets`` samples of c conversations (sums, turns), each with >= 5 differing conversations: the number
    that differ from its binomial tail, the conversations themselves from pools split by whether they differ."""
    k = differing_count(c, conversation_differs(share), sets, rng)
    need = {True: int(k.sum()), False: int((c - k).sum())}
    pools: dict[bool, list[tuple[np.ndarray, np.ndarray]]] = {True: [], False: []}
    have = {True: 0, False: 0}
    while any(have[key] < need[key] for key in need):
        sums, turns, differs = conversation_pool(share, effect, 4 * sets * c, rng)
        for key in (True, False):
            pools[key].append((sums[differs == key], turns[differs == key]))
            have[key] += int((differs == key).sum())
    joined = {key: (np.concatenate([s for s, _ in pools[key]]), np.concatenate([t for _, t in pools[key]]))
              for key in pools}  # fmt: skip
    sums, turns = np.empty((sets, c)), np.empty((sets, c))
    taken = {True: 0, False: 0}
    for r in range(sets):
        parts = []
        for key, size in ((True, int(k[r])), (False, c - int(k[r]))):
            s, t = joined[key]
            parts.append((s[taken[key] : taken[key] + size], t[taken[key] : taken[key] + size]))
            taken[key] += size
        order = rng.permutation(c)
        sums[r] = np.concatenate([p[0] for p in parts])[order]
        turns[r] = np.concatenate([p[1] for p in parts])[order]
    return sums, turns


# ------------------------------------------------------------------------------------------------ cells


def run_cell(cell: Cell) -> Result:
    design, units, share, effect, sets, ref_sets = cell
    if not feasible(design, share, effect):
        return Result(None, None, None, None)
    rng = np.random.default_rng((SEED, units, round(share * 1000), round(effect * 1000) + 1000))
    if design == "entries":
        pairs = entry_samples(units, share, effect, sets, rng)
        sums, counts = pairs[:, 1] - pairs[:, 0], None
        check_entries(pairs[:3])
    else:
        sums, counts = conversation_samples(units, share, effect, sets, rng)
        check_conversations(sums[:3], counts[:3])
    ci = sign_flip_interval(sums, counts, n_flips=N_FLIPS, seed=SEED, alpha=ALPHA)
    ci = np.clip(ci, -1.0, 1.0)
    ref = np.array([reference(sums[i], None if counts is None else counts[i], i) for i in range(ref_sets)])
    return Result(
        float(covers(ci, effect).mean()),
        float(np.median(ci[:, 1] - ci[:, 0])),
        float(covers(ref, effect).mean()) if ref_sets else None,
        float(np.median(ref[:, 1] - ref[:, 0])) if ref_sets else None,
    )


def reference(sums: np.ndarray, counts: np.ndarray | None, i: int) -> tuple[float, float]:
    """The interval the code gave before: BCa over entries, cluster BCa over conversations."""
    if counts is None:
        ci = bca_ci(sums, n_boot=1000, seed=i, alpha=ALPHA)
    else:
        ci = cluster_bca_ci(sums, counts, n_boot=1000, seed=i, alpha=ALPHA)
    assert ci is not None
    return ci


def check_entries(pairs: np.ndarray) -> None:
    """The vectorised call gives what paired_change gives for the same sample (non-binary ones)."""
    for base, new in pairs:
        change = paired_change(base, new, n_boot=N_FLIPS, seed=SEED)
        if change.method == "sign-flip":
            expected = np.clip(sign_flip_interval(new - base, n_flips=N_FLIPS, seed=SEED), -1, 1)[0]
            assert change.ci is not None and np.allclose(change.ci, expected), (change, expected)


def check_conversations(sums: np.ndarray, counts: np.ndarray) -> None:
    """... and what the memory figures' cluster_paired_interval gives."""
    settings = ClusterSettings(n_boot=N_FLIPS, seed=SEED)
    for s, t in zip(sums, counts, strict=True):
        diffs = [
            np.r_[np.full(int(abs(v)), np.sign(v)), np.zeros(int(n - abs(v)))]
            for v, n in zip(s, t, strict=True)
        ]
        paired = cluster_paired_interval(diffs, settings)
        expected = np.clip(sign_flip_interval(s, t, n_flips=N_FLIPS, seed=SEED), -1, 1)[0]
        if paired.ci is not None:  # a conversation whose differing turns cancel counts as differing in both
            assert np.allclose(paired.ci, expected), (paired, expected)


# ---------------------------------------------------------------------------------------------- report


def too_few_share(design: str, units: int, share: float) -> float:
    p = share if design == "entries" else conversation_differs(share)
    return float(binom.cdf(MIN_DIFFERING - 1, units, p))


def _row_text(
    units: int, share: float, values: list[float | None], few: float, width: float, judged: bool
) -> str:
    shown = [v for v in values if v is not None]
    fmt = "{:>8.3f}" if judged else "({:.3f})"
    cells = "".join(f"{'-':>8}" if v is None else f"{fmt.format(v):>8}" for v in values)
    return f"{units:>4} {share:>6.2f}{cells}{fmt.format(float(np.mean(shown))):>8}{few:>9.3f}{width:>7.3f}"


def grid_lines(
    design: str,
    sizes: Sequence[int],
    results: dict[tuple[int, float, float], Result],
    sets: int,
    ref_sets: int,
) -> tuple[list[str], list[str]]:
    """The coverage table of one design, the old interval's, and the missed targets. A row where fewer than
    JUDGED_MIN of all samples print an interval is shown in parentheses and not judged."""
    unit = "n" if design == "entries" else "C"
    head = (
        f"{unit:>4} {'share':>6}"
        + "".join(f"{e:>+8.2f}" for e in EFFECTS)
        + f"{'mean':>8}{'too few':>9}{'width':>7}"
    )
    old = "old cluster BCa" if design == "conversations" else "old BCa"
    lines = [f"sign-flip interval: coverage over {sets} samples that print an interval", head]
    ref_lines = [f"{old} (reference): coverage over {ref_sets} of the same samples", head]
    missed: list[str] = []
    for units in sizes:
        for share in SHARES:
            row = [results[(units, share, e)] for e in EFFECTS]
            few = too_few_share(design, units, share)
            judged = 1.0 - few >= JUDGED_MIN
            new_values = [r.coverage for r in row]
            new_width = float(np.median([r.width for r in row if r.width is not None]))
            ref_width = float(np.median([r.ref_width for r in row if r.ref_width is not None]))
            lines.append(_row_text(units, share, new_values, few, new_width, judged))
            ref_lines.append(_row_text(units, share, [r.ref_coverage for r in row], few, ref_width, judged))
            shown = [v for v in new_values if v is not None]
            where = f"{design} {unit}={units} share {share:.2f}"
            if judged and np.mean(shown) < ROW_MIN:
                missed.append(f"{where}: row mean {np.mean(shown):.3f}")
            if judged:
                missed += [f"{where} effect {e:+.2f}: {v:.3f}"
                           for e, v in zip(EFFECTS, new_values, strict=True) if v is not None and v < CELL_MIN]  # fmt: skip
    return [*lines, "", *ref_lines], missed


def stress_lines(sets: int, ref_sets: int) -> list[str]:
    """Coverage on the stress population, given >= 5 differing pairs (drawn by rejection), beside the old BCa."""
    population = np.r_[STRESS_DIFFS, np.zeros(172 - STRESS_DIFFS.size)]
    truth = float(population.mean())
    lines = ["", f"== stress (outside the targets): 172 pairs, 22 differing, mean {truth:+.4f}, skewness "
             f"{((population - truth) ** 3).mean() / population.std() ** 3:.1f}",
             f"{'n':>4}{'sign-flip':>11}{'old BCa':>9}{'too few':>9}{'width':>7}"]  # fmt: skip
    for n in STRESS_SIZES:
        rng = np.random.default_rng((SEED, 7, n))
        draws = population[rng.integers(0, population.size, size=(4 * sets, n))]
        printed = draws[np.count_nonzero(draws, axis=1) >= MIN_DIFFERING][:sets]
        few = float(binom.cdf(MIN_DIFFERING - 1, n, STRESS_DIFFS.size / population.size))
        ci = np.clip(sign_flip_interval(printed, n_flips=N_FLIPS, seed=SEED, alpha=ALPHA), -1.0, 1.0)
        ref = np.array([reference(printed[i], None, i) for i in range(ref_sets)])
        width = float(np.median(ci[:, 1] - ci[:, 0]))
        ref_cov = float(covers(ref, truth).mean()) if ref_sets else float("nan")
        lines.append(f"{n:>4}{covers(ci, truth).mean():>11.3f}{ref_cov:>9.3f}{few:>9.3f}{width:>7.3f}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=2000, help="scored samples per cell")
    parser.add_argument("--reference-sets", type=int, default=500, help="samples per cell for the old BCa")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args()
    t0 = time.perf_counter()
    designs = (("entries", ENTRY_SIZES), ("conversations", CONVERSATIONS))
    cells: list[Cell] = [(d, u, s, e, args.sets, args.reference_sets)
                         for d, sizes in designs for u in sizes for s in SHARES for e in EFFECTS]  # fmt: skip
    with ProcessPoolExecutor(max_workers=args.workers) as pool:  # cells are seeded: any worker count agrees
        done = dict(zip(cells, pool.map(run_cell, cells, chunksize=4), strict=True))
    print(f"machine: {platform.platform()}, {os.cpu_count()} cpus, python {platform.python_version()}, "
          f"numpy {np.__version__}; {args.workers} workers, {time.perf_counter() - t0:.0f} s")  # fmt: skip
    print(f"nominal {1 - ALPHA:.0%}; Monte Carlo s.e. of a coverage of 0.95 over {args.sets} samples: "
          f"{np.sqrt(0.05 * 0.95 / args.sets):.4f}; '-': effect not reachable at that share")  # fmt: skip
    print(
        "too few: share of all samples printing 'too few differing ...' (fewer than 5 differ), the same for"
    )
    print("every effect of the row; width: median width of the printed intervals over the row")
    all_missed: list[str] = []
    for design, sizes in designs:
        title = ("entries: n paired reciprocal ranks" if design == "entries"
                 else f"conversations: C conversations of 1-3 turns, intra-conversation correlation {ICC}")  # fmt: skip
        results = {(u, s, e): done[(design, u, s, e, args.sets, args.reference_sets)]
                   for u in sizes for s in SHARES for e in EFFECTS}  # fmt: skip
        lines, missed = grid_lines(design, sizes, results, args.sets, args.reference_sets)
        print("", f"== {title}", *lines, sep="\n")
        all_missed += missed
    print(*stress_lines(args.sets, args.reference_sets), sep="\n")
    print()
    print(f"targets (the sign-flip interval): every row mean >= {ROW_MIN}, every cell >= {CELL_MIN}, on rows")
    print(
        f"  where >= {JUDGED_MIN:.0%} of all samples print an interval; (in parentheses): a row below that, shown, not judged"
    )
    if all_missed:
        print("missed:", *(f"  - {m}" for m in all_missed), sep="\n")
        print("TARGETS: missed")
    else:
        print("TARGETS: all met")


if __name__ == "__main__":
    main()
