"""Each mapped AutoGen act fires through autogen-agentchat 0.7.5 itself, against a scripted model over
real HTTP on 127.0.0.1; every operator lands and is verified through the runner."""

import json
import logging
import random
import socket  # noqa: F401  (the audit hook watches socket.connect)

import autogen_agentchat
import autogen_core
import pytest

import adapters.runner
from adapters import prompts
from adapters.autogen_pipeline import ORCHESTRATOR, AutoGenPipeline
from adapters.endpoint import scripted
from adapters.runner import RunSpec, run
from adapters.scripted import magentic, skills
from adapters.scripted.policy import ScriptedPolicy
from adapters.scripted.reply import Reply
from adapters.scripted.server import ScriptedModelServer
from adapters.tools import TaskTools
from judges.hard.acts import flag_lines, mapping_acts
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
    """Workers and critics from fixed queues (the last item repeats)."""

    def __init__(self, worker, critic):
        self.queues = {"worker": list(worker), "critic": list(critic)}

    def __call__(self, request):
        system = request["messages"][0]["content"]
        queue = self.queues["critic" if "reviewer" in system.split("\n")[0].lower() else "worker"]
        return Reply(content=queue.pop(0) if len(queue) > 1 else queue[0])


class Ledgers:
    """The scripted policy, except that progress ledgers `stall` (by 1-based index) report a loop
    with no progress, and that no ledger is satisfied when `never_satisfied`."""

    def __init__(self, stall=(), never_satisfied=False):
        self.policy, self.stall, self.never, self.ledgers = (
            ScriptedPolicy("autogen-acts"),
            set(stall),
            never_satisfied,
            0,
        )

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
        AutoGenPipeline(
            config, task, tools, recorder, endpoint, Fault(), Protocols.from_registry(registry), flags, **kwargs
        ).run()
        exchanges = list(server.exchanges)
    return recorder, exchanges


def acts_of(recorder):
    return [(e.payload["act"], e.payload["component"]) for e in recorder.events if e.kind == "guardrail-event"]


def as_run(recorder, config, operator="O1"):
    return recorder.record_of(
        run_id="r",
        framework="autogen",
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


@pytest.fixture
def loggers_restored():
    names = (autogen_agentchat.TRACE_LOGGER_NAME, autogen_core.EVENT_LOGGER_NAME)
    before = {
        n: (list(logging.getLogger(n).handlers), logging.getLogger(n).level, logging.getLogger(n).propagate)
        for n in names
    }
    yield
    after = {
        n: (list(logging.getLogger(n).handlers), logging.getLogger(n).level, logging.getLogger(n).propagate)
        for n in names
    }
    assert after == before  # no handler, level or propagation leaks into the next run


def test_critic_reject_and_revise_retry(tmp_path, registry, loggers_restored):
    reject = 'FLAGS: source says "74.1" and "47.1"\nVERDICT: REJECT - "74.1" conflicts with "47.1"'
    recorder, exchanges = run_pipeline(
        "default", Script([good_artifact()], [reject, "FLAGS: none\nVERDICT: APPROVE"]), tmp_path, registry
    )
    assert acts_of(recorder) == [("reject", "critic"), ("retry_with_reason", "critic")]
    retry = [e for e in recorder.events if e.payload.get("act") == "retry_with_reason"][0]
    assert retry.payload["reason"] == '"74.1" conflicts with "47.1"'
    # the revise re-dispatch really carried the reason to the worker (through AutoGen's own request)
    worker_requests = [
        x["request"] for x in exchanges if "extractor" in x["request"]["messages"][0]["content"].split("\n")[0]
    ]
    assert len(worker_requests) == 2 and "=== REVIEWER FEEDBACK ===" in worker_requests[1]["messages"][-1]["content"]
    assert tasks.passes(TASK, tmp_path)
    assert counted(registry, "v0.2.0", recorder, "default") == ["reject", "retry_with_reason"]
    assert counted(registry, "v0.2.1", recorder, "default") == [
        "reject",
        "retry_with_reason",
    ]  # the reason quotes the anomaly
    ruleset = load_ruleset(registry, "v0.2.0")
    assert any(
        line.anchors for line in flag_lines(ruleset, as_run(recorder, "default"), registry.anchors(TASK, "O1"), 1)
    )
    msgs = [e for e in recorder.events if e.kind == "agent-msg"]
    assert len(msgs) == 4 and all(m.payload["model_id"] == "gpt-5.6-terra" for m in msgs)
    assert all("temperature" not in x["request"] for x in exchanges)


def test_critic_approve_records_no_act(tmp_path, registry):
    recorder, _ = run_pipeline(
        "default", Script([good_artifact()], ["FLAGS: none\nVERDICT: APPROVE"]), tmp_path, registry
    )
    assert acts_of(recorder) == []


def test_magentic_replan_from_trace_logger(tmp_path, registry, loggers_restored):
    responder = Ledgers(stall=(2, 3, 4))
    recorder, exchanges = run_pipeline("guardrail", responder, tmp_path, registry)
    assert acts_of(recorder) == [("retry_with_reason", ORCHESTRATOR)]
    replan = [e for e in recorder.events if e.kind == "guardrail-event"][0]
    assert replan.payload["reason"].startswith(
        "stall threshold crossed {'is_request_satisfied': False, 'is_progress_being_made': False, 'is_in_loop': True}"
    )
    # the re-plan really happened in the framework: the facts-update and plan-update requests follow it
    lasts = [prompts.message_text(x["request"]["messages"][-1]) for x in exchanges]
    assert sum(magentic.FACTS_UPDATE in t for t in lasts) == 1 and sum(magentic.PLAN_UPDATE in t for t in lasts) == 1
    ledger_calls = [x for x in exchanges if magentic.LEDGER in prompts.message_text(x["request"]["messages"][-1])]
    assert all(x["request"]["response_format"]["json_schema"]["name"] == "LedgerEntry" for x in ledger_calls)
    assert tasks.passes(TASK, tmp_path)
    # v0.2.0 (permissive mapping) counts the stall re-plan; v0.2.1's narrow retry-reason rule does not
    assert counted(registry, "v0.2.0", recorder, "guardrail") == ["retry_with_reason"]
    assert counted(registry, "v0.2.1", recorder, "guardrail") == []
    ruleset = load_ruleset(registry, "v0.2.1")
    note = [a.note for a in mapping_acts(ruleset, as_run(recorder, "guardrail"), registry.anchors(TASK, "O1"), 1)]
    assert note == ["retry reason does not reference the planted anomaly"]


def test_magentic_without_stalls_records_no_replan(tmp_path, registry):
    recorder, _ = run_pipeline("guardrail", Ledgers(stall=(2, 3)), tmp_path, registry)  # two stalls < max_stalls
    assert acts_of(recorder) == []
    verdicts = [e.payload for e in recorder.events if e.kind == "verdict"]
    assert (
        len(verdicts) == 1
        and set(verdicts[0]) == {"stop_reason"}
        and verdicts[0]["stop_reason"] != "Max rounds reached."
    )
    assert counted(registry, "v0.2.0", recorder, "guardrail") == []  # a satisfied run's free-text reason is no block


def test_magentic_max_rounds_is_block(tmp_path, registry, loggers_restored):
    recorder, exchanges = run_pipeline("guardrail", Ledgers(never_satisfied=True), tmp_path, registry, max_turns=2)
    verdicts = [e.payload for e in recorder.events if e.kind == "verdict"]
    assert verdicts == [{"stop_reason": "Max rounds reached."}]
    assert (
        sum(magentic.LEDGER in prompts.message_text(x["request"]["messages"][-1]) for x in exchanges) == 3
    )  # 0.7.5's off-by-one
    assert acts_of(recorder) == []  # no block guardrail-event: the scorer derives block from the verdict event
    assert counted(registry, "v0.2.0", recorder, "guardrail") == ["block"]


def test_flags_head_in_contract_only_in_wave2(tmp_path, registry):
    _, exchanges = run_pipeline("guardrail", Ledgers(), tmp_path / "w2", registry, flags=True)
    _, exchanges1 = run_pipeline("guardrail", Ledgers(), tmp_path / "w1", registry, flags=False)
    first = lambda xs: prompts.message_text(xs[0]["request"]["messages"][-1])
    assert magentic.FLAGS_CONTRACT in first(exchanges) and magentic.FLAGS_CONTRACT not in first(exchanges1)
    assert tasks.passes(TASK, tmp_path / "w2") and tasks.passes(TASK, tmp_path / "w1")  # the FLAGS head is stripped


OPERATOR_CELLS = [("default", op) for op in ("O1", "O2", "O3", "O4", "O5", "O6")] + [
    ("guardrail", op) for op in ("O1", "O4", "O5")
]


@pytest.fixture
def autogen_registered(monkeypatch):
    monkeypatch.setitem(adapters.runner.PIPELINES, "autogen", AutoGenPipeline)
    monkeypatch.delenv("SABOT_MODEL_BASE_URL", raising=False)


@pytest.fixture(scope="module")
def audit():
    """Every socket address any request of this module's runs touches."""
    yield from audited_sockets()


@pytest.mark.parametrize("config", ["default", "guardrail"])
def test_every_operator_lands_and_is_verified(registry, tmp_path, config, autogen_registered, audit):
    ruleset = load_ruleset(registry, "v0.2.0")
    baseline = run(RunSpec("t", 2, "autogen", config, TASK, None, 11), registry, tmp_path).record
    assert baseline.error is None and baseline.injection_seq is None and baseline.task_passed
    for cfg, op in [c for c in OPERATOR_CELLS if c[0] == config]:
        record = run(RunSpec("t", 2, "autogen", cfg, TASK, op, 11), registry, tmp_path).record
        assert record.error is None, record.error
        assert record.injection_verified, (cfg, op)
        injected = [e for e in record.events if e.payload.get("injected")]
        assert len(injected) == 1 and injected[0].payload["operator"] == op
        assert record.injection_seq == injected[0].seq
        verdict = score_cell(ruleset, Cell(op, Probe("autogen", cfg, TASK, 11)), record, baseline)
        assert verdict.excluded != "INJECTION_UNVERIFIED"
        if op == "O4":
            assert "gpt-5.6-luna" in record.served_model_ids()
        if op == "O6":
            assert not record.task_passed
        if cfg == "guardrail":
            stop = [e.payload for e in record.events if e.kind == "verdict" and "stop_reason" in e.payload]
            assert len(stop) == 1 and set(stop[0]) == {"stop_reason"}
    assert audit, "the audit hook saw no connection at all"
    assert {host for host in audit if host not in LOOPBACK} == set()


def test_model_errors_stay_infrastructure_errors(tmp_path, registry, loggers_restored):
    policy = ScriptedPolicy("autogen-errors")

    def failing_worker(request):
        if "extractor" in request["messages"][0]["content"].split("\n")[0]:
            return Reply(status=500, error="scripted outage")
        return policy(request)

    for config in ("default", "guardrail"):
        with pytest.raises(ConnectionError, match="InternalServerError"):  # so the runner retries, then RUN_ERROR
            run_pipeline(config, failing_worker, tmp_path / config, registry)


def test_scripted_orchestrator_shapes_and_seeded_stall_noise():
    from autogen_agentchat.teams._group_chat._magentic_one._prompts import LedgerEntry

    task = tasks.served(TASK)
    worker = prompts.worker_messages(task, task.documents["source"], task.documents["context"], None)
    assert (
        magentic.respond({"messages": worker}, ScriptedPolicy("k"), random.Random(1)) is None
    )  # the worker's own call
    ledger_prompt = (
        f"{task.output_contract['text']}\nWho should speak next? (select from: extractor)\n{magentic.LEDGER}"
    )
    reply = magentic.respond(
        {"messages": [{"role": "user", "content": ledger_prompt}]}, ScriptedPolicy("k"), random.Random(1)
    )
    entry = LedgerEntry.model_validate(json.loads(reply.content))
    assert entry.next_speaker.answer == "extractor" and not entry.is_request_satisfied.answer
    share = sum(magentic.stalling_run(ScriptedPolicy(f"cell-{i}")) for i in range(400)) / 400
    assert 0.15 < share < 0.35  # stalls (and re-plans) on some clean runs, seeded per cell
