"""Paired binary contrasts between two readings of the same cells, with Holm families.

* p-value: exact McNemar, `statsmodels.stats.contingency_tables.mcnemar(exact=True)` — the
  two-sided binomial test of b vs c on the discordant pairs (b + c trials, p = 1/2).
* difference: second rate minus first rate, (c - b) / n, with Newcombe's (1998) square-and-add
  interval for paired proportions (his method 10; Fagerland, Lydersen & Laake 2014 recommend it):
  the two marginal Wilson intervals come from `statsmodels ... proportion_confint(method="wilson")`
  and are combined with the phi correlation of the 2x2 table. The interval is descriptive; it is
  not the decision rule.
* families: Holm step-down, `statsmodels.stats.multitest.multipletests(method="holm")`.

Decision rule: a contrast is "separated" only when its Holm-adjusted p is below alpha;
otherwise it is "unresolved", whatever its point estimate. A standalone contrast is its own
family of one (Holm-adjusted p == raw p); contrasts that share a question must go through
`holm_contrasts` together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterable, Mapping

import numpy as np

from judges.stats.intervals import NAN, wilson

CELL_KEY = ("framework", "config", "task", "operator", "seed")


@dataclass(frozen=True)
class Contrast:
    """Paired contrast of `first` vs `second` on the same n cells.

    b = first-only (first True, second False), c = second-only. `diff` = second rate - first
    rate with the Newcombe interval [lo, hi]; `p` = exact McNemar p; `p_holm` = p adjusted in its
    family (equal to `p` until `holm_contrasts` places it in a larger family).
    """

    n: int
    both: int
    b: int
    c: int
    first_rate: float
    second_rate: float
    diff: float
    lo: float
    hi: float
    p: float
    p_holm: float
    alpha: float = 0.05
    label: str = ""

    @property
    def status(self) -> str:
        """The verdict: "separated" iff the Holm-adjusted p < alpha, else "unresolved"."""
        return "separated" if self.p_holm < self.alpha else "unresolved"

    @property
    def direction(self) -> str:
        """Sign of the second-minus-first difference: "rise", "fall" or "flat" (c vs b)."""
        return "rise" if self.c > self.b else "fall" if self.b > self.c else "flat"

    @property
    def separated_rise(self) -> bool:
        return self.status == "separated" and self.direction == "rise"

    @property
    def separated_fall(self) -> bool:
        return self.status == "separated" and self.direction == "fall"

    def format(self) -> str:
        if self.n == 0:
            return f"{self.label}: no paired cells -> unresolved".lstrip(": ")
        head = f"{self.label}: " if self.label else ""
        return (
            f"{head}{100 * self.first_rate:.1f}% -> {100 * self.second_rate:.1f}% "
            f"({100 * self.diff:+.1f} pp [{100 * self.lo:+.1f}, {100 * self.hi:+.1f}]; b={self.b} c={self.c} n={self.n}; "
            f"exact p={self.p:.4g}, Holm p={self.p_holm:.4g}) -> {self.status}"
        )


def newcombe_paired_ci(both: int, b: int, c: int, neither: int, alpha: float = 0.05) -> tuple[float, float]:
    """Newcombe square-and-add (method 10) interval for second rate - first rate on paired data.

    first rate p1 = (both + b)/n, second rate p2 = (both + c)/n, each with its Wilson interval
    (statsmodels). phi is the 2x2 correlation with Newcombe's correction: A = both*neither - b*c;
    phi = (A - n/2)/sqrt(margins) if A > n/2, 0 if 0 <= A <= n/2, A/sqrt(margins) if A < 0, and 0
    when any margin is empty. Clipped to [-1, 1]. (nan, nan) when n == 0.
    """
    n = both + b + c + neither
    if n == 0:
        return (NAN, NAN)
    p1, p2 = (both + b) / n, (both + c) / n
    l1, u1 = wilson(both + b, n, alpha)
    l2, u2 = wilson(both + c, n, alpha)
    margins = (both + b) * (c + neither) * (both + c) * (b + neither)
    a = both * neither - b * c
    if margins == 0 or 0 <= a <= n / 2:
        phi = 0.0
    else:
        phi = (a - n / 2 if a > n / 2 else a) / math.sqrt(margins)
    d = p2 - p1
    lo = d - math.sqrt(max(0.0, (p2 - l2) ** 2 + (u1 - p1) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1)))
    hi = d + math.sqrt(max(0.0, (u2 - p2) ** 2 + (p1 - l1) ** 2 - 2 * phi * (u2 - p2) * (p1 - l1)))
    return (max(-1.0, lo), min(1.0, hi))


def mcnemar_exact(pairs: Iterable[tuple[bool, bool]], alpha: float = 0.05, label: str = "") -> Contrast:
    """Exact McNemar contrast of (first, second) judgements of the same cells.

    p from `statsmodels.stats.contingency_tables.mcnemar(table, exact=True)`: two-sided, twice the
    binomial(b + c, 1/2) tail at min(b, c), capped at 1 (b = c = 0 gives p = 1). The difference
    CI is Newcombe's paired square-and-add interval (`newcombe_paired_ci`). No pairs gives n = 0,
    nan rates and p = 1 (unresolved).
    """
    both = b = c = neither = 0
    for first, second in pairs:
        first, second = bool(first), bool(second)
        if first and second:
            both += 1
        elif first:
            b += 1
        elif second:
            c += 1
        else:
            neither += 1
    n = both + b + c + neither
    if n == 0:
        return Contrast(0, 0, 0, 0, NAN, NAN, NAN, NAN, NAN, 1.0, 1.0, alpha, label)
    from statsmodels.stats.contingency_tables import mcnemar  # here: statsmodels takes seconds to import

    p = 1.0 if b + c == 0 else float(mcnemar(np.array([[both, b], [c, neither]]), exact=True).pvalue)
    lo, hi = newcombe_paired_ci(both, b, c, neither, alpha)
    first_rate, second_rate = (both + b) / n, (both + c) / n
    return Contrast(n, both, b, c, first_rate, second_rate, (c - b) / n, lo, hi, p, p, alpha, label)


def holm(family: Mapping[str, float]) -> dict[str, float]:
    """Holm step-down adjusted p-values for one pre-declared family.

    Backed by `statsmodels.stats.multitest.multipletests(method="holm")`. A nan p (a test that
    could not be computed) is treated as 1.0 so it still counts toward the family size m (the
    conservative reading) and is returned as nan. Empty family -> {}.
    """
    keys = list(family)
    if not keys:
        return {}
    raw = np.array([family[k] for k in keys], dtype=float)
    from statsmodels.stats.multitest import multipletests

    adjusted = multipletests(np.where(np.isnan(raw), 1.0, raw), method="holm")[1]
    return {k: (NAN if math.isnan(r) else float(a)) for k, r, a in zip(keys, raw, adjusted)}


def holm_contrasts(family: Mapping[str, Contrast]) -> dict[str, Contrast]:
    """The same contrasts with `p_holm` set by Holm over the whole family (see `holm`)."""
    adjusted = holm({k: c.p for k, c in family.items()})
    return {k: replace(c, p_holm=adjusted[k], label=c.label or k) for k, c in family.items()}


def cell_key(row: Mapping) -> tuple:
    return tuple(row[k] for k in CELL_KEY)


def valid_index(rows: Iterable[Mapping]) -> dict[tuple, Mapping]:
    """Valid rows by cell key; a duplicated valid cell is an error, never silently overwritten."""
    index: dict[tuple, Mapping] = {}
    for row in rows:
        if row["status"] != "valid":
            continue
        key = cell_key(row)
        if key in index:
            raise ValueError(f"duplicate valid cell {key}")
        index[key] = row
    return index


def paired_cells(
    wave_a_rows: Iterable[Mapping], wave_b_rows: Iterable[Mapping]
) -> list[tuple[tuple, Mapping, Mapping]]:
    """(key, row_a, row_b) for every cell valid in both waves, sorted by key."""
    a, b = valid_index(wave_a_rows), valid_index(wave_b_rows)
    return [(k, a[k], b[k]) for k in sorted(a.keys() & b.keys(), key=lambda k: tuple(map(str, k)))]


def paired_rows(wave_a_rows, wave_b_rows, column_a: str, column_b: str) -> list[tuple[bool, bool]]:
    """(row_a[column_a], row_b[column_b]) paired on (framework, config, task, operator, seed),
    keeping only cells valid in both waves, in sorted key order."""
    return [(bool(ra[column_a]), bool(rb[column_b])) for _, ra, rb in paired_cells(wave_a_rows, wave_b_rows)]
