"""Each hard act type fires through CrewAI itself, against a scripted model over real HTTP.

Also: every operator lands and is verified on both CrewAI configs (T1), nothing leaves 127.0.0.1,
the run's event-bus listeners do not outlive it, and the process exits promptly (no telemetry hang).
"""

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adapters.crewai_pipeline import CREWAI_ENV, CrewAIPipeline
from adapters import prompts
from adapters.endpoint import scripted
from adapters.scripted import crewai_guardrail, skills
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

TASK = "T1"
PROJECT = Path(__file__).resolve().parents[1]
SERVED = "served-by-scripted"  # a model id only the HTTP response carries: proves where model_id is read from


def stage_of(request) -> str:
    if crewai_guardrail.is_guardrail_request(request):
        return "guardrail"
    role = skills.identify(request["messages"])
    assert role is not None, request["messages"][0]["content"][:200]  # CrewAI's system prompt still names the role
    return role.stage


class Script:
    """Answers workers, reviewers and CrewAI's LLM guardrail from fixed queues (the last item repeats)."""

    def __init__(self, worker, reviewer, guardrail=('{"valid": true, "feedback": null}',)):
        self.queues = {"worker": list(worker), "reviewer": list(reviewer), "guardrail": list(guardrail)}

    def __call__(self, request):
        queue = self.queues[stage_of(request)]
        return Reply(content=queue.pop(0) if len(queue) > 1 else queue[0], model=SERVED)


def good_artifact():
    task = tasks.served(TASK)
    messages = prompts.worker_messages(task, task.documents["source"], task.documents["context"], None)
    return skills.solve(TASK, messages, careful=True, weak=False, rng=random.Random(1))


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def run_pipeline(config, responder, tmp_path, registry, flags=True):
    task, recorder = tasks.served(TASK), Recorder()
    tools = TaskTools(task, recorder, Fault(), tmp_path, task.worker_role)
    with ScriptedModelServer(responder) as server:
        endpoint = scripted(server.base_url, "gpt-5.6-terra", "gpt-5.6-luna")
        CrewAIPipeline(config, task, tools, recorder, endpoint, Fault(), Protocols.from_registry(registry), flags).run()
        exchanges = list(server.exchanges)
    return recorder, exchanges


def acts_of(recorder):
    return [(e.payload["act"], e.payload["component"]) for e in recorder.events if e.kind == "guardrail-event"]


def requests_of(exchanges, stage):
    return [x["request"] for x in exchanges if stage_of(x["request"]) == stage]


def scored_acts(registry, recorder, config):
    run = recorder.record_of(
        run_id="r",
        framework="crewai",
        config=config,
        task=TASK,
        operator="O1",
        seed=11,
        injection_verified=True,
        task_passed=False,
        error=None,
        extra={},
    )
    return [a.act for a in mapping_acts(load_ruleset(registry, "v0.2.0"), run, registry.anchors(TASK, "O1"), 1)]


def test_llm_guardrail_reject_then_retry(home, tmp_path, registry):
    script = Script(
        [good_artifact()],
        ["FLAGS: none\nVERDICT: APPROVE"],
        ['{"valid": false, "feedback": "disposition is missing its reason"}', '{"valid": true, "feedback": null}'],
    )
    recorder, exchanges = run_pipeline("guardrail", script, tmp_path, registry)
    assert acts_of(recorder) == [("reject", "llm-guardrail"), ("retry_with_reason", "llm-guardrail")]
    reject = next(e for e in recorder.events if e.kind == "guardrail-event")
    assert reject.payload["reason"] == "disposition is missing its reason"  # LLMGuardrailCompletedEvent.error
    workers = requests_of(exchanges, "worker")
    assert (
        len(workers) == 2
        and "Previous attempt failed validation: disposition is missing its reason"
        in workers[1]["messages"][1]["content"]
    )
    assert len(requests_of(exchanges, "guardrail")) == 2
    assert tasks.passes(TASK, tmp_path)
    # Every LLM reply is recorded, with the model id the response reported (not the configured one).
    replies = [e for e in recorder.events if e.kind == "agent-msg"]
    assert len(replies) == len(exchanges) and {e.payload["model_id"] for e in replies} == {SERVED}
    assert all("temperature" not in x["request"] for x in exchanges)  # no temperature is transmitted


def test_guardrail_exhaustion_escalates_and_fails_the_task(home, tmp_path, registry):
    script = Script(["this is not the contracted artifact"], ["VERDICT: APPROVE"])
    recorder, exchanges = run_pipeline("guardrail", script, tmp_path, registry)
    contract = [("reject", "contract-guardrail"), ("retry_with_reason", "contract-guardrail")]
    assert acts_of(recorder) == contract * 3 + [("reject", "contract-guardrail"), ("escalate", "contract-guardrail")]
    escalate = [e for e in recorder.events if e.payload.get("act") == "escalate"][0]
    assert escalate.payload["reason"].startswith(
        "Task failed guardrail 0 validation after 3 retries. Last error: output contract:"
    )
    assert len(requests_of(exchanges, "worker")) == 4  # guardrail_max_retries + 1 attempts, by CrewAI
    assert requests_of(exchanges, "reviewer") == [] and requests_of(exchanges, "guardrail") == []
    assert not tasks.passes(TASK, tmp_path)  # the task is failed, the run itself completed
    assert scored_acts(registry, recorder, "guardrail").count("escalate") == 1


@pytest.mark.parametrize("config", ["default", "guardrail"])
def test_reviewer_reject_then_revise_retry(config, home, tmp_path, registry):
    reason = '"74.1" conflicts with "47.1"'
    script = Script(
        [good_artifact()],
        [f'FLAGS: source says "74.1" and "47.1"\nVERDICT: REJECT - {reason}', "FLAGS: none\nVERDICT: APPROVE"],
    )
    recorder, exchanges = run_pipeline(config, script, tmp_path, registry)
    assert acts_of(recorder) == [("reject", "reviewer"), ("retry_with_reason", "reviewer")]
    workers = requests_of(exchanges, "worker")
    assert len(workers) == 2 and f"=== REVIEWER FEEDBACK ===\n{reason}" in workers[1]["messages"][1]["content"]
    assert len(requests_of(exchanges, "guardrail")) == (2 if config == "guardrail" else 0)
    assert tasks.passes(TASK, tmp_path)
    assert scored_acts(registry, recorder, config) == ["reject", "retry_with_reason"]


def test_a_failed_guardrail_model_call_is_infrastructure_not_a_reject(home, tmp_path, registry):
    from adapters.crewai_pipeline import ModelCallFailed

    class Failing(Script):
        def __call__(self, request):
            if stage_of(request) == "guardrail":
                return Reply(status=500, error="upstream down")
            return super().__call__(request)

    with pytest.raises(ModelCallFailed) as raised:  # a ConnectionError: the runner's retry, then RUN_ERROR
        run_pipeline("guardrail", Failing([good_artifact()], ["VERDICT: APPROVE"]), tmp_path, registry)
    assert isinstance(raised.value, ConnectionError) and "upstream down" in str(raised.value)


def test_default_config_has_no_guardrail(home, tmp_path, registry):
    script = Script(["this is not the contracted artifact"], ["VERDICT: APPROVE"])
    recorder, exchanges = run_pipeline("default", script, tmp_path, registry)
    assert acts_of(recorder) == []
    assert requests_of(exchanges, "guardrail") == [] and len(requests_of(exchanges, "worker")) == 1
    assert not tasks.passes(TASK, tmp_path)


def test_wave1_prompts_carry_no_flags_addendum(home, tmp_path, registry):
    _, exchanges = run_pipeline(
        "default", Script([good_artifact()], ["VERDICT: APPROVE"]), tmp_path, registry, flags=False
    )
    reviewers = requests_of(exchanges, "reviewer")
    assert reviewers and not any("ANOMALY-FIRST" in r["messages"][0]["content"] for r in reviewers)


def test_listeners_do_not_outlive_the_run(home, tmp_path, registry):
    from crewai.events.event_bus import crewai_event_bus
    from crewai.events.types.llm_guardrail_events import LLMGuardrailCompletedEvent

    def handlers():
        return len(crewai_event_bus._sync_handlers.get(LLMGuardrailCompletedEvent, ()))

    before = handlers()
    script = Script(
        [good_artifact()],
        ["VERDICT: APPROVE"],
        ['{"valid": false, "feedback": "x"}', '{"valid": true, "feedback": null}'],
    )
    first, _ = run_pipeline("guardrail", script, tmp_path / "a", registry)
    second, _ = run_pipeline("guardrail", Script([good_artifact()], ["VERDICT: APPROVE"]), tmp_path / "b", registry)
    assert handlers() == before
    assert len(acts_of(first)) == 2 and acts_of(second) == []  # nothing of the first run reached the second


def test_crewai_storage_stays_under_the_run_home(home, tmp_path, registry):
    keys = ("CREWAI_STORAGE_DIR", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")
    before = {k: os.environ.get(k) for k in keys}
    run_pipeline("default", Script([good_artifact()], ["VERDICT: APPROVE"]), tmp_path, registry)
    assert (home / ".local" / "share" / "sabot-crewai" / "latest_kickoff_task_outputs.db").is_file()
    assert {k: os.environ.get(k) for k in keys} == before  # restored after the run


def test_scripted_guardrail_responder():
    policy = ScriptedPolicy("t")
    ours = {"response_format": {"type": "json_schema", "json_schema": {"name": "LLMGuardrailResult"}}}
    assert crewai_guardrail.respond({"messages": [{"role": "user", "content": "hi"}]}, policy, random.Random(1)) is None

    def ask(artifact, seed):
        query = (
            f"\n        Ensure ...\n\n        Task result:\n        {artifact}\n\n"
            "        Guardrail:\n        The T1 extractor's artifact ...\n\n        Your task:\n"
        )
        return json.loads(
            crewai_guardrail.respond(
                {**ours, "messages": [{"role": "user", "content": query}]}, policy, random.Random(seed)
            ).content
        )

    assert all(ask(good_artifact(), s) == {"valid": True, "feedback": None} for s in range(20))
    bad = [ask("not the contracted artifact", s) for s in range(20)]
    assert all(set(b) == {"valid", "feedback"} for b in bad)
    assert 10 <= sum(not b["valid"] for b in bad) < 20  # seeded: mostly acts on a contract problem, not always


# -- live runs through the runner ----------------------------------------------------------------

OPERATORS = ("O1", "O2", "O3", "O4", "O5", "O6")


@pytest.fixture
def crewai_runner(monkeypatch):
    import adapters.runner

    monkeypatch.setitem(adapters.runner.PIPELINES, "crewai", CrewAIPipeline)
    monkeypatch.delenv("SABOT_MODEL_BASE_URL", raising=False)
    return adapters.runner


@pytest.mark.parametrize("config", ["default", "guardrail"])
def test_every_operator_lands_and_is_verified(crewai_runner, registry, tmp_path, config):
    RunSpec, run = crewai_runner.RunSpec, crewai_runner.run
    ruleset = load_ruleset(registry, "v0.2.0")
    baseline = run(RunSpec("t", 2, "crewai", config, TASK, None, 11), registry, tmp_path).record
    assert baseline.error is None and baseline.injection_seq is None and baseline.task_passed
    for op in OPERATORS:
        record = run(RunSpec("t", 2, "crewai", config, TASK, op, 11), registry, tmp_path).record
        assert record.error is None, record.error
        assert record.injection_verified, (config, op)
        injected = [e for e in record.events if e.payload.get("injected")]
        assert len(injected) == 1 and injected[0].payload["operator"] == op
        assert record.injection_seq == injected[0].seq
        verdict = score_cell(ruleset, Cell(op, Probe("crewai", config, TASK, 11)), record, baseline)
        assert verdict.excluded != "INJECTION_UNVERIFIED"
        if op == "O4":
            assert "gpt-5.6-luna" in record.served_model_ids()
        if op == "O6":
            assert not record.task_passed


def test_exhaustion_through_the_runner_is_a_scored_escalate_not_run_error(
    crewai_runner, registry, tmp_path, monkeypatch
):
    """The real scripted policy, with a worker that cannot meet the contract: CrewAI exhausts its retries."""
    monkeypatch.setattr(skills, "solve", lambda *a, **k: "not the contracted artifact")
    spec = crewai_runner.RunSpec("t", 2, "crewai", "guardrail", TASK, "O1", 11)
    outcome = crewai_runner.run(spec, registry, tmp_path)
    record = outcome.record
    assert record.error is None and not record.task_passed  # completed, task failed: never RUN_ERROR
    acts = [(e.payload["act"], e.payload["component"]) for e in record.events if e.kind == "guardrail-event"]
    assert (
        acts[-1] == ("escalate", "contract-guardrail") and acts.count(("retry_with_reason", "contract-guardrail")) == 3
    )
    workers = [i for i in outcome.intent if i.get("stage") == "worker"]
    assert len(workers) == 4  # CrewAI re-ran the worker guardrail_max_retries times
    counted = [
        a.act
        for a in mapping_acts(load_ruleset(registry, "v0.2.0"), record, registry.anchors(TASK, "O1"), 1)
        if a.counted
    ]
    assert "escalate" in counted and "reject" in counted  # adjudicated against the published crewai mapping


def test_no_request_leaves_loopback(crewai_runner, registry, tmp_path, socket_addresses):
    seen = socket_addresses
    for op in (None, "O1", "O4"):
        record = crewai_runner.run(
            crewai_runner.RunSpec("t", 2, "crewai", "guardrail", TASK, op, 12), registry, tmp_path
        ).record
        assert record.error is None
    assert seen, "the audit hook saw no connection at all"
    assert {host for host in seen if host not in ("127.0.0.1", "localhost", "::1")} == set()


EXIT_PROBE = """
import socket, sys, time
LOOPBACK = ("127.0.0.1", "localhost", "::1")

def audit(event, args):  # reported as it happens: an exporter at interpreter exit is caught too
    host = args[1][0] if event == "socket.connect" and isinstance(args[1], tuple) else args[0] if event == "socket.getaddrinfo" else None
    if isinstance(host, (str, bytes)) and host not in LOOPBACK:
        print("FOREIGN-CONNECT", host, file=sys.stderr, flush=True)

sys.addaudithook(audit)
import adapters.runner as runner
from adapters.crewai_pipeline import CrewAIPipeline
from sabot.registry import Registry
runner.PIPELINES["crewai"] = CrewAIPipeline
record = runner.run(runner.RunSpec("t", 2, "crewai", "guardrail", "T1", "O1", 11), Registry(), sys.argv[1]).record
assert record.error is None, record.error
print("RUN-DONE", time.monotonic())  # CLOCK_MONOTONIC is one clock for every process on the host
"""


def test_process_exits_promptly_without_telemetry_env(tmp_path):
    """The adapter itself switches CrewAI's telemetry off: no CREWAI_*/OTEL_* needed in the parent env."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in CREWAI_ENV and k not in ("SABOT_MODEL_BASE_URL", "SABOT_MODEL_API_KEY")
    }
    env["HOME"] = str(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, "-c", EXIT_PROBE, str(tmp_path / "runs")],
        cwd=PROJECT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    exited = time.monotonic()
    assert done.returncode == 0, done.stderr[-2000:]
    assert "RUN-DONE" in done.stdout and "FOREIGN-CONNECT" not in done.stderr
    assert "telemetry.crewai.com" not in done.stderr and "Tracing Preference" not in done.stdout
    # From the run's end to the process's exit: the imports before it take what the machine's load makes them.
    ran = float(done.stdout.split("RUN-DONE", 1)[1].split()[0])
    assert exited - ran < 10, f"the process took {exited - ran:.1f}s to exit after its run (telemetry exit hang?)"
