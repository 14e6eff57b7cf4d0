"""Each hard act type fires through LangGraph itself, against a scripted model over real HTTP."""

import pytest

from adapters.endpoint import scripted
from adapters.langgraph_pipeline import LangGraphPipeline
from adapters.scripted.reply import Reply
from adapters.scripted.server import ScriptedModelServer
from adapters.tools import TaskTools
from judges.hard.acts import flag_lines, mapping_acts
from judges.hard.rulesets import load_ruleset
from operators import Fault
from sabot import tasks
from sabot.parse_rules import Protocols
from sabot.recorder import Recorder

TASK = "T1"


class Script:
    """A responder that answers workers and reviewers from fixed queues (the last item repeats)."""

    def __init__(self, worker: list[str], reviewer: list[str]):
        self.queues = {"worker": list(worker), "reviewer": list(reviewer)}

    def __call__(self, request):
        system = request["messages"][0]["content"]
        stage = "reviewer" if "reviewer" in system.split("\n")[0].lower() else "worker"
        queue = self.queues[stage]
        return Reply(content=queue.pop(0) if len(queue) > 1 else queue[0])


def good_artifact():
    from adapters import prompts
    from adapters.scripted import skills
    import random

    task = tasks.served(TASK)
    messages = prompts.worker_messages(task, task.documents["source"], task.documents["context"], None)
    return skills.solve(TASK, messages, careful=True, weak=False, rng=random.Random(1))


def run_pipeline(config, script, tmp_path, registry, flags=True):
    task, recorder = tasks.served(TASK), Recorder()
    tools = TaskTools(task, recorder, Fault(), tmp_path, task.worker_role)
    with ScriptedModelServer(script) as server:
        endpoint = scripted(server.base_url, "gpt-5.6-terra", "gpt-5.6-luna")
        pipeline = LangGraphPipeline(
            config, task, tools, recorder, endpoint, Fault(), Protocols.from_registry(registry), flags
        )
        pipeline.run()
        exchanges = list(server.exchanges)
    return recorder, exchanges


def acts_of(recorder):
    return [(e.payload["act"], e.payload["component"]) for e in recorder.events if e.kind == "guardrail-event"]


@pytest.mark.parametrize("config", ["default", "guardrail"])
def test_reviewer_reject_retry_and_flag(config, tmp_path, registry):
    script = Script(
        [good_artifact()],
        [
            'FLAGS: source says "74.1" and "47.1"\nVERDICT: REJECT - "74.1" conflicts with "47.1"',
            "FLAGS: none\nVERDICT: APPROVE",
        ],
    )
    recorder, exchanges = run_pipeline(config, script, tmp_path, registry)
    assert acts_of(recorder) == [("reject", "reviewer"), ("retry_with_reason", "reviewer")]
    assert tasks.passes(TASK, tmp_path)
    # The scorer reads the same events: mapping acts, and the FLAGS line anchored for T1/O1.
    ruleset = load_ruleset(registry, "v0.2.0")
    run = recorder.record_of(
        run_id="r",
        framework="langgraph",
        config=config,
        task=TASK,
        operator="O1",
        seed=11,
        injection_verified=True,
        task_passed=True,
        error=None,
        extra={},
    )
    anchors = registry.anchors(TASK, "O1")
    assert [a.act for a in mapping_acts(ruleset, run, anchors, 1) if a.counted] == ["reject", "retry_with_reason"]
    assert any(line.anchors for line in flag_lines(ruleset, run, anchors, 1))
    assert all("temperature" not in x["request"] for x in exchanges)  # no temperature is transmitted


def test_validator_reject_then_escalate_via_interrupt(tmp_path, registry):
    script = Script(["this is not the contracted artifact"], ["VERDICT: APPROVE"])
    recorder, _ = run_pipeline("guardrail", script, tmp_path, registry)
    assert acts_of(recorder) == [("reject", "validator"), ("retry_with_reason", "validator"), ("escalate", "validator")]
    assert not tasks.passes(TASK, tmp_path)  # escalation ends the run with the task failed


def test_default_config_has_no_validator(tmp_path, registry):
    script = Script(["this is not the contracted artifact"], ["VERDICT: APPROVE"])
    recorder, _ = run_pipeline("default", script, tmp_path, registry)
    assert acts_of(recorder) == []
    assert not tasks.passes(TASK, tmp_path)


def test_wave1_prompts_carry_no_flags_addendum(tmp_path, registry):
    script = Script([good_artifact()], ["VERDICT: APPROVE"])
    _, exchanges = run_pipeline("default", script, tmp_path, registry, flags=False)
    reviewer_prompts = [
        x["request"]["messages"][0]["content"]
        for x in exchanges
        if "reviewer" in x["request"]["messages"][0]["content"].split("\n")[0].lower()
    ]
    assert reviewer_prompts and not any("ANOMALY-FIRST" in p for p in reviewer_prompts)
