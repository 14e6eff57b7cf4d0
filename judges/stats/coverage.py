"""The completeness guard: a verdict, a median or a band only where every cell it is defined over is there.

A statistic is defined over a set of cells of the registered matrix (a prediction's rows and
operators, the median's every scoreboard row). It is computed only when each of those cells is
decided: valid, or excluded by a registered code (an exclusion is a verdict on the cell, §4). A
cell absent from the corpus, or incomplete (a run missing), is not decided; then the statistic is
"undetermined", and the reason names what is missing, by scoreboard row.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

DECIDED = frozenset({"valid", "excluded", "carved_out"})
CellKey = tuple[str, str, str, str, int]  # framework, config, task, operator, seed


def cell_key(row: Mapping) -> CellKey:
    return (row["framework"], row["config"], row["task"], row["operator"], int(row["seed"]))


def matrix_cells(frameworks, configs, tasks, operators, seeds) -> list[CellKey]:
    """Every cell of a registered matrix, in key order."""
    return [(f, c, t, o, int(s)) for f, c, t, o, s in itertools.product(frameworks, configs, tasks, operators, seeds)]


@dataclass(frozen=True)
class Coverage:
    """Which expected cells of a domain are not decided, by scoreboard row."""

    expected: Mapping[str, int]  # scoreboard row -> cells the domain expects there
    missing: tuple[CellKey, ...]

    @property
    def complete(self) -> bool:
        return sum(self.expected.values()) > 0 and not self.missing

    def describe(self, wave: str) -> str:
        if not self.expected:
            return f"{wave}: the registered matrix has no cell in this domain"
        if not self.missing:
            return f"{wave}: complete"
        per_row = Counter(f"{f}/{c}" for f, c, *_ in self.missing)
        absent = [row for row, n in sorted(per_row.items()) if n == self.expected[row]]
        partial = [f"{row} {n} of {self.expected[row]}" for row, n in sorted(per_row.items()) if n < self.expected[row]]
        parts = ([f"rows absent: {', '.join(absent)}"] if absent else []) + (
            [f"cells undecided: {', '.join(partial)}"] if partial else []
        )
        return f"{wave}: {len(self.missing)} of {sum(self.expected.values())} cells not decided ({'; '.join(parts)})"


def coverage(
    rows: Iterable[Mapping], expected: Iterable[CellKey], domain: Callable[[CellKey], bool] = lambda _: True
) -> Coverage:
    """The decided/undecided split of the expected cells inside `domain`."""
    decided = {cell_key(r) for r in rows if r["status"] in DECIDED}
    want = [k for k in expected if domain(k)]
    return Coverage(dict(Counter(f"{f}/{c}" for f, c, *_ in want)), tuple(k for k in want if k not in decided))


def incomplete_reason(checks: Mapping[str, Coverage]) -> str | None:
    """None when every named domain is complete; else one sentence naming what is missing."""
    gaps = [cov.describe(name) for name, cov in checks.items() if not cov.complete]
    return ("incomplete data, no verdict: " + "; ".join(gaps)) if gaps else None
