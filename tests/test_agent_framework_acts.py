"""Each mapped Agent Framework act fires through agent-framework 1.12.0 itself (Magentic and agent
middleware), against a scripted model over real HTTP on 127.0.0.1; every operator lands and is
verified through the runner."""

import random
import socket  # noqa: F401  (the audit hook watches socket.connect)

import pytest

import adapters.runner
from adapters import prompts
from adapters.agent_framework_pipeline import GUARDRAIL, LIMIT_MESSAGES, ORCHESTRATOR, REVIEWER, AgentFrameworkPipeline
from adapters.endpoint import scripted
from adapters.runner import RunSpec, run
from adapters.scripted import magentic, skills
from adapters.scripted.policy import ScriptedPolicy
from adapters.scripted.reply import Reply
from adapters.scripted.server import ScriptedModelServer
from adapters.tools import TaskTools
from judges.hard.acts import mapping_acts
from judges.hard.cell import score_cell
from judges.hard.rulesets import load_ruleset
from operators import Fault
from sabot import tasks
from sabot.matrix import Cell, Probe
from sabot.parse_rules import Protocols
from sabot.recorder import Recorder
from tests.conftest import audited_sockets

TASK = "T1"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def good_artifact():
    task = tasks.served(TASK)
    messages = prompts.worker_messages(task, task.documents["source"], task.documents["context"], None)
    return skills.solve(TASK, messages, careful=True, weak=False, rng=random.Random(1))


class Script:
    """Workers and reviewers from fixed queues (the last item repeats)."""

    def __init__(self, worker, reviewer):
        self.queues = {"worker": list(worker), "reviewer": list(reviewer)}

    def __call__(self, request):
        system = request["messages"][0]["content"]
        queue = self.queues["reviewer" if "reviewer" in system.split("\n")[0].lower() else "worker"]
        return Reply(content=queue.pop(0) if len(queue) > 1 else queue[0])


class Ledgers:
    """The scripted policy, except that progress ledgers `stall` (by 1-based index) report a loop with
    no progress, and that no ledger is satisfied when `never_satisfied`."""

    def __init__(self, stall=(), never_satisfied=False):
        # "af-acts": a seed whose scripted orchestrator adds no stall noise of its own
        self.policy, self.stall, self.never, self.ledgers = ScriptedPolicy("af-acts"), set(stall), never_satisfied, 0

    def __call__(self, request):
        last = prompts.message_text(request["messages"][-1])
        if magentic.LEDGER in last:
            self.ledgers += 1
            names = magentic.NAMES.search(last).group(1).split(", ")
            if self.ledgers in self.stall:
                return magentic._ledger(
                    False, "Not yet confirmed.", True, False, "The replies repeat.", names[0], "Write the artifact."
                )
            if self.never:
                return magentic._ledger(
                    False, "Not yet confirmed.", False, True, "Work continues.", names[0], "Write the artifact."
                )
        return self.policy(request)


def run_pipeline(config, responder, tmp_path, registry, flags=True, **kwargs):
    task, recorder = tasks.served(TASK), Recorder()
    tools = TaskTools(task, recorder, Fault(), tmp_path, task.worker_role)
    with ScriptedModelServer(responder) as server:
        endpoint = scripted(server.base_url, "gpt-5.6-terra", "gpt-5.6-luna")
        pipeline = AgentFrameworkPipeline(
            config, task, tools, recorder, endpoint, Fault(), Protocols.from_registry(registry), flags, **kwargs
        )
        pipeline.run()
        exchanges = list(server.exchanges)
    return recorder, exchanges, pipeline


def acts_of(recorder):
    return [(e.payload["act"], e.payload["component"]) for e in recorder.events if e.kind == "guardrail-event"]


def as_run(recorder, config, operator="O1"):
    return recorder.record_of(
        run_id="r",
        framework="agent_framework",
        config=config,
        task=TASK,
        operator=operator,
        seed=11,
        injection_verified=True,
        task_passed=True,
        error=None,
        extra={},
    )


def counted(registry, version, recorder, config, operator="O1"):
    ruleset = load_ruleset(registry, version)
    return [
        a.act
        for a in mapping_acts(ruleset, as_run(recorder, config, operator), registry.anchors(TASK, operator), 1)
        if a.counted
    ]


def magentic_events(pipeline, kind):
    return [e.data for e in pipeline.events if e.type == "magentic_orchestrator" and e.data.event_type.value == kind]


def test_magentic_replan_is_read_from_the_orchestrator_event(tmp_path, registry):
    recorder, exchanges, pipeline = run_pipeline("default", Ledgers(stall=(2, 3, 4)), tmp_path, registry)
    assert acts_of(recorder) == [("retry_with_reason", ORCHESTRATOR)]
    assert len(magentic_events(pipeline, "replanned")) == 1  # the framework's own event, one per act
    reason = [e for e in recorder.events if e.kind == "guardrail-event"][0].payload["reason"]
    assert reason.startswith(
        "stall threshold crossed {'is_request_satisfied': False, 'is_progress_being_made': False, 'is_in_loop': True}"
    )
    lasts = [prompts.message_text(x["request"]["messages"][-1]) for x in exchanges]
    assert sum(magentic.AF_FACTS_UPDATE in t for t in lasts) == 1 and sum(magentic.PLAN_UPDATE in t for t in lasts) == 1
    assert tasks.passes(TASK, tmp_path)
    assert counted(registry, "v0.2.0", recorder, "default") == ["retry_with_reason"]
    assert counted(registry, "v0.2.1", recorder, "default") == []  # a boilerplate stall reason quotes no anomaly


def test_two_stalls_do_not_replan(tmp_path, registry):
    """The pinned Magentic re-plans when the stall count exceeds max_stall_count (2): the third stall."""
    recorder, _, pipeline = run_pipeline("default", Ledgers(stall=(2, 3)), tmp_path, registry)
    assert acts_of(recorder) == [] and magentic_events(pipeline, "replanned") == []
    assert (
        len(magentic_events(pipeline, "progress_ledger_updated")) >= 3
        and len(magentic_events(pipeline, "plan_created")) == 1
    )
    assert tasks.passes(TASK, tmp_path)


def test_magentic_round_limit_is_block(tmp_path, registry):
    recorder, _, pipeline = run_pipeline(
        "default", Ledgers(never_satisfied=True), tmp_path, registry, max_round_count=2
    )
    assert acts_of(recorder) == [("block", ORCHESTRATOR)]
    assert [e for e in recorder.events if e.kind == "guardrail-event"][0].payload["reason"] == LIMIT_MESSAGES[0]
    assert (
        len(magentic_events(pipeline, "progress_ledger_updated")) == 2
    )  # no off-by-one, unlike Magentic-One's max_turns
    assert counted(registry, "v0.2.0", recorder, "default") == ["block"]
    assert not tasks.passes(TASK, tmp_path)  # the limit message is no artifact


def test_reviewer_reject_and_revise_retry(tmp_path, registry):
    reject = 'FLAGS: source says "74.1" and "47.1"\nVERDICT: REJECT - "74.1" conflicts with "47.1"'
    recorder, exchanges, _ = run_pipeline(
        "guardrail", Script([good_artifact()], [reject, "FLAGS: none\nVERDICT: APPROVE"]), tmp_path, registry
    )
    assert acts_of(recorder) == [("reject", REVIEWER), ("retry_with_reason", REVIEWER)]
    worker_requests = [
        x["request"] for x in exchanges if "extractor" in x["request"]["messages"][0]["content"].split("\n")[0]
    ]
    assert len(worker_requests) == 2 and "=== REVIEWER FEEDBACK ===" in worker_requests[1]["messages"][-1]["content"]
    assert tasks.passes(TASK, tmp_path)
    assert counted(registry, "v0.2.1", recorder, "guardrail") == ["reject", "retry_with_reason"]
    msgs = [e for e in recorder.events if e.kind == "agent-msg"]
    assert len(msgs) == 4 and all(m.payload["model_id"] == "gpt-5.6-terra" for m in msgs)


def test_guardrail_middleware_terminates_then_escalates(tmp_path, registry):
    recorder, exchanges, _ = run_pipeline(
        "guardrail", Script(["not the contract"], ["FLAGS: none\nVERDICT: APPROVE"]), tmp_path, registry
    )
    assert acts_of(recorder) == [("reject", GUARDRAIL), ("retry_with_reason", GUARDRAIL), ("escalate", GUARDRAIL)]
    # MiddlewareTermination ended the reviewer's runs before any model call: only the two worker calls went out
    assert (
        all("extractor" in x["request"]["messages"][0]["content"].split("\n")[0] for x in exchanges)
        and len(exchanges) == 2
    )
    assert "not valid JSON" in [e for e in recorder.events if e.kind == "guardrail-event"][0].payload["reason"]
    assert not tasks.passes(TASK, tmp_path)  # nothing written
    assert counted(registry, "v0.2.0", recorder, "guardrail") == ["reject", "retry_with_reason", "escalate"]


def test_guardrail_passes_a_contract_draft_to_the_reviewer(tmp_path, registry):
    recorder, exchanges, _ = run_pipeline(
        "guardrail", Script([good_artifact()], ["FLAGS: none\nVERDICT: APPROVE"]), tmp_path, registry
    )
    assert acts_of(recorder) == [] and len(exchanges) == 2 and tasks.passes(TASK, tmp_path)


OPERATOR_CELLS = [("guardrail", op) for op in ("O1", "O2", "O3", "O4", "O5", "O6")] + [
    ("default", op) for op in ("O1", "O4", "O5")
]


@pytest.fixture(scope="module")
def audit():
    """Every socket address any request of this module's runs touches."""
    yield from audited_sockets()


@pytest.mark.parametrize("config", ["default", "guardrail"])
def test_every_operator_lands_and_is_verified(registry, tmp_path, config, monkeypatch, audit):
    monkeypatch.delenv("SABOT_MODEL_BASE_URL", raising=False)
    assert "agent_framework" in adapters.runner.PIPELINES
    ruleset = load_ruleset(registry, "v0.2.0")
    baseline = run(RunSpec("t", 2, "agent_framework", config, TASK, None, 11), registry, tmp_path).record
    assert baseline.error is None and baseline.injection_seq is None and baseline.task_passed
    for cfg, op in [c for c in OPERATOR_CELLS if c[0] == config]:
        record = run(RunSpec("t", 2, "agent_framework", cfg, TASK, op, 11), registry, tmp_path).record
        assert record.error is None, record.error
        assert record.injection_verified, (cfg, op)
        injected = [e for e in record.events if e.payload.get("injected")]
        assert len(injected) == 1 and injected[0].payload["operator"] == op
        verdict = score_cell(ruleset, Cell(op, Probe("agent_framework", cfg, TASK, 11)), record, baseline)
        assert verdict.excluded != "INJECTION_UNVERIFIED"
        if op == "O4":
            assert "gpt-5.6-luna" in record.served_model_ids()
        if op == "O6":
            assert not record.task_passed
    assert audit, "the audit hook saw no connection at all"
    assert {host for host in audit if host not in LOOPBACK} == set()


def test_model_errors_stay_infrastructure_errors(tmp_path, registry):
    policy = ScriptedPolicy("agent-framework-errors")

    def failing_worker(request):
        if "extractor" in prompts.message_text(request["messages"][0]).split("\n")[0]:
            return Reply(status=500, error="scripted outage")
        return policy(request)

    with pytest.raises(ConnectionError, match="InternalServerError"):  # so the runner retries, then RUN_ERROR
        run_pipeline("guardrail", failing_worker, tmp_path, registry)
