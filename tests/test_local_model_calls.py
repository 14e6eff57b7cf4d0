"""Requests a real local server can answer: the registered completion limit on every call, a local
model server's own timeouts and concurrency cap, and a timed-out call neither retried nor left for
the next call to queue behind. Every upstream is a real HTTP server on 127.0.0.1."""

import threading

import openai
import pytest

from adapters.gateway import CallPolicy, ModelGateway, Upstream
from tests.odd_replies import OddReplyServer

MESSAGES = [{"role": "user", "content": "hello"}]


def policy(**profile) -> CallPolicy:
    doc = {
        "retry": {
            "max_attempts": 3,
            "max_total_seconds": 20,
            "initial_backoff_seconds": 0.05,
            "max_backoff_seconds": 0.2,
            "jitter_seconds": 0.05,
            "max_retry_after_seconds": 5,
            "retry_on_status": [429, 500, 502, 503, 504],
        },
        "call_timeout_seconds": 10,
        "run_wall_limit_seconds": 60,
        "limits": {"provider": None, "scripted": None},
        "max_completion_tokens": 3000,
        "profiles": {
            "local_model": {"max_concurrent_calls": 1, "max_completion_tokens": 512, "retry_timeouts": False, **profile}
        },
    }
    return CallPolicy.from_doc(doc, "test policy")


def gateway(server, call_policy: CallPolicy, local: bool, cell: str = "cell") -> ModelGateway:
    upstream = Upstream(
        server.base_url, "sk-local-model", f"local model at {server.base_url}", scripted=False, local_model=local
    )
    return ModelGateway(upstream, call_policy, cell)


def ask(gw: ModelGateway, **extra):
    client = openai.OpenAI(base_url=gw.base_url, api_key="x", max_retries=0, timeout=30)
    return client.chat.completions.create(model="gpt-5.6-terra", messages=MESSAGES, **extra)


@pytest.fixture(autouse=True)
def own_slots(tmp_path, monkeypatch):
    monkeypatch.setenv("SABOT_LIMITER_DIR", str(tmp_path / "limiter"))  # this test's call slots and breakers only


def test_the_registered_completion_limit_is_sent_on_every_call(registry):
    registered = CallPolicy.load(registry)
    assert (
        registered.max_completion_tokens
        == registry.doc("standard/spend_margin.v1.json")["pilot_run_bounds"]["max_completion_tokens_per_call"]
    )
    local = registered.for_endpoint(local_model=True)
    assert (
        local.max_completion_tokens
        == registry.doc("standard/call_policy.v3.json")["profiles"]["local_model"]["max_completion_tokens"]
    )
    with OddReplyServer("no-stop") as server:
        with gateway(server, registered, local=False) as gw:
            ask(gw)
            ask(gw, max_tokens=50)  # a client's own smaller limit stands
            ask(gw, max_completion_tokens=10**6)  # a client's own field is capped, and no second field is added
        with gateway(server, registered, local=True) as gw:
            ask(gw)
            ask(gw, stream=True)
    sent = [(r.get("max_tokens"), r.get("max_completion_tokens")) for r in server.requests]
    assert sent == [
        (3000, None),
        (50, None),
        (None, 3000),
        (local.max_completion_tokens, None),
        (local.max_completion_tokens, None),
    ]
    assert [x["completion_limit"] for x in gw.exchanges] == [local.max_completion_tokens] * 2


@pytest.mark.parametrize("local,peak", [(True, 1), (False, 2)])
def test_a_local_server_gets_one_call_at_a_time_from_every_run(local, peak):
    with OddReplyServer("empty", slow_seconds=0.3) as server:
        with gateway(server, policy(), local, "run-a") as a, gateway(server, policy(), local, "run-b") as b:
            threads = [threading.Thread(target=ask, args=(gw,)) for gw in (a, b, a, b)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
        assert len(server.requests) == 4 and all(x["status"] == 200 for x in a.exchanges + b.exchanges)
        assert (server.in_flight_peak == 1) if local else (server.in_flight_peak >= peak), server.in_flight_peak


def test_a_timed_out_call_is_not_retried_and_the_next_call_waits_until_the_server_has_answered_it():
    quick = policy(first_byte_timeout_seconds=0.4, max_total_seconds=5)
    with OddReplyServer("empty", slow_seconds=3.0) as server:
        with (
            gateway(server, quick, True, "run-a") as a,
            gateway(server, policy(first_byte_timeout_seconds=10), True, "run-b") as b,
        ):
            with pytest.raises(openai.APIStatusError, match="waiting for the first byte.*not sent again"):
                ask(a)
            assert server.spans == [], "the caller got its timeout before the server had answered"
            ask(b)  # another run's call, at once: it goes out only when the server has answered the abandoned one
    assert len(server.requests) == 2, "the timed-out call was sent once"
    (_, first_out), (second_in, _) = server.spans
    assert second_in >= first_out - 0.05, f"the next call queued behind the abandoned one: {server.spans}"
    [failed] = a.exchanges
    assert [x["error"] for x in failed["attempts"]] == ["timeout after 0.4 s waiting for the first byte"]


def test_an_answer_that_trickles_past_the_total_time_is_a_timeout():
    retry = {
        "max_attempts": 1,
        "max_total_seconds": 10,
        "initial_backoff_seconds": 0.05,
        "max_backoff_seconds": 0.2,
        "jitter_seconds": 0.05,
        "max_retry_after_seconds": 5,
        "retry_on_status": [500],
    }
    quick = CallPolicy.from_doc(
        {
            "retry": retry,
            "call_timeout_seconds": 10,
            "total_timeout_seconds": 0.6,
            "first_byte_timeout_seconds": 5,
            "run_wall_limit_seconds": 60,
            "limits": {},
        },
        "test policy",
    )
    with OddReplyServer("no-stop", trickle_seconds=0.3) as server:
        with gateway(server, quick, local=False) as gw:
            with pytest.raises(openai.APIStatusError, match="timed out after 0.6 s before the answer ended"):
                ask(gw, stream=True)
