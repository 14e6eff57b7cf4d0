"""Each call is held at its own worst case before it is sent (its prompt counted, plus its max_tokens, at
its model's registered price), so an honest provider billing every call the most its request allows
never takes a run past its reservation, however many of its calls are in flight at once."""

import threading

import httpx

from adapters.gateway import CallPolicy, ModelGateway, Upstream
from sabot.budget import Margin
from sabot.pricing import PriceTable
from tests.fault_provider import FaultProvider

KEY = "sk-proj-RESERVE-7c1d"
CALLS_AT_ONCE = 8
PROMPT = "x" * 150_000  # with max_tokens below, a call's worst case is about a quarter of the run's
MAX_TOKENS = 25_000


def _policy() -> CallPolicy:
    return CallPolicy.from_doc(
        {
            "retry": {
                "max_attempts": 1,
                "max_total_seconds": 30,
                "initial_backoff_seconds": 0.05,
                "max_backoff_seconds": 0.2,
                "jitter_seconds": 0.0,
                "max_retry_after_seconds": 5,
                "retry_on_status": [500, 502, 503, 504],
            },
            "call_timeout_seconds": 20,
            "run_wall_limit_seconds": 60,
            "limits": {"provider": None, "scripted": None},
        },
        "test policy",
    )


def test_concurrent_calls_billed_at_their_limits_never_pass_the_runs_reservation(registry):
    prices = PriceTable.from_registry(registry)
    bound = Margin.from_registry(registry).run_bound(prices)
    statuses, lock = [], threading.Lock()
    with FaultProvider("max-usage", delay=0.5) as provider:
        upstream = Upstream(provider.base_url, KEY, f"provider {provider.base_url}", scripted=False)
        with ModelGateway(upstream, _policy(), "reserve-cell", bound=bound) as gateway:

            def call() -> None:
                body = {
                    "model": "gpt-5.6-terra",
                    "messages": [{"role": "user", "content": PROMPT}],
                    "max_tokens": MAX_TOKENS,
                }
                status = httpx.post(
                    gateway.base_url + "/chat/completions", json=body, timeout=60, trust_env=False
                ).status_code
                with lock:
                    statuses.append(status)

            threads = [threading.Thread(target=call) for _ in range(CALLS_AT_ONCE)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        exchanges = gateway.exchanges
    answered = sum(1 for s in statuses if s == 200)
    paid = sum(prices.cost(x["model"] or "gpt-5.6-terra", x["usage"]) for x in exchanges if x.get("status") == 200)
    assert 0 < answered < CALLS_AT_ONCE and statuses.count(403) == CALLS_AT_ONCE - answered  # the rest were not sent
    assert provider.answered == answered
    assert paid <= bound.limit_usd  # what the run reserved holds, with every call in flight at once
    assert bound.billed_beyond_request == 0  # an honest provider: no call billed past its own limits


def test_a_provider_billing_past_a_requests_own_limits_is_named_when_the_run_is_cut(registry):
    prices = PriceTable.from_registry(registry)
    bound = Margin.from_registry(registry).run_bound(prices)
    with FaultProvider("max-usage", usage_scale=200) as provider:  # every call billed 200 times what its request allows
        upstream = Upstream(provider.base_url, KEY, f"provider {provider.base_url}", scripted=False)
        with ModelGateway(upstream, _policy(), "overbilled-cell", bound=bound) as gateway:
            body = {
                "model": "gpt-5.6-terra",
                "messages": [{"role": "user", "content": "Summarise the refund policy."}],
                "max_tokens": 50,
            }
            for _ in range(40):
                reply = httpx.post(gateway.base_url + "/chat/completions", json=body, timeout=60, trust_env=False)
                if reply.status_code != 200:
                    break
    assert reply.status_code == 403 and bound.billed_beyond_request > 0
    message = reply.json()["error"]["message"]
    assert "would pass the run's registered bound" in message and "billed past their own request's limits" in message, (
        message
    )
