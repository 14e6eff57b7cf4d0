"""Whether a run's gateway may send a call, and for how long: the endpoint's breaker and Retry-After
pauses, the run's wall limit, the call priced against the run's registered bound (sabot.budget.RunBound)
and the endpoint's rate limiter; and when a call's retry budget is spent. The functions take the run's
ModelGateway (adapters/gateway/server.py) for the state they read and set."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import tenacity

from adapters.gateway.exchange import completion_cap, prompt_token_bound
from adapters.gateway.failures import RUN_BOUND, _Stop, error_body
from adapters.gateway.limiter import PROBE_WAIT, RateLimited
from adapters.gateway.provider_errors import trip
from adapters.gateway.recording import give_up
from adapters.gateway.taxonomy import ProviderFailure

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())


def admit(gateway, exchange: dict, where: str, model: str | None, body: Any, tokens: int):
    """(seconds the call may take, its hold on the run's bound, None) when it may be sent; else the
    answer the client gets instead. _Stop when the endpoint may not be called."""
    wait_for_endpoint(gateway, where, model)
    budget = min(gateway.policy.max_total_seconds, gateway._deadline - time.monotonic())
    if budget <= 0:
        return (
            None,
            None,
            give_up(
                gateway,
                exchange,
                504,
                f"{where}: the run's wall limit of {gateway.policy.run_wall_limit_seconds:g} s is spent",
            ),
        )
    held = None
    if (
        gateway.bound is not None
    ):  # held at no less than the call's own worst case: its counted prompt plus its completion cap
        worst = (
            gateway.bound.call_worst_case(model, prompt_token_bound(body), completion_cap(body))
            if gateway.bound.prices.prices
            else 0.0
        )
        held, why = gateway.bound.admit(tokens, worst)
        if why is not None:
            return None, None, over_bound(gateway, exchange, where, model, why)
    if gateway.limiter is not None:
        try:
            gateway.limiter.admit(tokens, timeout=budget)
        except RateLimited as exc:
            if held is not None:
                gateway.bound.settle(held, model, None, answered=False)
            return None, None, give_up(gateway, exchange, 429, f"{where}: {exc}")
    return budget, held, None


def over_bound(gateway, exchange: dict, where: str, model: str | None, why: str) -> tuple[int, str, bytes]:
    """The call would pass the run's registered bound: not sent; the run is RUN_ERROR (no retry-once), its paid calls kept."""
    failure = ProviderFailure(RUN_BOUND, None, gateway.upstream.label, model, f"{where}: call not sent: {why}")
    payload = error_body(failure.message, RUN_BOUND)
    exchange.update(status=403, error=failure.message, reply=json.loads(payload))
    with gateway._lock:
        if gateway.cell_failure is None:
            gateway.cell_failure = failure
            log.warning("%s: %s", gateway.cell, failure.message)
    return 403, "application/json", payload  # a 4xx no client retries


def budget_spent(state: tenacity.RetryCallState, budget: float) -> bool:
    """The call's budget is spent before the next attempt, unless that attempt waits on a Retry-After
    (at most the ceiling: a longer one has stopped the wave already)."""
    if getattr(state.outcome.exception() if state.outcome else None, "retry_after", None) is not None:
        return False
    return state.seconds_since_start + state.upcoming_sleep >= budget


def wait_for_endpoint(gateway, where: str, model: str | None) -> float:
    """Refuse at once while the endpoint is open; sit out a pause a Retry-After asked for (never an
    immediate resend), or a half-open breaker's probe by another process, looking again after
    each wait (the endpoint may have opened, or the pause grown, meanwhile); stop when a pause is
    past the ceiling or the run's wall limit."""
    waited = 0.0
    while gateway.circuit is not None:
        opened = gateway.circuit.opened()
        if opened:
            raise _Stop(ProviderFailure.from_dict(opened))
        wait, header = gateway.circuit.paused_for()
        if wait <= 0:
            break
        if wait > gateway.policy.max_retry_after_seconds or time.monotonic() + wait > gateway._deadline:
            failure = ProviderFailure(
                "retry_after",
                429,
                gateway.upstream.label,
                model,
                f"{where} asked for quiet with Retry-After: {header} ({wait:.0f} s left), past the ceiling of "
                f"{gateway.policy.max_retry_after_seconds:g} s or the run's wall limit",
            )
            raise _Stop(failure if header == PROBE_WAIT else trip(gateway, failure))  # a probe's wait opens nothing
        time.sleep(wait)
        waited += wait
    return waited
