"""The §8 cap at launch time: a projection before a wave, a breaker inside every run step.

SPEC v0.2.1 §8 caps spend at $500 a project. The CLI projects a wave before its first model call
and passes the spend ceiling to every Dagster run it launches as a tag; a run step (the CLI's, a UI
backfill's, a daemon-launched one) builds its breaker from that ceiling and the store's spend so
far, so launching stops at the same figure however the step was started. Usage the scripted model
reports costs no money and never counts against a provider's cap; it is capped only when a budget
is given (which is how the breaker is tested offline).
"""

import os
from pathlib import Path

from sabot.budget import PROJECT_CAP_USD, Breaker, BudgetError, LedgerBreaker, Margin, Projection, check_projection, usd
from sabot.pricing import LOCAL_PRICE_ENV, PriceTable
from sabot.provenance import LOCAL_MODEL, endpoint_kind
from sabot.store.db import connect
from sabot.store.ledger import Ledger, ledger_path, spend_ledger
from sabot.store.spend import rates_of, stored_costs
from sabot_assets.constants import SPEND_CEILING_TAG
from sabot_assets.waves.concurrency import host_label


def is_simulated(endpoint_label: str) -> bool:
    """Whether the wave's calls cost no money: the scripted model's, and a local model server's
    (priced at $0 unless its user prices it; its runs are still never labelled simulation)."""
    return endpoint_label.startswith("simulation") or (
        endpoint_kind(endpoint_label) == LOCAL_MODEL and not os.environ.get(LOCAL_PRICE_ENV)
    )


def kind(simulated: bool) -> str:
    return "simulated" if simulated else "provider"


def ceiling_for(spent: float, budget: float | None, simulated: bool) -> float | None:
    """Margined project spend at which launching stops: this wave's budget on top of what is spent,
    never past the project cap; no ceiling for simulated usage unless a budget is given."""
    if simulated:
        return None if budget is None else spent + budget
    return PROJECT_CAP_USD if budget is None else min(PROJECT_CAP_USD, spent + budget)


def synced_ledger(store_path: Path, con=None) -> Ledger:
    """The store's ledger, holding every stored record's cost and no reservation of a dead process."""
    ledger = spend_ledger(ledger_path(store_path), host_label())  # the shared Postgres with worker hosts
    ledger.drop_dead_reservations()
    if con is not None:
        ledger.sync(stored_costs(con))
    elif Path(store_path).exists():
        with connect(store_path, read_only=True) as read:
            ledger.sync(stored_costs(read))
    return ledger


def pilot_worst_case(registry) -> tuple[Margin, float]:
    margin = Margin.from_registry(registry)
    return margin, margin.pilot_worst_case(PriceTable.from_registry(registry))


def plan_spend(
    store_path: Path, specs: list, seeds: tuple[int, ...], budget: float | None, endpoint_label: str, registry
) -> tuple[float | None, Projection | None, float]:
    """(ceiling, projection, margined spend so far) for the runs a wave will launch; BudgetError,
    before any model call, when the cap is spent, the margined projection exceeds what is left, or
    what is left cannot pay for one pilot run's worst case."""
    simulated = is_simulated(endpoint_label)
    margin, pilot = pilot_worst_case(registry)
    ledger = synced_ledger(store_path)
    settled, reserved = ledger.totals(kind(simulated))
    known = {}
    if Path(store_path).exists():
        with connect(store_path, read_only=True) as con:
            known = rates_of(con, simulated)
    spent = settled * margin.factor
    ceiling = ceiling_for(spent, budget, simulated)
    if ceiling is None or not specs:
        return ceiling, None, spent
    left = ceiling - (settled + reserved) * margin.factor
    if left <= 0:
        raise BudgetError(
            f"the project has spent {usd(spent)} (margined; {usd(settled)} metered) of its {usd(ceiling)} ceiling (SPEC §8); no run is launched"
        )
    projection = check_projection(specs, known, left, seeds, margin.factor)
    if projection.unknown and pilot * margin.factor > left:
        raise BudgetError(
            f"a pilot run of {', '.join(projection.unknown)} (no recorded run at this endpoint) can cost up to "
            f"{usd(pilot * margin.factor)} margined under the registered bounds ({margin.bounds_text()}), "
            f"more than the {usd(left)} left of the ceiling {usd(ceiling)}; no run is launched"
        )
    if not simulated and pilot * margin.factor > left:
        raise BudgetError(
            f"every provider run reserves its worst case before it launches, up to {usd(pilot * margin.factor)} margined "
            f"under the registered bounds ({margin.bounds_text()}), more than the {usd(left)} left of the ceiling "
            f"{usd(ceiling)}; no run is launched"
        )
    return ceiling, projection, spent


def ceiling_tag(ceiling: float | None) -> dict[str, str]:
    return {} if ceiling is None else {SPEND_CEILING_TAG: repr(float(ceiling))}


def _ceiling(tags, simulated: bool) -> float | None:
    tagged = tags.get(SPEND_CEILING_TAG)
    return float(tagged) if tagged else (None if simulated else PROJECT_CAP_USD)


def spend_is_capped(tags, endpoint_label: str, replaying: bool) -> bool:
    """Whether a step's launches are bounded by spend at all (else its breaker needs no store read):
    a replay never is; the scripted model only under a --budget."""
    return not replaying and _ceiling(tags, is_simulated(endpoint_label)) is not None


def step_breaker(tags, store_path: Path, con, endpoint_label: str, replaying: bool, registry) -> Breaker:
    """The breaker of one run step or schedule: the run's ceiling tag (else the project cap against
    a provider), reserving from the store-wide ledger, so concurrent commands and Dagster runs stop
    at the same figure between them. A run reserves its framework's recorded cost per run, a pilot
    run its registered worst case. A replay spends nothing and is never stopped.

    A provider run reserves its registered worst case whatever its framework's recorded rate: the
    gateway holds each call to that worst case (`sabot.budget.RunBound`), so what a run reserves is the
    most an honest provider can bill it, and no number of commands on one store passes the ceiling.
    A recorded rate would let every run in flight cost more than it reserved (a dearer provider, longer
    conversations). Usage the scripted model reports costs nothing and has no per-run dollar bound:
    there, a run reserves its framework's recorded rate."""
    simulated = is_simulated(endpoint_label)
    ceiling = _ceiling(tags, simulated)
    if replaying or ceiling is None:
        return Breaker(None)
    margin, pilot = pilot_worst_case(registry)
    ledger = synced_ledger(store_path, con)
    expected = {fw: rate.cost for fw, rate in rates_of(con, simulated).items()} if simulated else {}
    return LedgerBreaker(ledger, kind(simulated), ceiling, margin.factor, expected, pilot)


__all__ = [
    "BudgetError",
    "ceiling_for",
    "ceiling_tag",
    "is_simulated",
    "plan_spend",
    "spend_is_capped",
    "step_breaker",
    "synced_ledger",
]
