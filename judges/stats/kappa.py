"""Cohen's kappa for the §6 double-judged set (two binary judgements of the same cells).

Backed by `statsmodels.stats.inter_rater.cohens_kappa` on the 2x2 table. The interval is the
Wald interval kappa +/- z(1 - alpha/2) * ASE, with ASE statsmodels' `std_kappa`, the large-sample
(non-null) standard error of Fleiss, Cohen & Everitt (1969); z from `scipy.stats.norm.isf`. At
alpha = 0.05 this is exactly statsmodels' own `kappa_low`/`kappa_upp`. Clipped here to [-1, 1]. With perfect
agreement the ASE is 0 and the interval collapses to [1, 1].
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from judges.stats.intervals import NAN

# Float tolerance for the §6 bound: a kappa computed from counts is a ratio of integers whose
# float error is ~1e-16; 1e-12 absorbs representation only (0.6999 stays below 0.7).
_TOL = 1e-12


@dataclass(frozen=True)
class Kappa:
    """kappa with its interval, n double-judged cells, observed and chance-expected agreement.

    kappa/lo/hi are nan when kappa is undefined: no cells, or expected agreement 1 (both
    judgements constant and equal, so chance explains all agreement).
    """

    kappa: float
    lo: float
    hi: float
    n: int
    observed: float
    expected: float

    def format(self) -> str:
        if math.isnan(self.kappa):
            return f"kappa undefined (n={self.n})"
        return (
            f"kappa {self.kappa:.3f} [{self.lo:.3f}, {self.hi:.3f}] (n={self.n}, observed {self.observed:.3f}, "
            f"expected {self.expected:.3f}) -> {kappa_confidence(self)}"
        )


def cohen_kappa(pairs: Iterable[tuple[bool, bool]], alpha: float = 0.05) -> Kappa:
    """Cohen's kappa of two binary judgements of the same cells (see the module docstring)."""
    table = np.zeros((2, 2))
    for first, second in pairs:
        table[0 if first else 1, 0 if second else 1] += 1
    n = int(table.sum())
    if n == 0:
        return Kappa(NAN, NAN, NAN, 0, NAN, NAN)
    observed = float(np.trace(table)) / n
    expected = float(table.sum(axis=1) @ table.sum(axis=0)) / n**2
    if expected >= 1.0:
        return Kappa(NAN, NAN, NAN, n, observed, expected)
    from scipy.stats import norm  # here: scipy and statsmodels take seconds to import
    from statsmodels.stats.inter_rater import cohens_kappa

    res = cohens_kappa(table)
    kappa, half = float(res.kappa), float(norm.isf(alpha / 2) * res.std_kappa)
    return Kappa(kappa, max(-1.0, kappa - half), min(1.0, kappa + half), n, observed, expected)


def import_backends() -> None:
    """Import what `cohen_kappa` needs (seconds of scipy and statsmodels), e.g. in a thread while a
    wave's runs run, so the kappa audit after its last run does not wait for it."""
    import scipy.stats  # noqa: F401
    import statsmodels.stats.inter_rater  # noqa: F401


def kappa_confidence(kappa: float | Kappa, bound: float = 0.7) -> str:
    """§6: "full" when kappa >= bound (0.7 itself is full), else "low-confidence".

    An undefined (nan) kappa cannot certify reliability and reads "low-confidence".
    """
    value = kappa.kappa if isinstance(kappa, Kappa) else float(kappa)
    if math.isnan(value):
        return "low-confidence"
    return "full" if value >= bound - _TOL else "low-confidence"
