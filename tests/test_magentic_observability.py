"""Magentic observability, answered (docs/agent-framework.md): each row of the table is read here from
a real run of AutoGen 0.7.5's Magentic-One or of Agent Framework 1.12.0's Magentic, against the
scripted model over real HTTP on 127.0.0.1. A test's name is the row it backs."""

import asyncio
import logging

import autogen_agentchat
import pytest
from agent_framework.orchestrations import MagenticBuilder, MagenticPlanReviewRequest, MagenticPlanReviewResponse
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.messages import TextMessage
from autogen_agentchat.teams import MagenticOneGroupChat
from autogen_ext.models.openai import OpenAIChatCompletionClient

from adapters import prompts
from adapters.agent_framework_pipeline import MANAGER, ORCHESTRATOR, AgentFrameworkPipeline, TaskMaterial
from adapters.autogen_pipeline import MODEL_INFO, AutoGenPipeline
from adapters.endpoint import scripted
from adapters.scripted import magentic
from adapters.scripted.reply import Reply
from adapters.scripted.server import ScriptedModelServer
from adapters.tools import TaskTools
from operators import Fault
from sabot import tasks
from sabot.parse_rules import Protocols
from sabot.recorder import Recorder
from tests.test_agent_framework_acts import Ledgers, acts_of, magentic_events, run_pipeline

pytestmark = pytest.mark.filterwarnings(
    "ignore:Pydantic serializer warnings:UserWarning"
)  # AutoGen's structured ledger, harmless
TASK = "T1"
TASK_LEDGER_HEAD = "We are working to address the following user request:"


class Unparseable(Ledgers):
    """The first `bad` progress ledgers are no JSON at all; the rest follow the scripted policy."""

    def __init__(self, bad: int):
        super().__init__()
        self.bad = bad

    def __call__(self, request):
        if magentic.LEDGER in prompts.message_text(request["messages"][-1]) and self.bad > 0:
            self.bad -= 1
            return Reply(content="I think the worker should go on.")
        return super().__call__(request)


def autogen_magentic(responder, tmp_path):
    """A Magentic-One team run as the AutoGen row builds it; its TaskResult and trace-logger lines."""
    task, records = tasks.served(TASK), []
    pipeline = AutoGenPipeline(
        "guardrail",
        task,
        TaskTools(task, Recorder(), Fault(), tmp_path, task.worker_role),
        Recorder(),
        None,
        Fault(),
        None,
        True,
    )
    source, context = task.documents["source"], task.documents["context"]

    class Lines(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    logger, handler = logging.getLogger(autogen_agentchat.TRACE_LOGGER_NAME), Lines(logging.DEBUG)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        with ScriptedModelServer(responder) as server:
            client = lambda: OpenAIChatCompletionClient(
                model="gpt-5.6-terra",
                base_url=server.base_url,
                api_key="sk-local",
                model_info=dict(MODEL_INFO),
                max_retries=0,
            )
            system, _ = prompts.worker_messages(task, source, context, None)
            worker = AssistantAgent(
                task.worker_role,
                model_client=client(),
                system_message=system["content"],
                description="writes the artifact",
            )
            team = MagenticOneGroupChat([worker], model_client=client(), max_stalls=3)
            result = asyncio.run(team.run(task=pipeline.magentic_task(source, context)))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return result, records


# -- re-plan ----------------------------------------------------------------------------------------


def test_replan_autogen_is_a_trace_logger_line(tmp_path):
    _, lines = autogen_magentic(Ledgers(stall=(2, 3, 4)), tmp_path)
    assert sum(line.startswith("Stall count exceeded, re-planning with the outer loop") for line in lines) == 1


def test_replan_agent_framework_is_a_typed_event(tmp_path, registry):
    recorder, _, pipeline = run_pipeline("default", Ledgers(stall=(2, 3, 4)), tmp_path, registry)
    [replanned] = magentic_events(pipeline, "replanned")
    assert "The last run stalled" in replanned.content.text  # the new task ledger itself, in the event
    assert acts_of(recorder) == [("retry_with_reason", ORCHESTRATOR)]


# -- stall ------------------------------------------------------------------------------------------


def test_stall_autogen_is_only_in_the_logged_progress_ledger(tmp_path):
    _, lines = autogen_magentic(Ledgers(stall=(2, 3)), tmp_path)
    ledgers = [line for line in lines if line.startswith("Progress Ledger: ")]
    assert (
        sum(
            "'is_in_loop': {'reason': 'The same instruction and the same reply have repeated.', 'answer': True}" in line
            for line in ledgers
        )
        == 2
    )
    assert not any("Stall count exceeded" in line for line in lines)  # two stalls: counted inside, never shown


def test_stall_agent_framework_is_each_progress_ledger_event(tmp_path, registry):
    _, _, pipeline = run_pipeline("default", Ledgers(stall=(2, 3)), tmp_path, registry)
    ledgers = magentic_events(pipeline, "progress_ledger_updated")
    stalled = [e.content for e in ledgers if e.content.is_in_loop.answer or not e.content.is_progress_being_made.answer]
    assert len(stalled) == 2 and stalled[0].is_progress_being_made.reason == "The replies repeat."
    assert magentic_events(pipeline, "replanned") == []  # the stall count itself is never emitted


# -- reset ------------------------------------------------------------------------------------------


def test_reset_autogen_is_a_second_task_ledger_message(tmp_path):
    result, _ = autogen_magentic(Ledgers(stall=(2, 3, 4)), tmp_path)
    ledgers = [
        m for m in result.messages if isinstance(m, TextMessage) and m.content.lstrip().startswith(TASK_LEDGER_HEAD)
    ]
    assert len(ledgers) == 2


def test_reset_agent_framework_follows_an_unparseable_ledger_too(tmp_path, registry):
    """The pinned Magentic resets and re-plans when its ledger cannot be parsed (3 attempts); Magentic-One raises."""
    recorder, _, pipeline = run_pipeline("default", Unparseable(bad=3), tmp_path, registry)
    assert len(magentic_events(pipeline, "replanned")) == 1
    [act] = [e.payload for e in recorder.events if e.kind == "guardrail-event"]
    assert (
        act["act"] == "retry_with_reason"
        and act["reason"] == "progress ledger could not be parsed (no ledger this round)"
    )
    assert tasks.passes(TASK, tmp_path)


# -- termination ------------------------------------------------------------------------------------


def test_termination_autogen_is_the_task_results_stop_reason(tmp_path):
    result, _ = autogen_magentic(Ledgers(), tmp_path)
    assert result.stop_reason and result.stop_reason != "Max rounds reached."  # free text from the satisfied ledger


def test_termination_agent_framework_has_no_stop_reason_only_its_output(tmp_path, registry):
    recorder, _, pipeline = run_pipeline("default", Ledgers(), tmp_path, registry)
    assert [e.type for e in pipeline.events].count("output") == 1 and acts_of(recorder) == []
    assert not any(
        e.type == "magentic_orchestrator" and e.data.event_type.value not in ("plan_created", "progress_ledger_updated")
        for e in pipeline.events
    )
    assert tasks.passes(TASK, tmp_path)


# -- escalation -------------------------------------------------------------------------------------


def test_escalation_agent_framework_asks_a_human_when_it_stalls(tmp_path, registry):
    """Plan review: a typed request_info event, is_stalled=True after a stall; Magentic-One has no such hook."""
    task = tasks.served(TASK)
    with ScriptedModelServer(Ledgers(stall=(2, 3, 4))) as server:
        pipeline = AgentFrameworkPipeline(
            "default",
            task,
            TaskTools(task, Recorder(), Fault(), tmp_path, task.worker_role),
            Recorder(),
            scripted(server.base_url, "gpt-5.6-terra", "gpt-5.6-luna"),
            Fault(),
            Protocols.from_registry(registry),
            True,
        )
        text = pipeline.magentic_task(task.documents["source"], task.documents["context"])
        system, _ = prompts.worker_messages(task, task.documents["source"], task.documents["context"], None)
        worker = pipeline._agent(
            "worker",
            task.worker_role,
            system["content"],
            context_providers=[TaskMaterial(text)],
            description="writes the artifact",
        )
        workflow = MagenticBuilder(
            participants=[worker],
            manager_agent=pipeline._agent("orchestrator", MANAGER, None),
            max_stall_count=2,
            enable_plan_review=True,
        ).build()

        async def reviewed() -> list:
            requests, answer = [], None
            while True:
                stream = (
                    workflow.run(text, stream=True) if answer is None else workflow.run(stream=True, responses=answer)
                )
                pending = [
                    e
                    async for e in stream
                    if e.type == "request_info" and isinstance(e.data, MagenticPlanReviewRequest)
                ]
                if not pending:
                    return requests
                requests += [e.data for e in pending]
                answer = {e.request_id: MagenticPlanReviewResponse.approve() for e in pending}

        requests = asyncio.run(reviewed())
    assert [r.is_stalled for r in requests] == [False, True]  # the initial plan, then the stall's new plan
    assert "The last run stalled" in requests[1].plan.text


def test_every_row_of_the_published_table_names_tests_that_exist():
    from pathlib import Path
    import re

    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "agent-framework.md").read_text()
    table = doc[doc.index("| act / surface |") :].split("\n\n")[0].splitlines()[2:]
    assert [row.split("|")[1].strip() for row in table] == [
        "re-plan",
        "stall",
        "reset",
        "reviewer reject",
        "guardrail block",
        "escalation",
        "termination",
    ]
    defined = {
        m
        for path in (root / "tests").glob("test_*.py")
        for m in re.findall(r"^def (test_\w+)\(", path.read_text(), re.MULTILINE)
    }
    for row in table:
        named = re.findall(r"`(test_\w+)`", row.split("|")[-2])
        assert named and set(named) <= defined, (row.split("|")[1], set(named) - defined)
