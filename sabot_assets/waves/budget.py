"""The §8 cap at launch time: a projection before a wave, a breaker inside every run step.

SPEC v0.2.1 §8 caps spend at $500 a project. The CLI projects a wave before its first model call
and passes the spend ceiling to every Dagster run it launches as a tag; a run step (the CLI's, a UI
backfill's, a daemon-launched one) builds its breaker from that ceiling and the store's spend so
far, so launching stops at the same figure however the step was started. Usage the scripted model
reports costs no money and never counts against a provider's cap; it is capped only when a budget
is given (which is how the breaker is tested offline).
"""

from pathlib import Path

from sabot.budget import PROJECT_CAP_USD, Breaker, BudgetError, Projection, check_projection, usd
from sabot.store.db import connect
from sabot.store.spend import rates_of, spend_at
from sabot_assets.constants import SPEND_CEILING_TAG


def is_simulated(endpoint_label: str) -> bool:
    return endpoint_label.startswith("simulation")


def ceiling_for(spent: float, budget: float | None, simulated: bool) -> float | None:
    """Project spend at which launching stops: this wave's budget on top of what is spent, never past
    the project cap; no ceiling for simulated usage unless a budget is given."""
    if simulated:
        return None if budget is None else spent + budget
    return PROJECT_CAP_USD if budget is None else min(PROJECT_CAP_USD, spent + budget)


def plan_spend(store_path: Path, specs: list, seeds: tuple[int, ...], budget: float | None, endpoint_label: str) -> tuple[float | None, Projection | None, float]:
    """(ceiling, projection, spent so far) for the runs a wave will launch; BudgetError, before any
    model call, when the project cap is spent or the projection exceeds what is left."""
    simulated = is_simulated(endpoint_label)
    spent, known = 0.0, {}
    if Path(store_path).exists():
        with connect(store_path, read_only=True) as con:
            spent, known = spend_at(con, simulated), rates_of(con, simulated)
    ceiling = ceiling_for(spent, budget, simulated)
    if ceiling is None or not specs:
        return ceiling, None, spent
    left = ceiling - spent
    if left <= 0:
        raise BudgetError(f"the project has spent {usd(spent)} of its {usd(ceiling)} cap (SPEC §8); no run is launched")
    return ceiling, check_projection(specs, known, left, seeds), spent


def ceiling_tag(ceiling: float | None) -> dict[str, str]:
    return {} if ceiling is None else {SPEND_CEILING_TAG: repr(float(ceiling))}


def step_breaker(tags, spent_at, endpoint_label: str, replaying: bool, rates_at=lambda simulated: {}) -> Breaker:
    """The breaker of one run step: the run's ceiling tag (else the project cap against a provider),
    starting from the store's spend so far (`spent_at(simulated)`), each run in flight reserving its
    framework's recorded cost per run (`rates_at(simulated)`). Concurrent Dagster runs each start
    from the stored figure and do not see each other's reservations, so together they can pass the
    cap by the runs they hold in flight. A replay spends nothing and is never stopped."""
    simulated = is_simulated(endpoint_label)
    tagged = tags.get(SPEND_CEILING_TAG)
    ceiling = float(tagged) if tagged else (None if simulated else PROJECT_CAP_USD)
    if replaying or ceiling is None:
        return Breaker(None)
    return Breaker(ceiling, spent_at(simulated), {fw: rate.cost for fw, rate in rates_at(simulated).items()})


__all__ = ["BudgetError", "ceiling_for", "ceiling_tag", "is_simulated", "plan_spend", "step_breaker"]
