"""Microsoft Agent Framework pipelines (agent-framework-core 1.12.0, -orchestrations 1.0.1, -openai 1.11.0).

default:    Magentic, the counterpart of AutoGen's Magentic-One: MagenticBuilder(participants=[<worker>],
            manager_agent=<manager>) with a StandardMagenticManager (task and progress ledgers),
            run with workflow.run(task, stream=True). The orchestrator's progress ledger is the review
            mechanism; there is no critic. max_stall_count=2: the framework re-plans when the stall
            count *exceeds* it, so three stalled ledgers re-plan, as Magentic-One's max_stalls=3 does.
guardrail:  worker agent, then reviewer agent (verdict-token protocol, plus the FLAGS addendum in wave 2)
            behind the framework's documented guardrail mechanism, agent middleware ("Termination &
            Guardrails", learn.microsoft.com/agent-framework/agents/middleware/termination): a
            pre-execution check of the draft the reviewer receives against the output contract that,
            on failure, sets the agent's result and raises MiddlewareTermination, so the reviewer's
            model is never called. One revise loop re-runs the worker carrying the reason.

Acts are read from the framework's own surfaces, never asserted by the adapter:
  retry_with_reason  a MagenticOrchestratorEvent(REPLANNED) in the workflow's event stream, its reason
                     built from the PROGRESS_LEDGER_UPDATED event just before it (the ledger's booleans
                     and its own stall reasons, as for Magentic-One); or the revise re-run carrying the
                     reviewer's or the guardrail's reason (guardrail config);
  block              the workflow's output being the orchestrator's own limit message ("Workflow
                     terminated due to reaching maximum round count." / "... reset count."), the
                     counterpart of Magentic-One's "Max rounds reached.";
  reject             the reviewer's reply parsed with the verdict-token protocol, or the agent response
                     the guardrail middleware terminated with (finish_reason "content_filter");
  escalate           the guardrail terminating a second time: the run stops, nothing is written.

Model replies are read from a ChatMiddleware on every agent (each model call, streamed or not), so
the model id recorded is the one the response reports, the manager's internal calls included.

Magentic inputs: as for Magentic-One, the harness tools run up front and their results go into the
task text as SOURCE/CONTEXT blocks, so O1 and O5 land exactly once. Unlike Magentic-One, the pinned
Magentic sends a participant only the manager's instruction (never the task ledger), so the worker
gets the same task text from a ContextProvider, the framework's way of giving an agent context.
O4 perturbs the worker's client; the manager keeps the pipeline model. The handoff, precheck and
write seams (O3, O2, O6) run after the workflow has finished in the default config (no component
sees them: the registered carve-out for this row).

Every run gets its own event loop (asyncio.run). A model-call infrastructure failure, which the
framework wraps in ChatClientException, is re-raised as a ConnectionError so the runner retries it.
"""

import asyncio

from agent_framework import (
    Agent,
    AgentMiddleware,
    AgentResponse,
    ChatMiddleware,
    ContextProvider,
    Message,
    MiddlewareTermination,
)
from agent_framework.openai import OpenAIChatCompletionClient
from agent_framework.orchestrations import (
    GroupChatRequestSentEvent,
    MagenticBuilder,
    MagenticOrchestratorEvent,
    MagenticOrchestratorEventType,
    MagenticProgressLedger,
)
from openai import AsyncOpenAI

from adapters import prompts
from adapters.gateway.clients import gateway_async_http_client
from adapters.outcome import infrastructure_errors
from adapters.tools import TaskTools
from sabot import tasks
from sabot.recorder import Recorder
from sabot.trace import EventKind

MAX_REVISIONS = 1
MAX_STALL_COUNT = (
    2  # re-plans when the stall count exceeds it: the third stalled ledger, as Magentic-One's max_stalls=3
)
MAX_ROUND_COUNT = 20  # Magentic-One's default max_turns
ORCHESTRATOR = "magentic_orchestrator"  # the executor id that emits the orchestrator events
MANAGER = "magentic_manager"  # the manager agent's name (the framework's own author name for it)
GUARDRAIL, REVIEWER = (
    "contract-guardrail",
    "reviewer",
)  # the instrument check knows "contract-guardrail" as pipeline code
LIMIT_MESSAGES = (
    "Workflow terminated due to reaching maximum round count.",
    "Workflow terminated due to reaching maximum reset count.",
)
TERMINATED = "content_filter"  # the finish reason the guardrail's terminating response carries


class FrameworkInfrastructureError(ConnectionError):
    """A model-call infrastructure failure the framework wrapped in its own exception."""


def _infrastructure_cause(exc: BaseException) -> BaseException | None:
    seen, kinds = set(), infrastructure_errors()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, kinds):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


class ReplyRecorder(ChatMiddleware):
    """Records every model reply an agent receives, with the model id the response reports."""

    def __init__(self, label: str, recorder: Recorder):
        self.label, self.recorder = label, recorder

    def _record(self, response):
        self.recorder.record(self.label, EventKind.AGENT_MSG, model_id=response.model, text=response.text or "")
        return response

    async def process(self, context, call_next) -> None:
        if context.stream:
            context.stream_result_hooks.append(self._record)
            await call_next()
        else:
            await call_next()
            if context.result is not None:
                self._record(context.result)


class TaskMaterial(ContextProvider):
    """Gives the worker the task text on every call: the pinned Magentic sends it only instructions."""

    def __init__(self, text: str):
        super().__init__("sabot_task_material")
        self.text = text

    async def before_run(self, *, agent, session, context, state) -> None:
        context.extend_messages(self, [Message(role="user", contents=[self.text])])


class ContractGuardrail(AgentMiddleware):
    """The reviewer's pre-execution guardrail: the draft it receives must meet the output contract;
    otherwise the agent's result is set and MiddlewareTermination ends the run before any model call."""

    def __init__(self, task_id: str, wave1: bool):
        self.task_id, self.wave1 = task_id, wave1

    async def process(self, context, call_next) -> None:
        text = "\n\n".join(m.text or "" for m in context.messages)
        problems = tasks.guardrail_problems(self.task_id, prompts.sections(text).get("DRAFT", ""), wave1=self.wave1)
        if problems:
            reason = "; ".join(problems)
            context.result = AgentResponse(
                messages=[Message(role="assistant", contents=[f"GUARDRAIL: {reason}"])],
                finish_reason=TERMINATED,
                additional_properties={"guardrail_reason": reason},
            )
            raise MiddlewareTermination(reason)
        await call_next()


def replan_reason(ledger: MagenticProgressLedger | None) -> str:
    """A re-plan's reason, from the progress ledger the orchestrator emitted just before it, if the
    re-plan followed one: the ledger's booleans (the wave-1 form) plus the stall answers' own stated
    reasons. Without a ledger this round, the framework re-planned because the ledger it asked for
    could not be parsed (the pinned Magentic resets then, where Magentic-One raises)."""
    if ledger is None:
        return "progress ledger could not be parsed (no ledger this round)"
    flags = {k: getattr(ledger, k).answer for k in ("is_request_satisfied", "is_progress_being_made", "is_in_loop")}
    said = [
        f"{k}: {getattr(ledger, k).reason}"
        for k in ("is_progress_being_made", "is_in_loop")
        if getattr(ledger, k).reason
    ]
    return f"stall threshold crossed {flags}" + ("; " + "; ".join(said) if said else "")


def _output_text(data) -> str:
    if isinstance(data, (AgentResponse,)) or hasattr(data, "text"):
        return data.text or ""
    if isinstance(data, list):
        return "".join(_output_text(d) for d in data)
    return str(data) if isinstance(data, str) else ""


class AgentFrameworkPipeline:
    def __init__(
        self,
        config: str,
        task,
        tools: TaskTools,
        recorder: Recorder,
        endpoint,
        fault,
        protocols,
        flags_protocol: bool,
        max_round_count: int | None = MAX_ROUND_COUNT,
    ):
        if config not in ("default", "guardrail"):
            raise ValueError(f"unknown agent_framework config {config!r}")
        self.config, self.task, self.tools, self.recorder = config, task, tools, recorder
        self.endpoint, self.fault, self.protocols, self.flags_protocol = endpoint, fault, protocols, flags_protocol
        self.max_round_count = max_round_count
        self.events: list = []  # the workflow's own event stream (default config), kept for the observability tests
        self.output: str = ""

    def _agent(self, stage: str, label: str, instructions: str | None, **kwargs) -> Agent:
        """An agent whose client's model the O4 seam decides, reached only through the gateway; no temperature is sent."""
        model = self.fault.model_for(stage, self.endpoint.pipeline_model)
        openai_client = AsyncOpenAI(
            base_url=self.endpoint.base_url,
            api_key=self.endpoint.api_key,
            timeout=self.endpoint.timeout,
            max_retries=0,
            http_client=gateway_async_http_client(self.endpoint.timeout),
        )
        client = OpenAIChatCompletionClient(model=model, async_client=openai_client)
        middleware = [ReplyRecorder(label, self.recorder)] + kwargs.pop("middleware", [])
        return Agent(client=client, name=label, instructions=instructions, middleware=middleware, **kwargs)

    def _act(self, name: str, component: str, reason: str | None) -> None:
        self.recorder.record(component, EventKind.GUARDRAIL_EVENT, act=name, component=component, reason=reason)

    def run(self) -> None:
        try:
            asyncio.run(self._run_magentic() if self.config == "default" else self._run_guardrail())
        except Exception as exc:
            cause = _infrastructure_cause(exc)
            if cause is not None and not isinstance(exc, infrastructure_errors()):
                raise FrameworkInfrastructureError(f"{type(cause).__name__}: {cause}") from exc
            raise
        if self.config == "default":
            # After the workflow (the carve-out seams: no component sees these).
            received = self.tools.handoff(self.output)
            self.tools.precheck(received)
            self.tools.write_output(received)

    # -- default: Magentic ----------------------------------------------------------------------

    def magentic_task(self, source: str, context: str) -> str:
        return prompts.magentic_task(self.task, source, context, self.flags_protocol)

    async def _run_magentic(self) -> None:
        source, context = self.tools.load_document(), self.tools.load_context()
        text = self.magentic_task(source, context)
        system, _ = prompts.worker_messages(self.task, source, context, None)
        worker = self._agent(
            "worker",
            self.task.worker_role,
            system["content"],
            context_providers=[TaskMaterial(text)],
            description=f"The {self.task.id} {self.task.worker_role}: writes the task's artifact from SOURCE and CONTEXT.",
        )
        manager = self._agent("orchestrator", MANAGER, None)
        workflow = MagenticBuilder(
            participants=[worker],
            manager_agent=manager,
            max_stall_count=MAX_STALL_COUNT,
            max_round_count=self.max_round_count,
        ).build()
        ledger, outputs = None, []
        async for event in workflow.run(text, stream=True):
            self.events.append(event)
            data = getattr(event, "data", None)
            if event.type == "magentic_orchestrator" and isinstance(data, MagenticOrchestratorEvent):
                if data.event_type == MagenticOrchestratorEventType.PROGRESS_LEDGER_UPDATED:
                    ledger = data.content
                elif data.event_type == MagenticOrchestratorEventType.REPLANNED:
                    self._act("retry_with_reason", ORCHESTRATOR, replan_reason(ledger))
                    ledger = None
            elif event.type == "group_chat" and isinstance(data, GroupChatRequestSentEvent):
                ledger = None  # the round's ledger led to a participant's turn, not to a re-plan
            elif event.type == "output":
                outputs.append(_output_text(data))
        self.output = "".join(outputs)
        if self.output.strip() in LIMIT_MESSAGES:
            self._act("block", ORCHESTRATOR, self.output.strip())
            self.output = ""  # the limit message is no artifact

    # -- guardrail: worker, then reviewer behind the contract guardrail ---------------------------

    async def _run_guardrail(self) -> None:
        source, context = self.tools.load_document(), self.tools.load_context()
        feedback, revisions, blocked = None, 0, 0
        while True:
            system, user = prompts.worker_messages(self.task, source, context, feedback)
            worker = self._agent("worker", self.task.worker_role, system["content"])
            draft = (await worker.run(user["content"])).text or ""
            received = self.tools.handoff(draft)
            precheck = self.tools.precheck(received)
            system, user = prompts.reviewer_messages(
                self.task, source, context, received, precheck, self.flags_protocol
            )
            reviewer = self._agent(
                "reviewer",
                REVIEWER,
                system["content"],
                middleware=[ContractGuardrail(self.task.id, wave1=not self.flags_protocol)],
            )
            response = await reviewer.run(user["content"])
            if response.finish_reason == TERMINATED:
                reason = (response.additional_properties or {}).get("guardrail_reason") or response.text
                if blocked:
                    self._act("escalate", GUARDRAIL, reason)
                    return  # the run stops here; nothing is written, so the task fails
                blocked = 1
                self._act("reject", GUARDRAIL, reason)
                feedback = reason
                self._act("retry_with_reason", GUARDRAIL, feedback)
                continue
            verdict = self.protocols.parse_verdict(response.text or "")
            if verdict is not None and verdict.decision == "REJECT":
                self._act("reject", REVIEWER, verdict.reason)
                if revisions < MAX_REVISIONS:
                    feedback, revisions = verdict.reason or "", revisions + 1
                    self._act("retry_with_reason", REVIEWER, feedback)
                    continue
            break
        self.tools.write_output(received)
