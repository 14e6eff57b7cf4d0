"""Spend: what a run cost, what a wave will cost, and the breaker that stops launching at the cap.

SPEC v0.2.1 §8: "Hard cap $500. If projections exceed the cap, seeds are cut 5 -> 3 before any
cell is cut." So a wave is projected before it launches, from runs already recorded (calls and
tokens per run, per framework, times the runs to make); a projection over the budget is refused
and the refusal names the 5 -> 3 alternative with its own figure. While a wave runs, a breaker
stops launching new runs once spend reaches the budget: runs in flight finish and are kept, runs
never started stay missing, so the next wave run resumes them.

Pure functions over run records and the registered price table; no Dagster, no frameworks.
"""

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

PROJECT_CAP_USD = 500.0  # §8: "Hard cap $500"
CUT_SEEDS_TO = 3  # §8: "seeds are cut 5 -> 3 before any cell is cut"


class BudgetError(RuntimeError):
    """A wave refused before any model call: its projection exceeds the budget."""


# ---------------------------------------------------------------------------
# What a run cost
# ---------------------------------------------------------------------------


def _reply_usage(reply) -> dict | None:
    """The usage an OpenAI-style reply reports: a JSON body's `usage`, or a stream's last usage chunk."""
    if isinstance(reply, dict):
        return reply.get("usage") if isinstance(reply.get("usage"), dict) else None
    if isinstance(reply, list):
        found = [c["usage"] for c in reply if isinstance(c, dict) and isinstance(c.get("usage"), dict)]
        return found[-1] if found else None
    return None


def _base_model(model: str, table: dict) -> str | None:
    """A dated served id (gpt-5.6-terra-2026-07-01) is priced as its base id."""
    if model in table:
        return model
    return next((base for base in sorted(table, key=len, reverse=True) if model.startswith(base + "-")), None)


def call_cost(model: str | None, usage: dict | None, prices: dict) -> float:
    """USD of one call: prompt tokens at the input price (cached ones too: the spec names no discount),
    completion tokens (reasoning included, never twice) at the output price."""
    if not usage:
        return 0.0
    table = prices["per_million_tokens"]
    base = _base_model(model or "", table)
    if base is None:
        raise BudgetError(f"no registered price for model {model!r} (prices {prices.get('version')}: {', '.join(sorted(table))})")
    rate = table[base]
    return (int(usage.get("prompt_tokens") or 0) * rate["input"] + int(usage.get("completion_tokens") or 0) * rate["output"]) / 1e6


@dataclass(frozen=True)
class RunUsage:
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: float


def run_usage(record, prices: dict) -> RunUsage:
    """Calls, tokens and cost of one run record, from the model exchanges it recorded."""
    exchanges = [x for x in (record.extra or {}).get("exchanges", []) if isinstance(x, dict)]
    calls = prompt = completion = 0
    cost = 0.0
    for exchange in exchanges:
        usage = exchange.get("usage") or _reply_usage(exchange.get("reply"))
        calls += 1
        if usage:
            prompt += int(usage.get("prompt_tokens") or 0)
            completion += int(usage.get("completion_tokens") or 0)
            cost += call_cost(exchange.get("model") or (exchange.get("request") or {}).get("model"), usage, prices)
    recorded = (record.extra or {}).get("cost_usd")
    return RunUsage(calls, prompt, completion, float(recorded) if recorded is not None else cost)


def run_cost(record, prices: dict) -> float:
    return run_usage(record, prices).cost


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


def rates(records: Iterable, prices: dict) -> dict[str, Rate]:
    """framework -> its per-run averages, over recorded runs that made at least one call."""
    sums: dict[str, list] = defaultdict(lambda: [0, 0, 0, 0.0])
    for record in records:
        usage = run_usage(record, prices)
        if usage.calls == 0:
            continue  # a RUN_ERROR before any call says nothing about what a run costs
        s = sums[record.framework]
        s[0] += 1
        s[1] += usage.calls
        s[2] += usage.prompt_tokens + usage.completion_tokens
        s[3] += usage.cost
    return {fw: Rate(n, calls / n, tokens / n, cost / n) for fw, (n, calls, tokens, cost) in sums.items()}


@dataclass(frozen=True)
class Projection:
    runs: dict[str, int]  # framework -> runs to make
    cost: float
    calls: float
    unknown: tuple[str, ...]  # frameworks with no recorded run to project from

    def line(self) -> str:
        per = ", ".join(f"{fw} {n}" for fw, n in sorted(self.runs.items()))
        return f"${self.cost:,.2f} for {sum(self.runs.values())} run(s) ({per}; ~{self.calls:,.0f} model calls)"


def project(specs: Iterable, known: dict[str, Rate]) -> Projection:
    """Runs to make (anything with .framework) times each framework's recorded per-run averages."""
    runs = Counter(spec.framework for spec in specs)
    unknown = tuple(sorted(fw for fw in runs if fw not in known))
    cost = sum(n * known[fw].cost for fw, n in runs.items() if fw in known)
    calls = sum(n * known[fw].calls for fw, n in runs.items() if fw in known)
    return Projection(dict(runs), cost, calls, unknown)


def check_projection(specs: list, known: dict[str, Rate], budget: float, seeds: tuple[int, ...]) -> Projection:
    """Refuse (BudgetError) a wave whose projection exceeds `budget`, naming the §8 alternative."""
    full = project(specs, known)
    if full.unknown:
        raise BudgetError(
            f"cannot project the cost: no recorded run of {', '.join(full.unknown)} to project from; "
            "run a pilot first (a slice of the wave with a small --budget) so its calls and tokens per run are recorded"
        )
    if full.cost <= budget:
        return full
    kept = tuple(sorted(seeds)[:CUT_SEEDS_TO])
    cut = project([s for s in specs if s.seed in kept], known)
    verdict = "fits" if cut.cost <= budget else "still exceeds it: cells would have to be cut next"
    raise BudgetError(
        f"projected spend {full.line()} exceeds the budget of ${budget:,.2f}. "
        f"§8 alternative: cut seeds {len(seeds)} -> {CUT_SEEDS_TO} (seeds {', '.join(map(str, kept))}) before any cell is cut: "
        f"projected {cut.line()}, which {verdict}"
    )


# ---------------------------------------------------------------------------
# The breaker
# ---------------------------------------------------------------------------


class Breaker:
    """Stops launching once spend reaches the cap. Runs in flight are not stopped: the next run is
    never launched. `spent` starts from what the wave (or project) has already spent."""

    def __init__(self, cap: float | None, spent: float = 0.0):
        self.cap, self.spent = cap, spent
        self.refused = 0

    @property
    def tripped(self) -> bool:
        return self.cap is not None and self.spent >= self.cap

    def may_launch(self, _item=None) -> bool:
        if self.tripped:
            self.refused += 1
            return False
        return True

    def add(self, cost: float) -> None:
        if not math.isfinite(cost) or cost < 0:
            raise BudgetError(f"a run reported a cost of {cost!r}")
        self.spent += cost
