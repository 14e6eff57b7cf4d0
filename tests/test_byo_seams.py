"""The seams the platform owns, and the scaffold a team starts from."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from adapters.byo.runner import as_reply, execute
from adapters.scripted.server import ScriptedModelServer
from sabot.plugins import resolve_path
from sabot.projects import Project
from sabot.trace import to_runresult
from sabot_assets.cli import main

ROOT = Path(__file__).resolve().parents[1]
REFUND_DESK = ROOT / "examples" / "refund_desk"


def test_with_a_provider_set_the_run_goes_to_the_provider(tmp_path, monkeypatch):
    """SABOT_MODEL_BASE_URL + key: the proxy forwards there (here a stand-in provider on 127.0.0.1),
    swaps the drafter's model for O4, and the key never reaches the pipeline or the record."""
    project = Project.load(REFUND_DESK)
    monkeypatch.syspath_prepend(str(REFUND_DESK))
    double = resolve_path(project.doc["responder"])(1)
    with ScriptedModelServer(lambda request: as_reply(double(request))) as provider:
        monkeypatch.setenv("SABOT_MODEL_BASE_URL", provider.base_url)
        monkeypatch.setenv("SABOT_MODEL_API_KEY", "sk-provider-secret-123")
        record = execute(project, "O4", 2, "provider", tmp_path / "run")
        received, url = list(provider.exchanges), provider.base_url
    assert record.extra["endpoint"] == f"provider {url}"
    assert received and all(x["headers"]["authorization"] == "Bearer ***" for x in received)
    assert {x["request"]["model"] for x in received} == {"refund-desk-large", "refund-desk-mini"}
    assert record.injection_verified and "refund-desk-mini" in record.served_model_ids()
    assert "sk-provider-secret-123" not in json.dumps(to_runresult(record))


def test_a_dead_provider_is_a_run_error_naming_it(tmp_path, monkeypatch):
    from adapters.byo.runner import run_project
    from adapters.runner import RunSpec

    monkeypatch.setenv("SABOT_MODEL_BASE_URL", "http://127.0.0.1:9/v1")  # discard port: nothing listens
    monkeypatch.setenv("SABOT_MODEL_API_KEY", "sk-x")
    project = Project.load(REFUND_DESK)
    spec = RunSpec("refund_desk", 1, "langgraph", "own", "refund", None, 1)
    outcome = run_project(spec, project, tmp_path)
    assert outcome.record.error and "127.0.0.1:9" in outcome.record.error and "attempt 2" in outcome.record.error


def test_init_scaffolds_a_project_that_runs(tmp_path):
    target = tmp_path / "my_team"
    done = CliRunner().invoke(main, ["init", str(target)])
    assert done.exit_code == 0, done.output
    assert (target / "sabot" / "mapping.json").is_file() and (target / "my_graph.py").is_file()
    again = CliRunner().invoke(main, ["init", str(target)])
    assert again.exit_code == 1 and "already exists" in again.output
    done = CliRunner().invoke(main, ["registry", "lock", str(target)])
    assert done.exit_code == 0 and done.output.splitlines()[1].strip() == "sabot/mapping.json"  # the mapping first
    project = Project.load(target)
    assert project.name == "my_team" and project.lock_problems() == []
    baseline = execute(project, None, 1, "b", tmp_path / "b")
    assert baseline.task_passed
    for op in project.operator_ids:
        run = execute(project, op, 1, op, tmp_path / op)
        assert run.injection_verified or run.extra["injection"]["why_not"], op


@pytest.mark.parametrize("answer, expected", [("text", ("text", ())), ({"tool_calls": [{"name": "t", "arguments": {"a": 1}}]}, (None, ("t", '{"a": 1}')))])
def test_a_test_double_answers_with_text_or_tool_calls(answer, expected):
    reply = as_reply(answer)
    assert reply.content == expected[0]
    assert tuple((c.name, c.arguments) for c in reply.tool_calls)[:1] == ((expected[1],) if expected[1] else ())
