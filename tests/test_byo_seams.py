"""The seams the platform owns, and the scaffold a team starts from."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from adapters.byo.confined_work import importable
from adapters.byo.runner import as_reply, execute
from adapters.byo.seams import SeamFault
from adapters.scripted.server import ScriptedModelServer
from sabot.plugins import resolve_path
from sabot.projects import DEFAULT_DURATION, Project, ProjectError, duration_of, validate_operators
from sabot.recorder import Recorder
from sabot.trace import to_runresult
from sabot_assets.cli import main

ROOT = Path(__file__).resolve().parents[1]
REFUND_DESK = ROOT / "examples" / "refund_desk"


def test_with_a_provider_set_the_run_goes_to_the_provider(tmp_path, monkeypatch):
    """SABOT_MODEL_BASE_URL + key: the proxy forwards there (here a stand-in provider on 127.0.0.1),
    swaps the drafter's model for O4, and the key never reaches the pipeline or the record."""
    project = Project.load(REFUND_DESK)
    with importable(project):  # the double as the run imports it: afresh from the project's folder
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
    from adapters.gateway import CallPolicy
    from adapters.runner import RunSpec

    monkeypatch.setenv("SABOT_MODEL_BASE_URL", "http://127.0.0.1:9/v1")  # discard port: nothing listens
    monkeypatch.setenv("SABOT_MODEL_API_KEY", "sk-x")
    project = Project.load(REFUND_DESK)
    spec = RunSpec("refund_desk", 1, "langgraph", "own", "refund", None, 1)
    quick = CallPolicy.from_doc(
        {
            "retry": {
                "max_attempts": 2,
                "max_total_seconds": 2,
                "initial_backoff_seconds": 0.05,
                "max_backoff_seconds": 0.1,
                "jitter_seconds": 0.01,
                "max_retry_after_seconds": 1,
                "retry_on_status": [503],
            },
            "call_timeout_seconds": 2,
            "run_wall_limit_seconds": 60,
            "limits": {},
        },
        "a quick test policy",
    )
    outcome = run_project(
        spec, project, tmp_path, call_policy=quick
    )  # the gateway's call policy: retried, then the run's retry-once
    assert outcome.record.error and "127.0.0.1:9" in outcome.record.error and "attempt 2" in outcome.record.error


@pytest.mark.parametrize(
    "framework, factory", [("langgraph", "my_graph.py"), ("crewai", "my_crew.py"), ("autogen", "my_team.py")]
)
def test_init_scaffolds_a_project_of_each_framework_that_runs(framework, factory, tmp_path):
    target = tmp_path / f"my_{framework}_team"  # one name per framework: the session's store pins each project by name
    done = CliRunner().invoke(main, ["init", str(target), "--framework", framework])
    assert done.exit_code == 0, done.output
    assert (target / "sabot" / "mapping.json").is_file() and (target / factory).is_file()
    again = CliRunner().invoke(main, ["init", str(target)])
    assert again.exit_code == 1 and "already exists" in again.output
    done = CliRunner().invoke(main, ["registry", "lock", str(target)])
    assert done.exit_code == 0, done.output
    assert (
        "baseline seed 1: passed" in done.output and "project check passed" in done.output
    )  # checked before it is frozen
    assert done.output.split("registered 3 new file(s)")[1].split() == [
        "sabot/mapping.json",
        "sabot/project.json",
        "sabot/operators.json",
    ]  # the mapping first
    project = Project.load(target)
    assert project.name == f"my_{framework}_team" and project.framework == framework and project.lock_problems() == []
    landed, acts = 0, set()
    for op in project.operator_ids:
        run = execute(project, op, 1, op, tmp_path / op)
        assert run.injection_verified or run.extra["injection"]["why_not"], op
        landed += run.injection_verified
        acts |= {e.payload["surface"] for e in run.events if e.kind == "guardrail-event"}
    assert landed == len(project.operator_ids)  # the scaffold's seams all reach its pipeline
    assert acts and acts <= {s["surface"] for s in project.mapping["surfaces"]}  # and its checks fire on some


def test_an_unknown_framework_is_refused_by_init(tmp_path):
    done = CliRunner().invoke(main, ["init", str(tmp_path / "x"), "--framework", "swarm"])
    assert done.exit_code == 2 and "'swarm' is not one of 'langgraph', 'crewai', 'autogen'" in done.output


# -- how long a fault acts (operators.json "duration") ------------------------------------------


def _fault(spec: dict) -> SeamFault:
    return SeamFault("O3", spec, Recorder())


def _request(*texts: str) -> dict:
    return {
        "messages": [
            {"role": "system", "content": "You are the critic"},
            *({"role": "user", "content": t} for t in texts),
        ]
    }


def test_a_persisting_model_edit_alters_every_request_that_carries_the_text():
    """A Swarm re-sends the history: a fault acting once would let the next request "heal" it."""
    spec = {"seam": "model", "agent": "critic", "find": "SEV1", "replace": "SEV3", "ground_truth": "x"}
    once, persists = _fault({**spec, "duration": "once"}), _fault(spec)  # persists is the model seam's default
    first, second = _request("triage: SEV1"), _request("triage: SEV1", "REJECT", "triage again: SEV1")
    assert _text(once.model_request("critic", first)) == ["triage: SEV3"]
    assert _text(once.model_request("critic", second)) == ["triage: SEV1", "REJECT", "triage again: SEV1"]  # healed
    assert _text(persists.model_request("critic", first)) == ["triage: SEV3"]
    assert _text(persists.model_request("critic", second)) == ["triage: SEV3", "REJECT", "triage again: SEV3"]
    assert persists.model_request("reviewer", second) is second  # another agent's requests pass untouched
    assert (once.summary()["acted"], persists.summary()["acted"]) == (1, 2)
    assert persists.summary()["duration"] == "persists" and persists.evidence[-1].endswith("(act 2, persists)")


def _text(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"][1:]]


@pytest.mark.parametrize(
    "duration, results", [("once", ["7.5 -> 0.75", "7.5"]), ("persists", ["7.5 -> 0.75", "7.5 -> 0.75"])]
)
def test_a_tool_fault_acts_once_or_on_every_call(duration, results):
    fault = _fault(
        {
            "seam": "tool",
            "tool": "metrics",
            "find": "7.5",
            "replace": "7.5 -> 0.75",
            "duration": duration,
            "ground_truth": "x",
        }
    )
    assert [fault.call_tool("triager", "metrics", {}, lambda: "7.5") for _ in range(2)] == results
    assert fault.landed and fault.acted == (1 if duration == "once" else 2)


def test_a_claim_that_persists_never_runs_the_tool():
    fault = _fault({"seam": "tool", "tool": "file_incident", "claim": "filed", "ground_truth": "x"})
    ran = []
    assert [fault.call_tool("critic", "file_incident", {}, lambda: ran.append(1) or "real") for _ in range(3)] == [
        "filed"
    ] * 3
    assert ran == [] and fault.acted == 3


@pytest.mark.parametrize(
    "spec, message",
    [
        (
            {"seam": "tool", "tool": "t", "find": "a", "replace": "b", "duration": "forever"},
            "duration 'forever' is not one of once, persists",
        ),
        (
            {"seam": "model", "agent": "a", "model": "mini", "duration": "once"},
            "a model swap serves every call of 'a': its duration can only be 'persists'",
        ),
    ],
)
def test_a_bad_duration_is_named(spec, message):
    with pytest.raises(ProjectError, match=message):
        validate_operators({"O1" if spec["seam"] == "tool" else "O4": {**spec, "ground_truth": "x"}}, "operators.json")


def test_the_default_duration_is_documented_per_seam():
    assert DEFAULT_DURATION == {"tool": "persists", "model": "persists"}
    assert duration_of({"seam": "tool"}) == "persists" and duration_of({"seam": "model", "duration": "once"}) == "once"


@pytest.mark.parametrize(
    "answer, expected",
    [("text", ("text", ())), ({"tool_calls": [{"name": "t", "arguments": {"a": 1}}]}, (None, ("t", '{"a": 1}')))],
)
def test_a_test_double_answers_with_text_or_tool_calls(answer, expected):
    reply = as_reply(answer)
    assert reply.content == expected[0]
    assert tuple((c.name, c.arguments) for c in reply.tool_calls)[:1] == ((expected[1],) if expected[1] else ())
