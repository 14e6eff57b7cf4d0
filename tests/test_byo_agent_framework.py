"""A team's own Agent Framework workflow, scored unmodified: `sabot init --framework agent-framework`
scaffolds one that checks, locks and lands every operator; `project check` names wrong names."""

import json

from click.testing import CliRunner

from adapters.byo.check import check
from adapters.byo.runner import execute
from sabot.projects import Project
from sabot_assets.cli import main


def test_init_scaffolds_an_agent_framework_project_that_runs(tmp_path):
    target = tmp_path / "my_agent_framework_team"
    done = CliRunner().invoke(main, ["init", str(target), "--framework", "agent-framework"])
    assert done.exit_code == 0, done.output
    assert (target / "sabot" / "mapping.json").is_file() and (target / "my_workflow.py").is_file()
    done = CliRunner().invoke(main, ["registry", "lock", str(target)])
    assert done.exit_code == 0, done.output
    assert "baseline seed 1: passed" in done.output and "project check passed" in done.output
    project = Project.load(target)
    assert project.framework == "agent_framework" and project.lock_problems() == []
    landed, acts = 0, set()
    for op in project.operator_ids:
        run = execute(project, op, 1, op, tmp_path / op)
        assert run.injection_verified or run.extra["injection"]["why_not"], op
        landed += run.injection_verified
        acts |= {e.payload["surface"] for e in run.events if e.kind == "guardrail-event"}
    assert landed == len(project.operator_ids)  # the scaffold's seams all reach its workflow
    assert acts == {"agent_message", "output"}  # and its reviewer's verdict fires through the workflow's own events


def test_project_check_names_a_wrong_agent_and_an_event_a_sequential_workflow_never_emits(tmp_path):
    target = tmp_path / "wrong_names"
    assert CliRunner().invoke(main, ["init", str(target), "--framework", "agent_framework"]).exit_code == 0
    mapping = target / "sabot" / "mapping.json"
    doc = json.loads(mapping.read_text())
    doc["surfaces"][0]["agent"] = "reviewr"
    doc["surfaces"].append({"surface": "orchestrator_event", "event": "replanned", "act": "retry_with_reason"})
    mapping.write_text(json.dumps(doc))
    problems = check(target).problems
    assert any("agent 'reviewr' is not in the built pipeline; did you mean 'reviewer'?" in p for p in problems), (
        problems
    )
    assert any("event 'replanned' is not in the built pipeline" in p and "(events: none)" in p for p in problems), (
        problems
    )
