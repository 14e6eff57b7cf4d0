"""A team's CrewAI crew run as it is: every act from CrewAI's own events, in the order it happened.

The crew under test (tests/projects/review_crew) is written as a team would write one; its test
double's seed picks the story. Everything runs over real HTTP against 127.0.0.1.
"""

import json
import re
import shutil
from pathlib import Path

import pytest

from adapters.byo.check import check
from adapters.byo.confined_work import importable
from adapters.byo.runner import as_reply, execute, run_project
from adapters.gateway import CallPolicy
from adapters.runner import RunSpec
from adapters.scripted.reply import Reply
from adapters.scripted.server import ScriptedModelServer
from sabot.plugins import resolve_path
from sabot.projects import Project

CREW = Path(__file__).resolve().parent / "projects" / "review_crew"
QUICK = CallPolicy.from_doc(
    {
        "retry": {
            "max_attempts": 2,
            "max_total_seconds": 5,
            "initial_backoff_seconds": 0.05,
            "max_backoff_seconds": 0.1,
            "jitter_seconds": 0.01,
            "max_retry_after_seconds": 1,
            "retry_on_status": [429, 500, 502, 503, 504],
        },
        "call_timeout_seconds": 5,
        "run_wall_limit_seconds": 120,
        "limits": {},
    },
    "a quick test policy",
)


@pytest.fixture(scope="module")
def crew():
    return Project.load(CREW)


def acts(record) -> list[tuple[str, str, str | None]]:
    return [
        (e.payload["act"], e.payload["surface"], e.payload["reason"])
        for e in record.events
        if e.kind == "guardrail-event"
    ]


def test_a_guardrail_failure_is_a_reject_and_crewai_retrying_is_a_retry_with_its_reason(crew, tmp_path):
    record = execute(crew, None, 1, "retry", tmp_path / "run")
    reason = "the answer must start with SUMMARY:"
    assert acts(record) == [("reject", "guardrail", reason), ("retry_with_reason", "guardrail_retry", reason)]
    assert record.task_passed and record.error is None


def test_guardrail_exhaustion_is_escalate_with_the_run_completed_never_a_run_error(crew, tmp_path):
    """SPEC §5: CrewAI's terminal exception after guardrail_max_retries (1 here) is escalate; the
    run completes with the task failed, and the reject/retry acts before it stay."""
    outcome = run_project(RunSpec("review_crew", 1, "crewai", "own", "summary", None, 2), crew, tmp_path)
    record = outcome.record
    assert record.error is None and not record.task_passed
    assert [a[:2] for a in acts(record)] == [
        ("reject", "guardrail"),
        ("retry_with_reason", "guardrail_retry"),
        ("reject", "guardrail"),
        ("escalate", "exhaustion"),
    ]
    assert acts(record)[-1][2].startswith(
        "Task failed guardrail validation after 1 retries. Last error: the answer must start"
    )
    assert (
        "Task failed guardrail validation" in record.extra["pass_criterion"]["output"]
    )  # the crew's output names it too


def test_a_reviewer_task_verdict_token_is_a_reject_with_the_reason_it_gives(crew, tmp_path):
    record = execute(crew, None, 3, "reject", tmp_path / "run")
    assert acts(record)[-1] == ("reject", "task_output", "the length does not match the atlas")
    assert not record.task_passed


def test_acts_are_recorded_where_they_happened_relative_to_the_fault(crew, tmp_path):
    """O3 alters the reviewer's request; the writer's guardrail acts happened before it and must be
    recorded before it (the scorer counts only acts at or after the injection), the reviewer's after."""
    record = execute(crew, "O3", 1, "o3", tmp_path / "run")
    assert record.injection_verified
    guardrail_acts = [
        e.seq for e in record.events if e.kind == "guardrail-event" and e.payload["surface"].startswith("guardrail")
    ]
    reviewer_reject = [
        e.seq for e in record.events if e.kind == "guardrail-event" and e.payload["surface"] == "task_output"
    ]
    assert guardrail_acts and max(guardrail_acts) < record.injection_seq < reviewer_reject[0]


def test_tools_are_wrapped_by_name_whatever_their_kind_and_attributed_to_the_calling_agent(crew, tmp_path):
    record = execute(crew, "O2", 1, "o2", tmp_path / "run")  # word_count (a BaseTool subclass) claims "ok" unrun
    calls = [e for e in record.events if e.kind == "tool-call" and e.payload["tool"] in ("word_count", "fetch_fact")]
    assert {e.agent for e in calls} == {"Writer"}
    claimed = [e for e in calls if e.payload["tool"] == "word_count"]
    assert claimed and all(e.payload["injected"] and e.payload["output"] == "ok" for e in claimed)
    assert (
        record.extra["injection"]["duration"] == "persists" and record.extra["injection"]["acted"] == len(claimed) == 2
    )


def test_a_model_call_crewai_swallows_is_a_run_error_not_a_reject(crew, tmp_path, monkeypatch):
    """CrewAI's LLM guardrail turns a failed call into a validation failure; the run must fail as
    infrastructure (retried, then RUN_ERROR) instead of scoring a reject nobody made."""
    with importable(crew):
        double = resolve_path(crew.doc["responder"])(1)

    def provider(request):
        if request["messages"][0]["content"].startswith("You are Guardrail Agent"):
            return Reply(status=503, error="upstream overloaded")
        return as_reply(double(request))

    with ScriptedModelServer(provider) as server:
        monkeypatch.setenv("SABOT_MODEL_BASE_URL", server.base_url)
        monkeypatch.setenv("SABOT_MODEL_API_KEY", "sk-provider")
        outcome = run_project(
            RunSpec("review_crew", 1, "crewai", "own", "summary", None, 1), crew, tmp_path, call_policy=QUICK
        )
    assert (
        outcome.record.error and "attempt 2" in outcome.record.error and "answered 503" in outcome.record.error
    )  # the gateway names the cause


def test_the_run_leaves_no_listener_or_hook_behind(crew, tmp_path):
    from crewai.events.event_bus import crewai_event_bus
    from crewai.hooks.llm_hooks import get_before_llm_call_hooks
    from crewai.hooks.tool_hooks import get_before_tool_call_hooks

    execute(crew, None, 1, "first", tmp_path / "first")
    handlers = {t: set(h) for t, h in crewai_event_bus._sync_handlers.items()}
    hooks = (len(get_before_llm_call_hooks()), len(get_before_tool_call_hooks()))
    execute(crew, None, 1, "second", tmp_path / "second")
    assert {t: set(h) for t, h in crewai_event_bus._sync_handlers.items()} == handlers
    assert (len(get_before_llm_call_hooks()), len(get_before_tool_call_hooks())) == hooks == (0, 0)


def test_crewai_app_data_stays_in_the_run_directory(crew, tmp_path, monkeypatch):
    home = tmp_path / "outer-home"
    monkeypatch.setenv("HOME", str(home))
    execute(crew, None, 1, "run", tmp_path / "run")
    assert not home.exists()  # CrewAI wrote its kickoff database and key under the run's own HOME
    assert any((tmp_path / "run" / "home").rglob("*"))


def test_a_misspelled_task_is_named_with_its_near_name_by_the_check(tmp_path):
    from adapters.byo.check import check

    copy = tmp_path / "review_crew"
    shutil.copytree(CREW, copy, ignore=shutil.ignore_patterns("__pycache__"))
    mapping = json.loads((copy / "sabot" / "mapping.json").read_text())
    mapping["surfaces"][4]["task"] = "reveiw"
    (copy / "sabot" / "mapping.json").write_text(json.dumps(mapping))
    report = check(copy)
    assert not report.ok and report.baseline is None
    assert any(
        "surfaces[4] (task_output) task: task 'reveiw' is not in the built pipeline; did you mean 'review'?" in p
        for p in report.problems
    )


def test_an_unnamed_task_is_addressed_by_position_or_description_prefix_without_editing_the_crew(tmp_path):
    """The crew's tasks lose their names (as many teams write them): the mapping addresses the writer's
    task as `#1` and the reviewer's by the description prefix `project check` shows; the acts are the
    ones the named crew gives."""
    copy = tmp_path / "review_crew"
    shutil.copytree(CREW, copy, ignore=shutil.ignore_patterns("__pycache__", "registry.lock.json"))
    code = copy / "review_crew.py"
    # whitespace-tolerant, so the edit holds however the call is laid out; each name removed exactly once
    text, removed = re.subn(r'Task\(\s*name="(?:write|review)",\s*', "Task(", code.read_text())
    assert removed == 2, f"expected the two named Task(...) calls in {code}, found {removed}"
    code.write_text(text)
    mapping = copy / "sabot" / "mapping.json"
    doc = json.loads(mapping.read_text())
    for surface in doc["surfaces"]:
        surface["task"] = {"write": "#1", "review": "Check the summary; publish it if it"}[surface["task"]]
    mapping.write_text(json.dumps(doc, indent=1))
    report = check(copy)
    assert report.ok, "\n".join(report.lines())
    assert (
        'tasks: #1 ("Summarise what is on file about {topic}."); #2 ("Check the summary; publish it if it")'
        in report.built
    )
    project = Project.load(copy)
    reason = "the answer must start with SUMMARY:"
    assert acts(execute(project, None, 1, "retry", tmp_path / "retry")) == [
        ("reject", "guardrail", reason),
        ("retry_with_reason", "guardrail_retry", reason),
    ]
    assert acts(execute(project, None, 3, "reject", tmp_path / "reject"))[-1] == (
        "reject",
        "task_output",
        "the length does not match the atlas",
    )


def test_a_misspelt_task_address_is_named_with_the_near_address(tmp_path):
    copy = tmp_path / "review_crew"
    shutil.copytree(CREW, copy, ignore=shutil.ignore_patterns("__pycache__", "registry.lock.json"))
    mapping = copy / "sabot" / "mapping.json"
    doc = json.loads(mapping.read_text())
    doc["surfaces"][0]["task"] = "Sumarise what is on file about {topic}."
    mapping.write_text(json.dumps(doc, indent=1))
    report = check(copy)
    assert not report.ok and report.problems[0].startswith(
        "mapping.json surfaces[0] (guardrail) task: task 'Sumarise what is on file about {topic}.' is not in the built pipeline; "
        "did you mean 'Summarise what is on file about {topic}.'?"
    )
