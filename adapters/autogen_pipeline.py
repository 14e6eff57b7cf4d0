"""AutoGen pipelines (autogen-agentchat/-core/-ext 0.7.5), default and guardrail (Magentic-One) configs.

default:    per-stage RoundRobinGroupChat([agent], max_turns=1) teams: a worker turn, then a critic turn
            (termination_condition=TextMentionTermination("VERDICT:", sources=["critic"])) under the
            verdict-token protocol (plus the FLAGS addendum in wave 2); one revise loop re-dispatches a
            fresh worker team carrying the critic's reject reason. The worker stage has no text to
            mention, so max_turns=1 alone ends it. Agents are built fresh per stage (no carried context).
guardrail:  MagenticOneGroupChat([<worker agent>], model_client=..., max_stalls=3). The orchestrator's
            progress ledger is the review mechanism; there is no critic. In wave 2 the FLAGS line is
            line 1 of the task's OUTPUT CONTRACT (artifact-head form, SPEC §10.2).

Acts are read from the framework's own surfaces, never asserted by the adapter:
  reject             the critic's TextMessage (autogen_agentchat.messages.TextMessage in
                     TaskResult.messages) parsed with the verdict-token protocol;
  retry_with_reason  the revise re-dispatch carrying that reason (default); or a Magentic-One re-plan,
                     read from the trace logger (logging.getLogger(autogen_agentchat.TRACE_LOGGER_NAME))
                     line "Stall count exceeded, re-planning with the outer loop..." with the reason
                     built from the "Progress Ledger: {...}" record logged just before it: the ledger's
                     booleans (the wave-1 "stall threshold crossed {...}" form) followed by the ledger's
                     own is_progress_being_made / is_in_loop reasons, so that under v0.2.1's narrow rule
                     a re-plan counts only if the orchestrator's stated reason quotes the anomaly;
  block              not recorded here: the scorer derives it from the `verdict` event carrying
                     TaskResult.stop_reason (mappings stop_reason_block), which this adapter records.

Model replies are read from autogen_core's event logger (autogen_core.EVENT_LOGGER_NAME, the
autogen_core.logging.LLMCallEvent the OpenAI client logs for every call), so the model id recorded is
the one the response reports, for every call (the orchestrator's internal facts/plan/ledger calls too).

Magentic-One inputs: the adapter calls the harness tools (load_document, load_context) itself and puts
their results into the task text as SOURCE/CONTEXT blocks, as wave 1 did, rather than exposing them as
autogen FunctionTools. Why: the orchestrator, not the adapter, decides whether a tool is called, so an
O1/O5 seam behind a FunctionTool could go unexercised (INJECTION_UNVERIFIED) or land twice; loading
them up front makes O1 (load_document) and O5 (load_context) land exactly once, before the team runs,
in material every component (orchestrator and worker) then sees. O4 perturbs the worker agent's own
client (fault.model_for("worker", ...)); the orchestrator keeps the pipeline model. The handoff,
precheck and write seams (O3, O2, O6) run after the team has finished (the §10.6 carve-out: no
component sees them; the wave layer does not run those cells).

Isolation: every run (every stage, in the default config) runs on its own event loop (asyncio.run),
and the log handler it attaches accepts only records emitted on the run's own thread and, for model
calls, only calls made through the clients this adapter built (a context variable set by
_LabelledClient.create names the calling agent);
the handler is removed and logger levels and propagation restored when the run ends, whatever happens.
Model-call infrastructure failures, which AutoGen re-raises as RuntimeError("<Type>: ..."), are
re-raised as a ConnectionError so the runner retries them and then records RUN_ERROR.
"""

import ast
import asyncio
import contextlib
import contextvars
import logging
import re
import threading
import warnings

import autogen_agentchat
import autogen_core
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import TaskResult
from autogen_agentchat.conditions import TextMentionTermination
from autogen_agentchat.messages import TextMessage
from autogen_agentchat.teams import MagenticOneGroupChat, RoundRobinGroupChat
from autogen_core.logging import LLMCallEvent
from autogen_ext.models.openai import OpenAIChatCompletionClient

from adapters import prompts
from adapters.gateway.clients import gateway_async_http_client
from adapters.tools import TaskTools
from sabot.recorder import Recorder
from sabot.trace import EventKind

MAX_REVISIONS = 1
MAX_STALLS = 3
MAX_TURNS = 20  # MagenticOneGroupChat's own default
ORCHESTRATOR = "MagenticOneOrchestrator"
CRITIC = "critic"
STALL_LINE = "Stall count exceeded, re-planning with the outer loop"
LEDGER_PREFIX = "Progress Ledger: "
VERDICT_MENTION = "VERDICT:"
MODEL_INFO = {
    "vision": False,
    "function_calling": True,
    "json_output": True,
    "structured_output": True,
    "family": "unknown",
    "multiple_system_messages": True,
}

WRAPPED_INFRA = re.compile(
    r"^(?:APIConnectionError|APITimeoutError|InternalServerError|RateLimitError|ConnectError|ConnectTimeout|"
    r"ReadTimeout|ReadError|RemoteProtocolError|ConnectionError|TimeoutError)\b"
)


class FrameworkInfrastructureError(ConnectionError):
    """A model-call infrastructure failure that AutoGen re-raised as a RuntimeError."""


_CALLER: contextvars.ContextVar = contextvars.ContextVar("sabot_autogen_caller", default=None)


class _LabelledClient(OpenAIChatCompletionClient):
    """The OpenAI client, marking each call with the agent it serves (read by the LLMCallEvent handler)."""

    def __init__(self, *, sabot_label: str, **kwargs):
        super().__init__(**kwargs)
        self._sabot_label = sabot_label

    async def create(self, *args, **kwargs):
        token = _CALLER.set(self._sabot_label)
        try:
            return await super().create(*args, **kwargs)
        finally:
            _CALLER.reset(token)


class _RunHandler(logging.Handler):
    """Collects, in emission order, the records logged on one thread (the run's event loop): model
    calls (autogen_core LLMCallEvent) and orchestrator trace lines (plain-text messages)."""

    def __init__(self, thread_id: int):
        super().__init__(logging.DEBUG)
        self.thread_id, self.items = thread_id, []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread != self.thread_id:
            return
        if isinstance(record.msg, LLMCallEvent):
            call = _llm_call(record.msg)
            if call is not None:
                self.items.append(("call", call))
        elif isinstance(record.msg, str):
            self.items.append(("trace", record.getMessage()))


def _llm_call(event: LLMCallEvent):
    """(agent, model id the response reports, reply text) of one logged call, or None if not ours."""
    agent = _CALLER.get()
    if agent is None:
        return None
    response = event.kwargs.get("response") or {}
    choices = response.get("choices") or [{}]
    message = choices[0].get("message") or {}
    text = message.get("content")
    if text is None and message.get("tool_calls"):
        text = str(message["tool_calls"])
    return agent, response.get("model"), text or ""


def replan_reason(ledger_repr: str | None) -> str:
    """The re-plan's reason, built from the progress ledger the orchestrator logged just before:
    the ledger's booleans (the wave-1 form) plus the stall answers' own stated reasons."""
    try:
        ledger = ast.literal_eval(ledger_repr) if ledger_repr else None
    except (ValueError, SyntaxError):
        ledger = None
    if not isinstance(ledger, dict):
        return "stall threshold crossed (no progress ledger recorded)"
    keys = ("is_request_satisfied", "is_progress_being_made", "is_in_loop")
    flags = {k: ledger.get(k, {}).get("answer") for k in keys if isinstance(ledger.get(k), dict)}
    said = [
        f"{k}: {ledger[k].get('reason')}"
        for k in ("is_progress_being_made", "is_in_loop")
        if isinstance(ledger.get(k), dict) and ledger[k].get("reason")
    ]
    return f"stall threshold crossed {flags}" + ("; " + "; ".join(said) if said else "")


_ATTACH_LOCK = threading.Lock()
_SAVED: dict[str, tuple[int, bool, int]] = {}  # logger name -> (level, propagate, runs attached)


@contextlib.contextmanager
def _attached(logger_name: str, handler: logging.Handler):
    """Attach `handler` at DEBUG for the run only; the logger's level and propagation are restored when
    the last run using it ends (runs on other threads may overlap), and the handler is always removed."""
    logger = logging.getLogger(logger_name)
    with _ATTACH_LOCK:
        level, propagate, users = _SAVED.get(logger_name, (logger.level, logger.propagate, 0))
        _SAVED[logger_name] = (level, propagate, users + 1)
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False  # the run's debug records stay out of the application's logs
    try:
        yield handler
    finally:
        with _ATTACH_LOCK:
            logger.removeHandler(handler)
            level, propagate, users = _SAVED[logger_name]
            if users == 1:
                del _SAVED[logger_name]
                logger.setLevel(level)
                logger.propagate = propagate
            else:
                _SAVED[logger_name] = (level, propagate, users - 1)


def _last_text(result: TaskResult, source: str) -> str:
    """The last TextMessage `source` said in a team run ("" when it said nothing)."""
    for message in reversed(result.messages):
        if isinstance(message, TextMessage) and message.source == source:
            return message.content
    return ""


class AutoGenPipeline:
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
        max_turns: int | None = MAX_TURNS,
    ):
        if config not in ("default", "guardrail"):
            raise ValueError(f"unknown autogen config {config!r}")
        self.config, self.task, self.tools, self.recorder = config, task, tools, recorder
        self.endpoint, self.fault, self.protocols, self.flags_protocol = endpoint, fault, protocols, flags_protocol
        self.max_turns = max_turns
        self.stop_reason: str | None = None
        self._last_ledger: str | None = None

    # -- clients -----------------------------------------------------------------------------

    def _client(self, stage: str, label: str) -> OpenAIChatCompletionClient:
        """A client for one agent; the O4 seam decides the worker's model. No temperature is sent."""
        model = self.fault.model_for(stage, self.endpoint.pipeline_model)
        return _LabelledClient(
            sabot_label=label,
            model=model,
            base_url=self.endpoint.base_url,
            api_key=self.endpoint.api_key,
            model_info=dict(MODEL_INFO),
            timeout=self.endpoint.timeout,
            max_retries=0,
            http_client=gateway_async_http_client(self.endpoint.timeout),
        )

    def _act(self, name: str, component: str, reason: str | None) -> None:
        self.recorder.record(component, EventKind.GUARDRAIL_EVENT, act=name, component=component, reason=reason)

    # -- running -----------------------------------------------------------------------------

    def run(self) -> None:
        self._log = _RunHandler(threading.get_ident())
        with contextlib.ExitStack() as stack, warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Pydantic serializer warnings", category=UserWarning)
            stack.enter_context(_attached(autogen_core.EVENT_LOGGER_NAME, self._log))
            stack.enter_context(_attached(autogen_agentchat.TRACE_LOGGER_NAME, self._log))
            try:
                if self.config == "default":
                    self._run_default()
                else:
                    self._run_magentic()
            except RuntimeError as exc:
                # AutoGen re-raises an agent's exception as RuntimeError("<Type>: <message>\n<traceback>");
                # an infrastructure failure must stay one, so the runner retries it and records RUN_ERROR.
                if WRAPPED_INFRA.match(str(exc)):
                    raise FrameworkInfrastructureError(str(exc).split("\n", 1)[0]) from exc
                raise
            finally:
                self._flush()

    def _flush(self) -> None:
        """Record what the loggers saw so far, in emission order: every model reply as `agent-msg`
        (with the model the response reports) and every Magentic-One re-plan as `retry_with_reason`,
        its reason built from the progress ledger logged just before the stall line."""
        for kind, item in self._log.items:
            if kind == "call":
                agent, model_id, text = item
                self.recorder.record(agent, EventKind.AGENT_MSG, model_id=model_id, text=text)
            elif item.startswith(LEDGER_PREFIX):
                self._last_ledger = item[len(LEDGER_PREFIX) :]
            elif item.startswith(STALL_LINE):
                self._act("retry_with_reason", ORCHESTRATOR, replan_reason(self._last_ledger))
        self._log.items.clear()

    # -- default: per-stage RoundRobinGroupChat ---------------------------------------------------

    def _stage(self, agent: AssistantAgent, client, task: str, termination) -> TaskResult:
        """One stage as its own RoundRobinGroupChat, on its own event loop."""
        team = RoundRobinGroupChat([agent], termination_condition=termination, max_turns=1)

        async def go() -> TaskResult:
            try:
                return await team.run(task=task)
            finally:
                await client.close()

        try:
            return asyncio.run(go())
        finally:
            self._flush()

    def _run_default(self) -> None:
        source, context = self.tools.load_document(), self.tools.load_context()
        feedback, revisions = None, 0
        while True:
            system, user = prompts.worker_messages(self.task, source, context, feedback)
            client = self._client("worker", self.task.worker_role)
            worker = AssistantAgent(self.task.worker_role, model_client=client, system_message=system["content"])
            result = self._stage(worker, client, user["content"], None)
            draft = _last_text(result, self.task.worker_role)
            received = self.tools.handoff(draft)
            precheck = self.tools.precheck(received)
            system, user = prompts.reviewer_messages(
                self.task, source, context, received, precheck, self.flags_protocol
            )
            client = self._client("reviewer", CRITIC)
            critic = AssistantAgent(CRITIC, model_client=client, system_message=system["content"])
            result = self._stage(
                critic, client, user["content"], TextMentionTermination(VERDICT_MENTION, sources=[CRITIC])
            )
            verdict = self.protocols.parse_verdict(_last_text(result, CRITIC))
            if verdict is not None and verdict.decision == "REJECT":
                self._act("reject", CRITIC, verdict.reason)
                if revisions < MAX_REVISIONS:
                    feedback, revisions = verdict.reason or "", revisions + 1
                    self._act("retry_with_reason", CRITIC, feedback)
                    continue
            break
        self.tools.write_output(received)

    # -- guardrail: Magentic-One --------------------------------------------------------------

    def magentic_task(self, source: str, context: str) -> str:
        return prompts.magentic_task(self.task, source, context, self.flags_protocol)

    def _run_magentic(self) -> None:
        source, context = self.tools.load_document(), self.tools.load_context()
        system, _ = prompts.worker_messages(self.task, source, context, None)
        worker_client = self._client("worker", self.task.worker_role)
        worker = AssistantAgent(
            self.task.worker_role,
            model_client=worker_client,
            system_message=system["content"],
            description=f"The {self.task.id} {self.task.worker_role}: writes the task's artifact from SOURCE and CONTEXT.",
        )
        orchestrator_client = self._client("orchestrator", ORCHESTRATOR)
        team = MagenticOneGroupChat(
            [worker], model_client=orchestrator_client, max_stalls=MAX_STALLS, max_turns=self.max_turns
        )

        async def go() -> TaskResult:
            try:
                return await team.run(task=self.magentic_task(source, context))
            finally:
                await orchestrator_client.close()
                await worker_client.close()

        result = asyncio.run(go())
        self._flush()
        self.stop_reason = result.stop_reason
        # TaskResult.stop_reason is the framework's termination surface; the scorer derives `block` from it.
        self.recorder.record("emit", EventKind.VERDICT, stop_reason=result.stop_reason)
        final = result.messages[-1] if result.messages else None
        artifact = final.content if isinstance(final, TextMessage) and isinstance(final.content, str) else ""
        # After the team run (the carve-out seams: no component sees these).
        received = self.tools.handoff(artifact)
        self.tools.precheck(received)
        self.tools.write_output(received)
