"""The model gateway at the call: retries with backoff honouring Retry-After, a bounded budget that
ends in RUN_ERROR naming the endpoint and status, timeouts, the cross-process limiter, stream usage.
Every upstream is a real HTTP server on 127.0.0.1; the test policy keeps waits short."""

import json
import subprocess
import sys
import textwrap
import time

import openai
import pytest

from adapters.gateway import CallPolicy, ModelGateway, RateLimit, Upstream
from adapters.runner import RunSpec, run
from adapters.scripted.policy import ScriptedPolicy
from adapters.scripted.latency import Latency
from adapters.scripted.reply import Reply
from adapters.scripted.server import ScriptedModelServer
from tests.conftest import PROJECT

SECRET = "sk-live-DO-NOT-STORE-0123456789"
SPEC = RunSpec("t", 2, "langgraph", "default", "T1", "O1", 11)


def fast_policy(**changes) -> CallPolicy:
    doc = {
        "retry": {
            "max_attempts": 4,
            "max_total_seconds": 20,
            "initial_backoff_seconds": 0.05,
            "max_backoff_seconds": 0.2,
            "jitter_seconds": 0.05,
            "max_retry_after_seconds": 5,
            "retry_on_status": [429, 500, 502, 503, 504],
        },
        "call_timeout_seconds": 5,
        "run_wall_limit_seconds": 60,
        "limits": {"provider": None, "scripted": None},
    }
    for key, value in changes.items():
        if key in doc["retry"]:
            doc["retry"][key] = value
        else:
            doc[key] = value
    return CallPolicy.from_doc(doc, "test policy")


class Flaky:
    """A responder that answers the first `failures` calls with the given error, then like the policy."""

    def __init__(self, failure: Reply, failures: int, run_id: str = SPEC.run_id):
        self.failure, self.left, self.policy = failure, failures, ScriptedPolicy(run_id, weak_model="gpt-5.6-luna")
        self.times: list[float] = []

    def __call__(self, request: dict) -> Reply:
        self.times.append(time.monotonic())
        if self.left > 0:
            self.left -= 1
            return self.failure
        return self.policy(request)


def as_provider(monkeypatch, server):
    monkeypatch.setenv("SABOT_MODEL_BASE_URL", server.base_url)
    monkeypatch.setenv("SABOT_MODEL_API_KEY", SECRET)


def test_a_429_with_retry_after_then_success_waits_and_the_run_succeeds(registry, tmp_path, monkeypatch):
    flaky = Flaky(Reply(status=429, error="slow down", headers=(("Retry-After", "0.3"),)), failures=3)
    with ScriptedModelServer(flaky) as server:
        as_provider(monkeypatch, server)
        record = run(SPEC, registry, tmp_path, call_policy=fast_policy()).record
    assert record.error is None and record.events, "no RUN_ERROR: the gateway's retries absorbed the 429s"
    gaps = [b - a for a, b in zip(flaky.times, flaky.times[1:4])]
    assert len(gaps) == 3 and all(g >= 0.3 for g in gaps), f"each retry waited at least Retry-After: {gaps}"
    first = record.extra["exchanges"][0]
    assert [a["status"] for a in first["attempts"]] == [429, 429, 429, 200] and first["status"] == 200
    assert all(a["retry_after"] == 0.3 for a in first["attempts"][:3])
    assert SECRET not in json.dumps(record.extra)


def test_an_endpoint_down_past_the_budget_is_run_error_naming_endpoint_and_status(registry, tmp_path, monkeypatch):
    down = Flaky(Reply(status=500, error="upstream broke"), failures=10**6)
    with ScriptedModelServer(down) as server:
        as_provider(monkeypatch, server)
        record = run(SPEC, registry, tmp_path, call_policy=fast_policy(max_attempts=3)).record
        calls, base_url = len(server.exchanges), server.base_url
    assert record.error and record.error.startswith("attempt 2: CallBudgetSpent")
    assert f"provider {base_url}" in record.error and "answered 500" in record.error
    assert "after 3 attempt(s)" in record.error
    assert calls == 2 * 3, "bounded: 3 attempts for the one call of each of the runner's two tries, nothing more"
    [failed] = record.extra["exchanges"]  # the failed exchange is kept, marked failed, for replay
    assert failed["status"] == 500 and failed["error"] == record.error.split(": ", 2)[2].rsplit(" (endpoint:", 1)[0]
    assert not record.task_passed and SECRET not in record.error


def test_a_hung_endpoint_times_out_per_call_within_the_budget(registry, tmp_path, monkeypatch):
    with ScriptedModelServer(ScriptedPolicy(SPEC.run_id), latency=Latency(fixed=3.0)) as server:
        as_provider(monkeypatch, server)
        started = time.monotonic()
        record = run(SPEC, registry, tmp_path, call_policy=fast_policy(max_attempts=2, call_timeout_seconds=0.3)).record
        elapsed = time.monotonic() - started
    assert record.error and "timed out after 0.3 s" in record.error and "answered" not in record.error
    assert elapsed < 2 * 3.0, "the per-call timeout cut the hung calls short"


def test_a_dead_port_fails_as_connection_error_after_the_budget(registry, tmp_path, monkeypatch):
    monkeypatch.setenv("SABOT_MODEL_BASE_URL", "http://127.0.0.1:9/v1")  # discard port: nothing listens
    monkeypatch.setenv("SABOT_MODEL_API_KEY", SECRET)
    record = run(SPEC, registry, tmp_path, call_policy=fast_policy(max_attempts=2)).record
    assert record.error and "connection failed" in record.error and "127.0.0.1:9" in record.error
    assert "after 2 attempt(s)" in record.error and SECRET not in record.error


def test_the_run_wall_limit_stops_further_calls(tmp_path):
    with ScriptedModelServer(lambda r: Reply(content="ok")) as server:
        upstream = Upstream(server.base_url, "k", "provider test", scripted=False)
        warm = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)  # lazy imports off the clock
        warm.chat.completions.create(model="gpt-5.6-terra", messages=[{"role": "user", "content": "warm"}])
        with ModelGateway(upstream, fast_policy(run_wall_limit_seconds=1.5), "wall-cell") as gateway:
            client = openai.OpenAI(base_url=gateway.base_url, api_key="x", max_retries=0)
            client.chat.completions.create(model="gpt-5.6-terra", messages=[{"role": "user", "content": "hi"}])
            time.sleep(1.6)  # past the run's wall limit
            with pytest.raises(openai.APIStatusError, match="wall limit of 1.5 s is spent"):
                client.chat.completions.create(model="gpt-5.6-terra", messages=[{"role": "user", "content": "again"}])
        assert len(server.exchanges) == 2  # the warm-up and the first call: the second never left the gateway
    assert "wall limit" in gateway.failure


def test_a_stream_is_asked_for_usage_and_the_client_gets_the_stream_it_asked_for():
    with ScriptedModelServer(lambda r: Reply(content="a streamed answer")) as server:
        upstream = Upstream(server.base_url, "k", "simulation", scripted=True)
        with ModelGateway(upstream, fast_policy(), "stream-cell") as gateway:
            client = openai.OpenAI(base_url=gateway.base_url, api_key="x", max_retries=0)
            chunks = list(
                client.chat.completions.create(
                    model="gpt-5.6-terra", stream=True, messages=[{"role": "user", "content": "hello"}]
                )
            )
        [sent] = server.exchanges
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "a streamed answer"
    assert all(c.choices for c in chunks) and all(c.usage is None for c in chunks)  # no chunk it did not ask for
    assert sent["request"]["stream_options"] == {"include_usage": True}
    [exchange] = gateway.exchanges
    assert "stream_options" not in exchange["request"]  # recorded as the client sent it
    assert exchange["usage"]["prompt_tokens"] > 0 and exchange["usage"]["completion_tokens"] > 0


LIMITER_CHILD = textwrap.dedent("""
    import json, sys, time
    from adapters.gateway.limiter import EndpointLimiter
    from adapters.gateway.policy import RateLimit
    limiter = EndpointLimiter("https://provider.example/v1", RateLimit(requests=2, tokens=None, window_seconds=1.0), sys.argv[1])
    stamps = []
    for _ in range(3):
        limiter.admit(tokens=10, timeout=30)
        stamps.append(time.time())
    print(json.dumps(stamps))
""")


def test_one_limiter_per_endpoint_is_shared_by_separate_processes(tmp_path):
    children = [
        subprocess.Popen(
            [sys.executable, "-c", LIMITER_CHILD, str(tmp_path)], cwd=PROJECT, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    stamps = sorted(t for child in children for t in json.loads(child.communicate(timeout=60)[0]))
    assert len(stamps) == 6
    # Never more than 2 admissions per 1-second window across both processes (0.9 s: the stamps are
    # taken just after each admission, a few ms late); two private limiters would admit 4 at once.
    for i, t in enumerate(stamps):
        assert sum(1 for u in stamps[i:] if u - t < 0.9) <= 2, stamps


def test_the_call_policy_is_registered_and_an_override_file_is_laid_over_it(registry, tmp_path):
    policy = CallPolicy.load(registry, environ={})
    assert policy.max_attempts >= 3 and 429 in policy.retry_on_status and policy.limit_for(scripted=True) is None
    assert policy.client_timeout > policy.max_total_seconds + policy.call_timeout_seconds
    override = tmp_path / "policy.json"
    override.write_text(json.dumps({"retry": {"max_attempts": 2}, "limits": {"scripted": {"requests_per_window": 5}}}))
    tuned = CallPolicy.load(registry, environ={"SABOT_CALL_POLICY": str(override)})
    assert tuned.max_attempts == 2 and tuned.max_total_seconds == policy.max_total_seconds
    assert tuned.limit_for(scripted=True) == RateLimit(5, None, 60.0)
    override.write_text(json.dumps({"retry": {"max_attempts": "many"}}))
    with pytest.raises(ValueError, match="policy.json: malformed call policy"):
        CallPolicy.load(registry, environ={"SABOT_CALL_POLICY": str(override)})


# -- record and replay of one run ------------------------------------------------------------------


def recorded_run(registry, tmp_path, spec=SPEC):
    from adapters.runner import Recording

    outcome = run(spec, registry, tmp_path / "live", call_policy=fast_policy())
    record = outcome.record
    return record, Recording(record.extra["exchanges"], record.extra["endpoint"], outcome.intent)


@pytest.mark.parametrize(
    "framework,config,operator",
    [
        ("langgraph", "default", "O1"),
        ("langgraph", "guardrail", "O3"),
        ("crewai", "default", "O2"),
        ("crewai", "guardrail", "O1"),
        ("autogen", "default", "O5"),
        ("autogen", "guardrail", "O4"),
    ],
)
def test_a_replayed_run_sends_nothing_and_equals_the_recorded_one(
    registry, tmp_path, monkeypatch, framework, config, operator
):
    from adapters.scripted import server as scripted_server

    spec = RunSpec("t", 2, framework, config, "T3", operator, 11)
    record, recording = recorded_run(registry, tmp_path, spec)
    monkeypatch.setattr(
        scripted_server.ScriptedModelServer, "start", lambda self: pytest.fail("replay started a server")
    )
    replayed = run(spec, registry, tmp_path / "replay", replay=recording, call_policy=fast_policy())
    assert record.error is None and replayed.record == record and replayed.intent == recording.intent
    assert record.extra["usage"]["calls"] == len(record.extra["exchanges"]) > 0


def test_a_request_missing_from_the_recording_fails_loudly_naming_cell_and_call(registry, tmp_path):
    from adapters.gateway import ReplayMiss
    from adapters.runner import Recording

    record, recording = recorded_run(registry, tmp_path)
    missing = Recording(recording.exchanges[:1], recording.endpoint_label, recording.intent)  # drop call 2 onward
    with pytest.raises(
        ReplayMiss,
        match=rf"replay of {SPEC.run_id}: call 2 \(POST /chat/completions, model gpt-5.6-terra.*not in the recording",
    ):
        run(SPEC, registry, tmp_path / "replay", replay=missing, call_policy=fast_policy())


def test_a_recorded_exchange_the_replay_never_asks_for_fails_naming_cell_and_call(registry, tmp_path):
    """Every recorded exchange is used exactly once: one left over means the run did not go as
    recorded (e.g. a reply edited so the pipeline stops earlier), never a quiet success."""
    from adapters.gateway import ReplayMiss
    from adapters.runner import Recording

    record, recording = recorded_run(registry, tmp_path)
    last = recording.exchanges[-1]
    extra = {
        **last,
        "n": len(recording.exchanges) + 1,
        "key": "f" * 64,
        "request": {**last["request"], "model": "gpt-extra"},
    }
    padded = Recording([*recording.exchanges, extra], recording.endpoint_label, recording.intent)
    with pytest.raises(
        ReplayMiss,
        match=rf"replay of {SPEC.run_id}: recorded call {extra['n']} \(POST /chat/completions, model gpt-extra, "
        rf"request key ffffffffffffffff\) was never asked for",
    ):
        run(SPEC, registry, tmp_path / "replay", replay=padded, call_policy=fast_policy())
    assert (
        run(SPEC, registry, tmp_path / "again", replay=recording, call_policy=fast_policy()).record == record
    )  # the exact recording replays


def test_a_failed_exchange_replays_as_the_same_failure(registry, tmp_path, monkeypatch):
    from adapters.runner import Recording

    down = Flaky(Reply(status=500, error="upstream broke"), failures=10**6)
    with ScriptedModelServer(down) as server:
        as_provider(monkeypatch, server)
        failed = run(SPEC, registry, tmp_path / "live", call_policy=fast_policy(max_attempts=2)).record
    monkeypatch.delenv("SABOT_MODEL_BASE_URL")
    recording = Recording(failed.extra["exchanges"], "", [])
    replayed = run(SPEC, registry, tmp_path / "replay", replay=recording, call_policy=fast_policy()).record
    assert replayed.error and not replayed.task_passed, "never replayed as a success"
    assert replayed.error.split(" (endpoint:")[0] == failed.error.split(" (endpoint:")[0]
