"""The harness survives whatever a real model server answers: an empty reply, one that never stops, a
malformed or absent tool call, a reply in the wrong role, garbage. In every framework each is that
run's outcome (a scored run whose task failed, or RUN_ERROR naming what the framework raised), never
an exception out of the runner, which would crash the wave's Dagster step (CrewAI's ValueError on an
empty reply once did). Every reply comes from a real HTTP server on 127.0.0.1 (tests/odd_replies.py)
registered as a local model server, so the local_model profile's requests are what it receives."""

import pytest

from adapters.gateway import CallPolicy
from adapters.runner import PIPELINES, RunSpec, run
from tests.odd_replies import KINDS, OddReplyServer

FRAMEWORKS = tuple(sorted(PIPELINES))


def quick_policy() -> CallPolicy:
    doc = {
        "retry": {
            "max_attempts": 2,
            "max_total_seconds": 20,
            "initial_backoff_seconds": 0.05,
            "max_backoff_seconds": 0.2,
            "jitter_seconds": 0.05,
            "max_retry_after_seconds": 5,
            "retry_on_status": [429, 500, 502, 503, 504],
        },
        "call_timeout_seconds": 10,
        "run_wall_limit_seconds": 120,
        "limits": {"provider": None, "scripted": None},
        "max_completion_tokens": 3000,
        "profiles": {"local_model": {"max_concurrent_calls": 1, "max_completion_tokens": 64}},
    }
    return CallPolicy.from_doc(doc, "quick test policy")


@pytest.fixture
def local_server(monkeypatch, tmp_path):
    def point_at(server: OddReplyServer):
        monkeypatch.setenv("SABOT_MODEL_BASE_URL", server.base_url)
        monkeypatch.setenv("SABOT_MODEL_LOCAL", "1")
        monkeypatch.delenv("SABOT_MODEL_API_KEY", raising=False)
        monkeypatch.setenv("SABOT_LIMITER_DIR", str(tmp_path / "limiter"))

    return point_at


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_any_reply_is_the_runs_outcome_never_an_exception(framework, kind, registry, tmp_path, local_server):
    spec = RunSpec("odd", 2, framework, "default", "T1", None, 11)
    with OddReplyServer(kind) as server:
        local_server(server)
        record = run(spec, registry, tmp_path, call_policy=quick_policy()).record  # returns: the step goes on
    assert server.requests, "the pipeline reached the server"
    assert all(r.get("max_tokens") == 64 for r in server.requests), "the local profile's completion limit on every call"
    assert not record.task_passed, f"a {kind} reply never makes T1 pass"
    endpoint = record.extra["endpoint"]
    assert endpoint.startswith("local model odd-replies-test-model at http://127.0.0.1:"), endpoint
    if (
        record.error is not None
    ):  # RUN_ERROR naming the attempt, what failed and the endpoint (a run cut by its call bound is not retried)
        assert record.error.startswith(("attempt 2: ", "attempt 1: ")) and "local model" in record.error, record.error
        assert record.events == (), "a RUN_ERROR record keeps no half-run trace"
        assert record.extra.get("exchanges"), "its calls are kept: the RUN_ERROR replays as the same failure"
    else:  # scored: the run completed, its task failed, its calls recorded
        assert record.extra["exchanges"] and all(x["status"] == 200 for x in record.extra["exchanges"])


def test_a_crash_on_an_empty_reply_replays_as_the_same_run_error_with_no_call(registry, tmp_path, local_server):
    from adapters.runner import Recording

    spec = RunSpec("odd", 2, "crewai", "default", "T1", None, 11)
    with OddReplyServer("empty") as server:
        local_server(server)
        live = run(spec, registry, tmp_path / "live", call_policy=quick_policy()).record
        calls = len(server.requests)
    assert live.error and "ValueError: Invalid response from LLM call - None or empty" in live.error
    recording = Recording(live.extra["exchanges"], live.extra["endpoint"], [])
    replayed = run(
        spec, registry, tmp_path / "replay", replay=recording, call_policy=quick_policy()
    ).record  # the server is gone
    assert replayed.error.split(" (endpoint:")[0] == live.error.split(" (endpoint:")[0] and calls == len(
        server.requests
    )
