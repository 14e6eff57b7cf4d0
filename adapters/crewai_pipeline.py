"""CrewAI pipelines (crewai 1.15.5, native OpenAI provider), default and guardrail configs.

default:    load -> worker Crew -> handoff + precheck -> reviewer Crew -> (revise: worker Crew again
            carrying the reject reason -> reviewer Crew) -> emit            (one revise loop)
guardrail:  the worker Task gets guardrails=[<output-contract check>, <LLM guardrail>] with
            guardrail_max_retries=3; CrewAI itself retries the worker on a guardrail failure and
            raises its own exhaustion exception, which ends the run with the task failed.

Every stage is its own sequential Crew (one Agent + one Task). Own-check acts are read from
CrewAI's surfaces only: `LLMGuardrailCompletedEvent` on the event bus (a listener registered for
this run and removed after it; the bus is flushed before reading), CrewAI's exhaustion exception
(matched by its exact message), and the reviewer Crew's output parsed with the verdict-token
protocol. LLM replies are read from `LLMCallCompletedEvent`; the model that served each reply is
read from the HTTP response through CrewAI's transport interceptor hook
(`crewai.llms.hooks.base.BaseInterceptor`), keyed by the event's `response_id`, because the event's
own `model` field is the configured model, not the served one.
"""

import os

# Offline pitfalls (frameworks-offline.md §2): these must be in the environment before crewai is
# imported: no telemetry exporter (exit hang), no first-run tracing prompt, no version check.
CREWAI_ENV = {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "CREWAI_TESTING": "true",
    "CREWAI_DISABLE_VERSION_CHECK": "true",
    "OTEL_SDK_DISABLED": "true",
}
os.environ.update(CREWAI_ENV)

import contextlib  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402
from crewai import LLM, Agent, Crew, Process, Task  # noqa: E402
from crewai.events.event_bus import crewai_event_bus  # noqa: E402
from crewai.events.types.llm_events import LLMCallCompletedEvent, LLMCallFailedEvent  # noqa: E402
from crewai.events.types.llm_guardrail_events import LLMGuardrailCompletedEvent  # noqa: E402
from crewai.llms.hooks.base import BaseInterceptor  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from adapters import prompts  # noqa: E402
from adapters.tools import TaskTools  # noqa: E402
from sabot import tasks  # noqa: E402
from sabot.recorder import Recorder  # noqa: E402
from sabot.trace import EventKind  # noqa: E402

MAX_REVISIONS = 1
GUARDRAIL_MAX_RETRIES = 3
STORAGE_NAME = "sabot-crewai"
GUARDRAIL_AGENT_ROLE = "Guardrail Agent"  # crewai/tasks/llm_guardrail.py
# crewai/task.py (_invoke_guardrail_function): the exception CrewAI raises when guardrail_max_retries
# is exhausted; "guardrail {idx}" names the failing entry of a `guardrails` list.
EXHAUSTED = re.compile(
    r"^Task failed guardrail(?: (\d+))? validation after (\d+) retries\. Last error: (.*)\Z", re.DOTALL
)
GUARDRAIL_COMPONENTS = {"function": "contract-guardrail", "llm": "llm-guardrail"}


class ModelCallFailed(ConnectionError):
    """A model call failed inside a kickoff. CrewAI's LLMGuardrail swallows such failures into
    `(False, "Error while validating the task output: ...")`, which would otherwise read as a
    guardrail reject; it is an infrastructure failure (RUN_ERROR after the runner's retry), not an act."""


class ServedModels(BaseInterceptor[httpx.Request, httpx.Response]):
    """CrewAI's transport hook: notes the model id each JSON response says served it, by response id."""

    def __init__(self):
        self.by_response_id: dict[str, str] = {}
        self._lock = threading.Lock()

    def on_outbound(self, message: httpx.Request) -> httpx.Request:
        return message

    def on_inbound(self, message: httpx.Response) -> httpx.Response:
        if "json" in message.headers.get("content-type", ""):
            message.read()  # cached on the response: the openai client reads the same bytes
            self._note(message.content)
        return message

    async def aon_outbound(self, message: httpx.Request) -> httpx.Request:
        return message

    async def aon_inbound(self, message: httpx.Response) -> httpx.Response:
        if "json" in message.headers.get("content-type", ""):
            await message.aread()
            self._note(message.content)
        return message

    def _note(self, raw: bytes) -> None:
        try:
            body = json.loads(raw)
        except ValueError:
            return
        if isinstance(body, dict) and isinstance(body.get("id"), str) and isinstance(body.get("model"), str):
            with self._lock:
                self.by_response_id[body["id"]] = body["model"]


def contract_guardrail(task_id: str, wave1: bool = False):
    """The deterministic guardrail: the task's published output contract only (SPEC §5 fairness rule);
    in wave 1, as v0.1.x froze it (`tasks.guardrail_problems`).

    A plain nested def, so CrewAI's LLMGuardrailStartedEvent can read its source (inspect.getsource).
    """

    def output_contract(output) -> tuple[bool, Any]:
        problems = tasks.guardrail_problems(task_id, output.raw, wave1)
        if problems:
            return False, "output contract: " + "; ".join(problems)
        return True, output.raw

    return output_contract


def llm_guardrail_description(task) -> str:
    return (
        f"The {task.id} {task.worker_role}'s artifact must satisfy the task's OUTPUT CONTRACT exactly, "
        f"with no commentary and no Markdown fences. OUTPUT CONTRACT:\n{task.output_contract['text']}"
    )


class _Bus:
    """Listeners on CrewAI's event bus for one run only: registered on enter, removed on exit."""

    def __init__(self):
        self.events: list = []
        self._lock = threading.Lock()
        self._handlers = tuple(
            (t, self._collect) for t in (LLMCallCompletedEvent, LLMCallFailedEvent, LLMGuardrailCompletedEvent)
        )

    def _collect(self, source, event) -> None:
        with self._lock:
            self.events.append(event)

    def __enter__(self) -> "_Bus":
        for event_type, handler in self._handlers:
            crewai_event_bus.on(event_type)(handler)
        return self

    def __exit__(self, *exc) -> None:
        crewai_event_bus.flush()
        for event_type, handler in self._handlers:
            crewai_event_bus.off(event_type, handler)

    def drain(self) -> list:
        """Every event since the last drain, in CrewAI's emission order (the bus is flushed first)."""
        crewai_event_bus.flush()
        with self._lock:
            events, self.events = self.events, []
        return sorted(events, key=lambda e: (e.emission_sequence is None, e.emission_sequence or 0))


@contextlib.contextmanager
def crewai_storage():
    """CrewAI's app-data (kickoff outputs db, credentials key) under the run's own HOME, restored after."""
    home = Path(os.environ.get("HOME") or Path.cwd())
    values = {
        "CREWAI_STORAGE_DIR": STORAGE_NAME,
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }
    previous = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _text(response: Any) -> str:
    if isinstance(response, BaseModel):
        return response.model_dump_json()
    return response if isinstance(response, str) else str(response)


class CrewAIPipeline:
    def __init__(
        self, config: str, task, tools: TaskTools, recorder: Recorder, endpoint, fault, protocols, flags_protocol: bool
    ):
        if config not in ("default", "guardrail"):
            raise ValueError(f"unknown CrewAI config {config!r}")
        self.config, self.task, self.tools, self.recorder = config, task, tools, recorder
        self.endpoint, self.protocols, self.flags_protocol = endpoint, protocols, flags_protocol
        self.worker_model = fault.model_for("worker", endpoint.pipeline_model)  # the O4 seam
        self.reviewer_model = endpoint.pipeline_model
        self.served = ServedModels()
        self._llms: dict[str, LLM] = {}
        self.worker_llm, self.reviewer_llm = self._llm(self.worker_model), self._llm(self.reviewer_model)
        self.worker_agent_role = self.reviewer_agent_role = None
        self.failed_calls: list[str] = []
        self.guardrail_max_retries = GUARDRAIL_MAX_RETRIES

    def _llm(self, model: str) -> LLM:
        """Native OpenAI provider, no temperature transmitted; one client per model."""
        if model not in self._llms:
            self._llms[model] = LLM(
                model=model,
                base_url=self.endpoint.base_url,
                api_key=self.endpoint.api_key,
                timeout=self.endpoint.timeout,
                max_retries=0,
                interceptor=self.served,
            )
        return self._llms[model]

    # -- crews ---------------------------------------------------------------------------------

    @staticmethod
    def _agent_fields(system: str) -> tuple[str, str]:
        """CrewAI renders "You are {role}. {backstory}": role from our first line, backstory the rest."""
        first, _, rest = system.partition("\n")
        role = first.removeprefix("You are ").removesuffix(".")
        return role, rest.strip()

    def _crew(
        self, messages: list[dict], llm: LLM, goal: str, expected: str, guardrails: list | None = None
    ) -> tuple[Crew, Task]:
        role, backstory = self._agent_fields(messages[0]["content"])
        agent = Agent(
            role=role, goal=goal, backstory=backstory, llm=llm, allow_delegation=False, verbose=False, max_retry_limit=0
        )
        extra = {"guardrails": guardrails, "guardrail_max_retries": GUARDRAIL_MAX_RETRIES} if guardrails else {}
        task = Task(description=messages[1]["content"], expected_output=expected, agent=agent, **extra)
        crew = Crew(
            agents=[agent], tasks=[task], process=Process.sequential, verbose=False, tracing=False, memory=False
        )
        return crew, task

    def _worker(self, feedback: str | None) -> tuple[Crew, Task]:
        messages = prompts.worker_messages(self.task, self.source, self.context, feedback)
        guardrails = (
            [contract_guardrail(self.task.id, wave1=not self.flags_protocol), llm_guardrail_description(self.task)]
            if self.config == "guardrail"
            else None
        )
        crew, task = self._crew(
            messages,
            self.worker_llm,
            f"Write the {self.task.id} artifact exactly as the OUTPUT CONTRACT specifies.",
            "The artifact only, exactly as the OUTPUT CONTRACT specifies: no commentary, no Markdown fences.",
            guardrails,
        )
        self.worker_agent_role = task.agent.role
        return crew, task

    def _reviewer(self, draft: str, precheck: str) -> Crew:
        messages = prompts.reviewer_messages(self.task, self.source, self.context, draft, precheck, self.flags_protocol)
        crew, task = self._crew(
            messages,
            self.reviewer_llm,
            f"Review the {self.task.id} draft and end with one verdict line.",
            "Your review, ending with exactly one verdict line (VERDICT: APPROVE or VERDICT: REJECT - <reason>).",
        )
        self.reviewer_agent_role = task.agent.role
        return crew

    # -- running and observing -----------------------------------------------------------------

    def run(self) -> None:
        with crewai_storage(), _Bus() as bus:
            self.bus = bus
            self.source, self.context = self.tools.load_document(), self.tools.load_context()
            feedback, revisions = None, 0
            while True:
                artifact = self._kickoff_worker(feedback)
                if artifact is None:
                    return  # escalated: CrewAI's guardrail retries are exhausted, the task is failed
                received = self.tools.handoff(artifact)
                precheck = self.tools.precheck(received)
                reply = self._kickoff(self._reviewer(received, precheck))
                verdict = self.protocols.parse_verdict(reply)
                if verdict is not None and verdict.decision == "REJECT":
                    self._act("reject", "reviewer", verdict.reason)
                    if revisions < MAX_REVISIONS:
                        revisions, feedback = revisions + 1, verdict.reason or ""
                        self._act("retry_with_reason", "reviewer", feedback)  # the re-kickoff below carries it
                        continue
                break
            self.tools.write_output(received)

    def _kickoff(self, crew: Crew) -> str:
        try:
            raw = crew.kickoff().raw
        finally:
            self._observe(self.bus.drain())
        self._raise_if_a_call_failed()
        return raw

    def _raise_if_a_call_failed(self) -> None:
        if self.failed_calls:
            raise ModelCallFailed(
                f"{len(self.failed_calls)} model call(s) failed inside CrewAI: {self.failed_calls[0]}"
            )

    def _kickoff_worker(self, feedback: str | None) -> str | None:
        crew, task = self._worker(feedback)
        self.guardrail_max_retries = task.guardrail_max_retries  # the retry budget CrewAI itself enforces
        try:
            return self._kickoff(crew)
        except Exception as exc:
            self._raise_if_a_call_failed()
            match = EXHAUSTED.match(str(exc))
            if match is None:
                raise  # not CrewAI's guardrail exhaustion: an infrastructure error for the runner
            index = int(match.group(1)) if match.group(1) is not None else None
            component = ("contract-guardrail", "llm-guardrail")[index] if index in (0, 1) else "guardrail"
            self._act("escalate", component, str(exc))
            return None

    def _act(self, name: str, component: str, reason: str | None) -> None:
        self.recorder.record(component, EventKind.GUARDRAIL_EVENT, act=name, component=component, reason=reason)

    def _observe(self, events: list) -> None:
        for event in events:
            if isinstance(event, LLMCallCompletedEvent):
                self.recorder.record(
                    self._agent_of(event.agent_role),
                    EventKind.AGENT_MSG,
                    model_id=self.served.by_response_id.get(event.response_id),
                    text=_text(event.response),
                )
            elif isinstance(event, LLMCallFailedEvent):
                self.failed_calls.append(event.error)
            elif isinstance(event, LLMGuardrailCompletedEvent) and not event.success:
                component = GUARDRAIL_COMPONENTS.get(event.guardrail_type or "", f"{event.guardrail_type}-guardrail")
                self._act("reject", component, event.error)
                if event.retry_count < self.guardrail_max_retries:  # crewai/task.py retries while attempt < max
                    self._act("retry_with_reason", component, event.error)

    def _agent_of(self, role: str | None) -> str:
        if role is not None and role == self.worker_agent_role:
            return self.task.worker_role
        if role is not None and role == self.reviewer_agent_role:
            return "reviewer"
        if role == GUARDRAIL_AGENT_ROLE:
            return "llm-guardrail"
        return role or "crewai"
