"""Single-rate uncertainty: Wilson score intervals and the task-cluster bootstrap.

The Wilson interval is statsmodels' `proportion_confint(method="wilson")`, computed here with the
same critical value (`scipy.special.ndtri`, which `scipy.stats.norm.isf` calls) and the same
floating-point steps, so it returns the same floats (`tests/test_stats.py` compares them bit for
bit): every scoreboard needs it, and importing statsmodels costs about 2 s of a command that
otherwise scores a wave in a few. The bootstrap resamples with a `numpy.random.Generator`
(PCG64, seeded).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

NAN = float("nan")


# z(1 - alpha/2) at the boards' level, as `-scipy.special.ndtri(0.025)` returns it: importing
# scipy.special costs about 0.3 s of CPU, as much as the rest of a board build, for one number.
# `tests/test_stats.py` checks every Wilson bound at this level against statsmodels bit for bit.
_CRITICAL = {0.05: 1.9599639845400545}


@lru_cache(maxsize=8)
def _critical(alpha: float) -> float:
    """z(1 - alpha/2), as `scipy.stats.norm.isf(alpha / 2)` computes it."""
    if alpha in _CRITICAL:
        return _CRITICAL[alpha]
    from scipy.special import ndtri  # scipy.special alone: a tenth of scipy.stats' import time

    return float(-ndtri(alpha / 2))


def wilson(successes: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson score interval for successes/n at level 1 - alpha, clipped to [0, 1].

    statsmodels' `proportion_confint(successes, n, alpha, method="wilson")`, step for step (see the
    module docstring). n == 0 returns (nan, nan): an empty denominator has no rate and no interval,
    and a nan (rather than None) keeps the return type a pair of floats that formats as "n/a".
    """
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got {successes}/{n}")
    if n == 0:
        return (NAN, NAN)
    q, crit = successes / n, _critical(alpha)
    crit2 = crit**2
    denom = 1 + crit2 / n
    center = (q + crit2 / (2 * n)) / denom
    dist = crit * math.sqrt(q * (1.0 - q) / n + crit2 / (4.0 * n**2))
    dist /= denom
    return (min(1.0, max(0.0, center - dist)), max(0.0, min(1.0, center + dist)))


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{100 * x:.1f}"


@dataclass(frozen=True)
class Rate:
    """A count rate with its Wilson interval; `rate`, `lo`, `hi` are nan when n == 0."""

    successes: int
    n: int
    rate: float
    lo: float
    hi: float

    def format(self) -> str:
        """`55.1% (76/138) [46.7, 63.1]` — percent to one decimal, Wilson bounds in percent."""
        if self.n == 0:
            return f"n/a ({self.successes}/{self.n})"
        return f"{_pct(self.rate)}% ({self.successes}/{self.n}) [{_pct(self.lo)}, {_pct(self.hi)}]"


def rate_with_ci(successes: int, n: int, alpha: float = 0.05) -> Rate:
    """successes/n with its Wilson interval (see `wilson`)."""
    lo, hi = wilson(successes, n, alpha)
    return Rate(successes, n, successes / n if n else NAN, lo, hi)


@dataclass(frozen=True)
class BootstrapCI:
    """A point estimate with a percentile cluster-bootstrap interval (see `cluster_bootstrap`)."""

    label: str
    point: float
    lo: float
    hi: float
    clusters: int
    B: int
    seed: int
    cluster: str

    def format(self) -> str:
        return (
            f"{self.label} {100 * self.point:+.1f} pp [{100 * self.lo:+.1f}, {100 * self.hi:+.1f}] "
            f"({self.cluster}-cluster bootstrap, {self.clusters} clusters, B={self.B}, seed={self.seed})"
        )


def bootstrap_sums(
    sums: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    B: int = 2000,
    seed: int = 0,
    alpha: float = 0.05,
) -> tuple[float, float, float]:
    """Percentile cluster bootstrap over per-cluster additive totals.

    `sums` is (clusters x k): per-cluster totals of k additive quantities (e.g. successes and
    valid cells). Each of B resamples draws len(sums) clusters with replacement using
    `numpy.random.default_rng(seed)` and adds their rows; `statistic` maps an (m x k) array of
    totals to m values (nan where undefined, e.g. an empty denominator). Resamples where the
    statistic is undefined are dropped. The interval is the alpha/2, 1 - alpha/2 percentiles by
    `numpy.quantile(method="inverted_cdf")`, so each endpoint is a value some resample attained
    (few clusters give a coarse lattice; interpolating would invent resolution).
    Returns (point, lo, hi); all nan when there are no clusters or the point is undefined.
    """
    sums = np.asarray(sums, dtype=float)
    if sums.ndim != 2 or len(sums) == 0:
        return (NAN, NAN, NAN)
    point = float(statistic(sums.sum(axis=0, keepdims=True))[0])
    if math.isnan(point):
        return (NAN, NAN, NAN)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(sums), size=(B, len(sums)))
    with np.errstate(divide="ignore", invalid="ignore"):
        stats = np.asarray(statistic(sums[draws].sum(axis=1)), dtype=float)
    stats = stats[~np.isnan(stats)]
    if stats.size == 0:
        return (point, NAN, NAN)
    lo, hi = np.quantile(stats, [alpha / 2, 1 - alpha / 2], method="inverted_cdf")
    return (point, float(lo), float(hi))


def cluster_sums(records: Iterable, cluster: Callable[[object], object], values: Callable[[object], Sequence[float]]):
    """(sorted cluster keys, clusters x k array of summed `values`) — sorted so resampling is deterministic."""
    totals: dict[str, np.ndarray] = {}
    for rec in records:
        v = np.asarray(values(rec), dtype=float)
        key = str(cluster(rec))
        totals[key] = totals[key] + v if key in totals else v
    keys = sorted(totals)
    return keys, (np.vstack([totals[k] for k in keys]) if keys else np.empty((0, 0)))


def _ratio(totals: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(totals[:, 1] > 0, totals[:, 0] / totals[:, 1], np.nan)


def cluster_bootstrap(
    rows: Iterable[Mapping],
    column: str,
    cluster: str = "task",
    B: int = 2000,
    seed: int = 0,
    alpha: float = 0.05,
) -> tuple[float, float, float]:
    """Pooled rate of `column` over valid rows, with a percentile CI from resampling clusters.

    Pooled = (sum of the column over valid rows) / (valid rows). Clusters (default: tasks) are
    resampled with replacement, B times, with `numpy.random.default_rng(seed)`; the same seed
    gives the same interval. See `bootstrap_sums` for the percentile rule. Returns
    (rate, lo, hi); (nan, nan, nan) when there are no valid rows.
    """
    valid = [r for r in rows if r["status"] == "valid"]
    _, sums = cluster_sums(valid, lambda r: r[cluster], lambda r: (float(bool(r[column])), 1.0))
    return bootstrap_sums(sums, _ratio, B=B, seed=seed, alpha=alpha)


# ---------------------------------------------------------------- replicate (seed) cluster bootstrap

EXACT_LIMIT = 8  # clusters up to which every resample is enumerated: C(15, 7) = 6435 multisets at 8


@dataclass(frozen=True)
class ReplicateCI:
    """A pooled rate with the replicate-cluster bootstrap interval the reference supplement publishes
    (harness/runs/wave2/UNCERTAINTY.md): whole replicates (seeds) resampled, because the cells of one
    replicate share one clean baseline per (framework, config, task)."""

    point: float
    lo: float
    hi: float
    clusters: int
    support: int  # distinct values the bootstrap distribution takes (how coarse the lattice is)
    exact: bool  # every multiset enumerated with its multinomial weight (no Monte-Carlo error)

    method = "replicate-cluster bootstrap"

    def label(self) -> str:
        how = "exact enumeration" if self.exact else "Monte-Carlo"
        return f"{self.method} ({self.clusters} replicates, {how}, type-1 percentiles, support {self.support})"


def _multisets(k: int):
    """Every size-k multiset of k clusters with its probability under k draws with replacement."""
    total = k**k
    for combo in itertools.combinations_with_replacement(range(k), k):
        counts = np.bincount(combo, minlength=k)
        ways = math.factorial(k) // math.prod(math.factorial(int(c)) for c in counts)
        yield counts, ways / total


def _type1_percentile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The smallest attained value whose cumulative weight reaches q (inverse CDF, no interpolation)."""
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    idx = int(np.searchsorted(cum, q - 1e-12, side="left"))
    return float(values[order][min(idx, len(values) - 1)])


def exact_cluster_bootstrap(
    sums: np.ndarray, statistic: Callable[[np.ndarray], np.ndarray], alpha: float = 0.05, B: int = 20000, seed: int = 0
) -> tuple[float, float, float, int, bool]:
    """Percentile cluster bootstrap over per-cluster totals, enumerated exactly where it is small.

    With k <= EXACT_LIMIT clusters, all C(2k-1, k) multisets are enumerated with their multinomial
    weights (the reference supplement's method: 126 multisets for 5 replicates); above that, B
    seeded Monte-Carlo draws. numpy's `quantile(method="inverted_cdf")` is the same type-1 rule
    for equal weights; scipy.stats.bootstrap only samples, so neither enumerates. Returns
    (point, lo, hi, support, exact); nan where undefined.
    """
    sums = np.asarray(sums, dtype=float)
    if sums.ndim != 2 or len(sums) == 0:
        return (NAN, NAN, NAN, 0, False)
    point = float(statistic(sums.sum(axis=0, keepdims=True))[0])
    k = len(sums)
    exact = k <= EXACT_LIMIT
    if exact:
        counts, weights = zip(*_multisets(k))
        totals, weights = np.asarray(counts, dtype=float) @ sums, np.asarray(weights)
    else:
        draws = np.random.default_rng(seed).integers(0, k, size=(B, k))
        totals, weights = sums[draws].sum(axis=1), np.full(B, 1.0 / B)
    with np.errstate(divide="ignore", invalid="ignore"):
        stats = np.asarray(statistic(totals), dtype=float)
    keep = ~np.isnan(stats)
    if math.isnan(point) or not keep.any():
        return (point, NAN, NAN, 0, exact)
    stats, weights = stats[keep], weights[keep] / weights[keep].sum()
    lo = _type1_percentile(stats, weights, alpha / 2)
    hi = _type1_percentile(stats, weights, 1 - alpha / 2)
    return (point, lo, hi, len(np.unique(np.round(stats, 12))), exact)


def replicate_bootstrap(rows: Iterable[Mapping], column: str, alpha: float = 0.05) -> ReplicateCI:
    """Pooled rate of `column` over valid rows, replicates (the `seed` field) resampled whole."""
    valid = [r for r in rows if r["status"] == "valid"]
    _, sums = cluster_sums(valid, lambda r: r["seed"], lambda r: (float(bool(r[column])), 1.0))
    point, lo, hi, support, exact = exact_cluster_bootstrap(sums, _ratio, alpha)
    return ReplicateCI(point, lo, hi, len(sums), support, exact)
