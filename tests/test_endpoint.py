"""The endpoint switch: a provider when a base URL and key are set; the key never stored; a dead
endpoint is retried once and recorded RUN_ERROR, never raised."""

import json

from adapters.runner import RunSpec, run
from adapters.scripted.policy import ScriptedPolicy
from adapters.scripted.server import ScriptedModelServer
from sabot.trace import to_runresult

SECRET = "sk-live-DO-NOT-STORE-0123456789"


def test_a_provider_endpoint_is_used_and_its_key_is_never_recorded(registry, tmp_path, monkeypatch, caplog):
    provider = ScriptedPolicy("provider-stand-in")
    with ScriptedModelServer(provider) as server:
        base_url = server.base_url
        monkeypatch.setenv("SABOT_MODEL_BASE_URL", base_url)
        monkeypatch.setenv("SABOT_MODEL_API_KEY", SECRET)
        outcome = run(RunSpec("t", 2, "langgraph", "default", "T1", "O1", 11), registry, tmp_path)
        exchanges = list(server.exchanges)
    record = outcome.record
    assert record.error is None and exchanges, "the provider served the run"
    assert record.extra["endpoint"] == f"provider {base_url}"
    assert outcome.intent == []  # no simulator intent exists for a provider run
    assert {x["request"]["model"] for x in exchanges} == {"gpt-5.6-terra"}  # the pinned model ids
    assert all(x["headers"].get("authorization") == "Bearer ***" for x in exchanges)
    stored = json.dumps(to_runresult(record))
    assert SECRET not in stored and SECRET not in caplog.text


def test_a_dead_endpoint_is_retried_once_then_recorded_as_run_error(registry, tmp_path, monkeypatch):
    monkeypatch.setenv("SABOT_MODEL_BASE_URL", "http://127.0.0.1:9/v1")  # discard port: nothing listens
    monkeypatch.setenv("SABOT_MODEL_API_KEY", SECRET)
    quick = tmp_path / "policy.json"  # the call policy's budget, made short through its override file
    quick.write_text(
        json.dumps({"retry": {"max_attempts": 2, "initial_backoff_seconds": 0.05, "jitter_seconds": 0.05}})
    )
    monkeypatch.setenv("SABOT_CALL_POLICY", str(quick))
    record = run(RunSpec("t", 2, "langgraph", "default", "T2", None, 11), registry, tmp_path / "runs").record
    assert record.error and record.error.startswith("attempt 2: CallBudgetSpent")
    assert "connection failed" in record.error and "after 2 attempt(s)" in record.error
    assert "127.0.0.1:9" in record.error  # names where it failed
    assert SECRET not in record.error and not record.task_passed
