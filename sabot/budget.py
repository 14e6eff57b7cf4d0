"""Spend: what a wave will cost, and the breaker that stops launching at the cap.

SPEC v0.2.1 §8: "Hard cap $500. If projections exceed the cap, seeds are cut 5 -> 3 before any
cell is cut." So a wave is projected before it launches, from runs already recorded (calls and
tokens per run, per framework, times the runs to make); a projection over the budget is refused
and the refusal names the 5 -> 3 alternative with its own figure. While a wave runs, a breaker
stops launching new runs once spend reaches the budget: runs in flight finish and are kept, runs
never started stay missing, so the next wave run resumes them. A provider run is held to the
registered per-run bounds call by call (`RunBound`, enforced by the model gateway), so what a pilot
run reserves is what it can cost.

Pure functions over per-framework rates (read from the store's priced calls,
`sabot.store.spend.rates_of`); no Dagster, no frameworks. What a call costs is `sabot.pricing`.
"""

import math
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

PROJECT_CAP_USD = 500.0  # §8: "Hard cap $500"
CUT_SEEDS_TO = 3  # §8: "seeds are cut 5 -> 3 before any cell is cut"
MARGIN_DOC = "standard/spend_margin.v1.json"


@dataclass(frozen=True)
class Margin:
    """The registered spend margin and a pilot run's bounds (data/standard/spend_margin.v1.json).

    Metered spend (reported usage at the registered prices) times `factor` is what projections,
    budgets and the cap are measured against: the reference found its meter under real billing."""

    factor: float
    max_calls: int
    max_prompt_tokens: int
    max_completion_tokens: int
    source: str = MARGIN_DOC

    @classmethod
    def from_registry(cls, registry) -> "Margin":
        doc = registry.doc(MARGIN_DOC)
        bounds = doc["pilot_run_bounds"]
        factor = float(doc["margin"])
        if not math.isfinite(factor) or factor < 1:
            raise BudgetError(f"{MARGIN_DOC}: margin must be a number >= 1, got {doc['margin']!r}")
        return cls(
            factor,
            int(bounds["max_calls_per_run"]),
            int(bounds["max_prompt_tokens_per_call"]),
            int(bounds["max_completion_tokens_per_call"]),
        )

    def pilot_worst_case(self, prices) -> float:
        """Metered USD one run can cost at most under the registered bounds, at the dearest prices
        (`prices`: a sabot.pricing.PriceTable)."""
        dear_in = max(p.input_per_million for p in prices.prices.values())
        dear_out = max(p.output_per_million for p in prices.prices.values())
        return self.max_calls * (self.max_prompt_tokens * dear_in + self.max_completion_tokens * dear_out) / 1e6

    def per_call_worst_case(self, prices) -> float:
        """Metered USD one call can cost at most under the registered per-call token bounds."""
        return self.pilot_worst_case(prices) / self.max_calls

    def run_bound(self, prices) -> "RunBound":
        """A fresh per-run bound: what the gateway enforces call by call on a provider run."""
        return RunBound(
            self.max_calls,
            self.per_call_worst_case(prices),
            self.pilot_worst_case(prices),
            prices,
            self.source,
            self.max_completion_tokens,
        )

    def call_bound(self, prices) -> "RunBound":
        """A fresh per-run bound on calls alone: what the gateway enforces on an offline run (a scripted model
        or a test double costs no money, but a pipeline looping on a persistent fault must still stop)."""
        return RunBound(self.max_calls, 0.0, math.inf, prices, self.source)

    def bound_for(self, prices, provider: bool, replaying: bool) -> "RunBound | None":
        """The run's bound: calls and metered spend at a provider, calls alone offline, none for a replay (nothing is sent)."""
        if replaying:
            return None
        return self.run_bound(prices) if provider else self.call_bound(prices)

    def bounds_text(self) -> str:
        return (
            f"{self.max_calls} calls x ({self.max_prompt_tokens:,} prompt + {self.max_completion_tokens:,} completion tokens), "
            f"margin x{self.factor:g} ({self.source})"
        )


class RunBound:
    """One run's registered worst case (calls, and metered USD: what a pilot run reserves), enforced call
    by call so the reservation holds whatever the provider bills.

    A call is sent only while the run's paid calls plus those in flight, plus this one, fit the run's
    limit. This one is priced at the largest of the per-call worst case, the dearest call the run has
    paid so far, and its own size (tokens, estimated from the request) at the dearest rate per token
    paid so far: a provider billing past the per-call token bounds, or a conversation whose calls grow,
    shortens the run instead of passing its reservation. What no request shows (a reply far longer
    than any before it) can still pass it by that one call. A call reporting no usage, or a model without a price, counts at the per-call worst
    case (never as free). Shared by the run's attempts (the retry-once is paid from the same bound).
    Thread-safe: a pipeline may have several calls in flight.

    Held never below the call's own worst case (`call_worst_case`: its prompt counted before it is
    sent, plus the completion it caps itself at, at its model's registered price): a provider that
    bills within the request's own limits cannot take a run past its reservation, however many calls
    are in flight. A call billed past that worst case is counted in `billed_beyond_request`."""

    def __init__(
        self,
        max_calls: int,
        per_call_usd: float,
        limit_usd: float,
        prices,
        source: str = MARGIN_DOC,
        completion_cap: int = 0,
    ):
        self.max_calls, self.per_call_usd, self.limit_usd, self.prices, self.source = (
            max_calls,
            per_call_usd,
            limit_usd,
            prices,
            source,
        )
        self.completion_cap = (
            completion_cap  # assumed for a request that caps nothing itself (the registered per-call bound)
        )
        self.calls, self.paid, self.dearest, self.per_token, self.held = 0, 0.0, 0.0, 0.0, 0.0
        self.billed_beyond_request = 0
        self._lock = threading.Lock()

    def call_worst_case(self, model: str | None, prompt_tokens: int, completion_cap: int | None) -> float:
        """Metered USD a call can cost when billed within its own limits: `prompt_tokens` (an upper bound,
        counted before the call) plus its completion cap (else the registered one), at its model's price
        (the dearest registered price for a model without one)."""
        price = self.prices.price_for(model)
        dear_in = price.input_per_million if price else max(p.input_per_million for p in self.prices.prices.values())
        dear_out = price.output_per_million if price else max(p.output_per_million for p in self.prices.prices.values())
        return (prompt_tokens * dear_in + (completion_cap or self.completion_cap) * dear_out) / 1e6

    def admit(self, tokens: int = 1, worst_case: float = 0.0) -> tuple[float | None, str | None]:
        """(the amount held for a call of about `tokens` tokens whose own worst case is `worst_case`, None)
        when it may be sent; (None, why not) when it would pass the bound."""
        with self._lock:
            if self.calls >= self.max_calls:
                return None, f"the run's registered bound of {self.max_calls} calls is reached ({self.source})"
            hold = max(self.per_call_usd, self.dearest, self.per_token * tokens, worst_case)
            if self.paid + self.held + hold > self.limit_usd + 1e-12:
                beyond = (
                    f"; {self.billed_beyond_request} call(s) were billed past their own request's limits (its counted prompt "
                    f"and max_tokens): the provider bills beyond what was asked"
                    if self.billed_beyond_request
                    else ""
                )
                return None, (
                    f"one more call (up to {usd(hold)} metered) would pass the run's registered bound of {usd(self.limit_usd)} "
                    f"metered ({usd(self.paid)} paid over {self.calls} call(s); {self.source}){beyond}"
                )
            self.calls, self.held = self.calls + 1, self.held + hold
            return hold, None

    def settle(self, held: float, model: str | None, usage: dict | None, answered: bool, tokens: int = 1) -> None:
        """The call of about `tokens` tokens sent with `held` came back: what it cost replaces the hold
        (nothing when no answer was billed)."""
        cost = self.prices.cost(model, usage) if answered else 0.0
        cost = self.per_call_usd if cost is None else cost
        with self._lock:
            self.billed_beyond_request += cost > held + 1e-12
            self.held = max(0.0, self.held - held)
            self.paid += cost
            self.dearest = max(self.dearest, cost)
            self.per_token = max(self.per_token, cost / max(1, tokens))


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
    cost: float  # margined: what the budget and the cap are measured against
    calls: float
    unknown: tuple[str, ...]  # frameworks with no recorded run to project from
    metered: float = 0.0  # the recorded rates alone, before the margin

    def line(self) -> str:
        per = ", ".join(f"{fw} {n}" for fw, n in sorted(self.runs.items()))
        margined = f", margined from {usd(self.metered)} metered" if self.cost != self.metered else ""
        return (
            f"{usd(self.cost)} for {sum(self.runs.values())} run(s) ({per}; ~{self.calls:,.0f} model calls{margined})"
        )


def project(specs: Iterable, known: dict[str, Rate], margin: float = 1.0) -> Projection:
    """Runs to make (anything with .framework) times each framework's recorded per-run averages."""
    runs = Counter(spec.framework for spec in specs)
    unknown = tuple(sorted(fw for fw in runs if fw not in known))
    metered = sum(n * known[fw].cost for fw, n in runs.items() if fw in known)
    calls = sum(n * known[fw].calls for fw, n in runs.items() if fw in known)
    return Projection(dict(runs), metered * margin, calls, unknown, metered)


def check_projection(
    specs: list, known: dict[str, Rate], budget: float, seeds: tuple[int, ...], margin: float = 1.0
) -> Projection:
    """Refuse (BudgetError) a wave whose projection exceeds `budget`, naming the §8 alternative.

    Frameworks with no recorded run are projected at nothing and named in `unknown`: such a wave
    is a pilot, capped by the breaker alone, and its runs give the next wave its projection."""
    full = project(specs, known, margin)
    if full.cost <= budget:
        return full
    over = f"projected spend {full.line()} exceeds the budget of {usd(budget)}. "
    if len(seeds) <= CUT_SEEDS_TO:
        raise BudgetError(
            over + f"§8 cuts seeds 5 -> {CUT_SEEDS_TO} before any cell, but this wave has {len(seeds)} seed(s): "
            "only cells can be cut (a narrower --framework/--config/--task/--operator slice)"
        )
    kept = tuple(sorted(seeds)[:CUT_SEEDS_TO])
    cut = project([s for s in specs if s.seed in kept], known, margin)
    verdict = "fits" if cut.cost <= budget else "still exceeds it: cells would have to be cut next"
    raise BudgetError(
        over
        + f"§8 alternative: cut seeds {len(seeds)} -> {CUT_SEEDS_TO} (seeds {', '.join(map(str, kept))}) before any cell is cut: "
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

    def close(self) -> None:
        """Nothing held outside this process."""

    def may_fit_later(self, item=None) -> bool:
        """A refusal that runs in flight elsewhere may lift by settling (never, for this breaker)."""
        return False

    def add(self, cost: float | None, item=None, record_key: str | None = None) -> None:
        """A launched run finished: its reservation gives way to what it cost."""
        self.reserved.pop(item, None)
        if cost is None:
            return  # an unpriced run: counted on the board as unpriced calls, never as free money
        if not math.isfinite(cost) or cost < 0:
            raise BudgetError(f"a run reported a cost of {cost!r}")
        self.spent += cost


class LedgerBreaker(Breaker):
    """A breaker that reserves from the store-wide ledger (`sabot.store.ledger.SpendLedger`), so every
    command and Dagster run on one store stops at the same ceiling between them.

    `ceiling` is margined USD; the ledger holds metered USD. A launch reserves the run's expected
    metered cost (its framework's recorded rate, else `pilot`, the registered worst case) and is
    allowed only while margin x (settled + reserved + this one) stays within the ceiling, checked
    and reserved in one ledger transaction. A settled run replaces its reservation with its cost."""

    def __init__(self, ledger, kind: str, ceiling: float, margin: float, expected: dict[str, float], pilot: float):
        super().__init__(ceiling, 0.0, expected)
        self.ledger, self.kind, self.margin, self.pilot = ledger, kind, margin, pilot
        self.tokens: dict = {}

    def _reservation(self, item) -> float:
        return self.expected.get(getattr(item, "framework", None), self.pilot)

    @property
    def spent(self) -> float:
        """Margined spend settled so far across every command on the store."""
        return self.ledger.totals(self.kind)[0] * self.margin

    @spent.setter
    def spent(self, _value) -> None:  # the base class initializes it; the ledger is the figure
        pass

    @property
    def tripped(self) -> bool:
        return self.spent >= self.cap

    def may_launch(self, item=None) -> bool:
        token = f"{self.ledger.holder}:{id(self)}:{getattr(item, 'run_id', item)}"

        def fits(settled: float, reserved: float, amount: float) -> bool:
            return (settled + reserved + amount) * self.margin <= self.cap + 1e-12

        if not self.ledger.reserve(token, self.kind, self._reservation(item), fits):
            return False
        self.tokens[item] = token
        return True

    def may_fit_later(self, item=None) -> bool:
        """Refused only for what is reserved: it fits once the runs in flight (any command's) settle."""
        settled, reserved = self.ledger.totals(self.kind)
        return reserved > 0 and (settled + self._reservation(item)) * self.margin <= self.cap

    def add(self, cost: float | None, item=None, record_key: str | None = None) -> None:
        if cost is not None and (not math.isfinite(cost) or cost < 0):
            raise BudgetError(f"a run reported a cost of {cost!r}")
        token = self.tokens.pop(item, None)
        if token is not None:
            self.ledger.settle(token, self.kind, record_key, cost)

    def close(self) -> None:
        """Release what never settled (a step that stopped early): the ledger keeps no stale hold."""
        for token in self.tokens.values():
            self.ledger.release(token)
        self.tokens.clear()
