"""Spend: what a wave will cost, and the breaker that stops launching at the cap.

SPEC v0.2.1 §8: "Hard cap $500. If projections exceed the cap, seeds are cut 5 -> 3 before any
cell is cut." So a wave is projected before it launches, from runs already recorded (calls and
tokens per run, per framework, times the runs to make); a projection over the budget is refused
and the refusal names the 5 -> 3 alternative with its own figure. While a wave runs, a breaker
stops launching new runs once spend reaches the budget: runs in flight finish and are kept, runs
never started stay missing, so the next wave run resumes them.

Pure functions over per-framework rates (read from the store's priced calls,
`sabot.store.spend.rates_of`); no Dagster, no frameworks. What a call costs is `sabot.pricing`.
"""

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

PROJECT_CAP_USD = 500.0  # §8: "Hard cap $500"
CUT_SEEDS_TO = 3  # §8: "seeds are cut 5 -> 3 before any cell is cut"


def usd(amount: float) -> str:
    """Dollars as a team reads them: cents, or four places below a dollar (a pilot's cents matter)."""
    return f"${amount:,.2f}" if abs(amount) >= 1 else f"${amount:.4f}"


class BudgetError(RuntimeError):
    """A wave refused before any model call: its projection exceeds the budget."""


# ---------------------------------------------------------------------------
# What a wave will cost
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Rate:
    """Per-run averages of one framework over the runs recorded for it."""

    runs: int
    calls: float
    tokens: float
    cost: float


@dataclass(frozen=True)
class Projection:
    runs: dict[str, int]  # framework -> runs to make
    cost: float
    calls: float
    unknown: tuple[str, ...]  # frameworks with no recorded run to project from

    def line(self) -> str:
        per = ", ".join(f"{fw} {n}" for fw, n in sorted(self.runs.items()))
        return f"{usd(self.cost)} for {sum(self.runs.values())} run(s) ({per}; ~{self.calls:,.0f} model calls)"


def project(specs: Iterable, known: dict[str, Rate]) -> Projection:
    """Runs to make (anything with .framework) times each framework's recorded per-run averages."""
    runs = Counter(spec.framework for spec in specs)
    unknown = tuple(sorted(fw for fw in runs if fw not in known))
    cost = sum(n * known[fw].cost for fw, n in runs.items() if fw in known)
    calls = sum(n * known[fw].calls for fw, n in runs.items() if fw in known)
    return Projection(dict(runs), cost, calls, unknown)


def check_projection(specs: list, known: dict[str, Rate], budget: float, seeds: tuple[int, ...]) -> Projection:
    """Refuse (BudgetError) a wave whose projection exceeds `budget`, naming the §8 alternative.

    Frameworks with no recorded run are projected at nothing and named in `unknown`: such a wave
    is a pilot, capped by the breaker alone, and its runs give the next wave its projection."""
    full = project(specs, known)
    if full.cost <= budget:
        return full
    over = f"projected spend {full.line()} exceeds the budget of {usd(budget)}. "
    if len(seeds) <= CUT_SEEDS_TO:
        raise BudgetError(over + f"§8 cuts seeds 5 -> {CUT_SEEDS_TO} before any cell, but this wave has {len(seeds)} seed(s): "
                          "only cells can be cut (a narrower --framework/--config/--task/--operator slice)")
    kept = tuple(sorted(seeds)[:CUT_SEEDS_TO])
    cut = project([s for s in specs if s.seed in kept], known)
    verdict = "fits" if cut.cost <= budget else "still exceeds it: cells would have to be cut next"
    raise BudgetError(
        over + f"§8 alternative: cut seeds {len(seeds)} -> {CUT_SEEDS_TO} (seeds {', '.join(map(str, kept))}) before any cell is cut: "
        f"projected {cut.line()}, which {verdict} ({' '.join(f'--seed {k}' for k in kept)})"
    )


# ---------------------------------------------------------------------------
# The breaker
# ---------------------------------------------------------------------------


class Breaker:
    """Stops launching once spend reaches the cap. Runs in flight are not stopped: the next run is
    never launched. `spent` starts from what the project has already spent.

    With concurrency, several runs are launched before the first one reports its cost, so a run in
    flight reserves what its framework's recorded runs cost on average (`expected`), and a run is
    launched only while spent + reserved stays under the cap. A framework with no recorded run
    reserves nothing (a pilot): then the cap can be passed by the runs in flight.
    """

    def __init__(self, cap: float | None, spent: float = 0.0, expected: dict[str, float] | None = None):
        self.cap, self.spent = cap, spent
        self.expected = expected or {}
        self.reserved: dict = {}  # item -> its reservation, while in flight

    def _reservation(self, item) -> float:
        return self.expected.get(getattr(item, "framework", None), 0.0)

    @property
    def tripped(self) -> bool:
        return self.cap is not None and self.spent >= self.cap

    def may_launch(self, item=None) -> bool:
        if self.cap is None:
            return True
        reservation = self._reservation(item)
        if self.tripped or (self.reserved and self.spent + sum(self.reserved.values()) + reservation > self.cap):
            return False
        self.reserved[item] = reservation
        return True

    def add(self, cost: float | None, item=None) -> None:
        """A launched run finished: its reservation gives way to what it cost."""
        self.reserved.pop(item, None)
        if cost is None:
            return  # an unpriced run: counted on the board as unpriced calls, never as free money
        if not math.isfinite(cost) or cost < 0:
            raise BudgetError(f"a run reported a cost of {cost!r}")
        self.spent += cost
