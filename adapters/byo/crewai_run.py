"""Running a team's CrewAI crew (crewai 1.15.5) as it is, reading acts from CrewAI's own events.

The crew is run with `crew.kickoff(inputs=...)`. A listener on CrewAI's event bus, registered for
the run and removed after it, reads the surfaces the mapping names, each for the task it names
(`Task(name=...)`):
  guardrail        LLMGuardrailCompletedEvent(success=False): a task guardrail (a function, or
                   CrewAI's LLM guardrail; `guardrail_type` narrows it) rejected the task's output;
                   reason = the event's error (SPEC §5, CrewAI: reject (guardrail));
  guardrail_retry  such a failure with retry_count < the task's guardrail_max_retries: CrewAI
                   re-executes the task with the error as its context (crewai/task.py,
                   _invoke_guardrail_function); reason = the error;
  task_output      TaskCompletedEvent whose output matches `pattern` (a reviewer task's verdict
                   token); reason = the pattern's first group when it has one, else the output;
  exhaustion       TaskFailedEvent carrying CrewAI's terminal exception after guardrail_max_retries
                   (matched by its exact message). SPEC §5 scores it escalate, with the run
                   completed and the task failed: never RUN_ERROR.
CrewAI hands events to its handlers on a thread pool, so the collected events are settled into
acts, in CrewAI's emission order, before every model call and every tool call (CrewAI's own
before-call hooks) and after the kickoff: an act lands in the record where it happened relative
to the planted fault. The same tool hook names the agent role making each tool call.

A model call that failed inside the crew fails the run as infrastructure: CrewAI's LLM guardrail
swallows such a failure into a validation failure that would otherwise read as a reject.
The output handed to the pass criterion is {"tasks": [{"name", "agent", "raw"}], "raw": the crew's
final output (None when a task failed), "failed": CrewAI's exhaustion message or None}.
"""

import contextlib
import os
import re
import threading

from adapters.byo.crewai_tasks import addresses as task_addresses
from adapters.byo.crewai_tasks import shown as shown_tasks
from adapters.byo.surfaces import Acts, matches


@contextlib.contextmanager
def environment():
    """CrewAI's offline settings (no telemetry exporter, no first-run tracing prompt, no version
    check), in place before the team's modules import crewai and for the whole run, even in a run
    process whose environment was replaced after a fork; and CrewAI's app data under the run's HOME."""
    from adapters.crewai_pipeline import CREWAI_ENV, crewai_storage

    saved = {key: os.environ.get(key) for key in CREWAI_ENV}
    os.environ.update(CREWAI_ENV)
    try:
        with crewai_storage():
            yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def parts(crew) -> dict[str, set[str]]:
    """What a mapping and the operators may name in a built crew: its tasks (by name, position or
    description prefix: adapters/byo/crewai_tasks.py) and agents (by role)."""
    return {
        "task": {a for names in task_addresses(crew).values() for a in names},
        "agent": {a.role for a in getattr(crew, "agents", None) or ()},
    }


def shown_parts(crew) -> dict[str, str]:
    """How `project check` lists what it built, where a plain list of names would mislead."""
    return {"task": shown_tasks(crew)}


def _reason(surface: dict, text: str) -> str:
    found = re.search(surface.get("pattern", ""), text)
    return found.group(1) if found and found.re.groups and found.group(1) else text


class _Events:
    """CrewAI events of one run: collected on the bus's handler threads, settled in emission order."""

    def __init__(self, on_event):
        from crewai.events.types.llm_events import LLMCallFailedEvent
        from crewai.events.types.llm_guardrail_events import LLMGuardrailCompletedEvent
        from crewai.events.types.task_events import TaskCompletedEvent, TaskFailedEvent

        self.types = (LLMGuardrailCompletedEvent, TaskCompletedEvent, TaskFailedEvent, LLMCallFailedEvent)
        self.on_event, self._pending, self._lock = on_event, [], threading.Lock()

    def _collect(self, source, event) -> None:
        with self._lock:
            self._pending.append(event)

    def __enter__(self) -> "_Events":
        from crewai.events.event_bus import crewai_event_bus

        for event_type in self.types:
            crewai_event_bus.on(event_type)(self._collect)
        return self

    def __exit__(self, *exc) -> None:
        from crewai.events.event_bus import crewai_event_bus

        try:
            self.settle()
        finally:
            for event_type in self.types:
                crewai_event_bus.off(event_type, self._collect)

    def settle(self) -> None:
        from crewai.events.event_bus import crewai_event_bus

        crewai_event_bus.flush()
        with self._lock:
            events, self._pending = self._pending, []
        for event in sorted(events, key=lambda e: (e.emission_sequence is None, e.emission_sequence or 0)):
            self.on_event(event)


class _CrewRun:
    """The acts and task outputs of one kickoff, from the events of the surfaces the mapping names."""

    def __init__(self, crew, acts: Acts):
        from adapters.crewai_pipeline import EXHAUSTED

        self.exhausted = EXHAUSTED
        self.acts, self.tasks, self.addresses = acts, {str(t.id): t for t in crew.tasks}, task_addresses(crew)
        self.outputs: list[dict] = []
        self.failed_calls: list[str] = []
        self.events = _Events(self.on_event)

    def on_event(self, event) -> None:
        from crewai.events.types.llm_events import LLMCallFailedEvent
        from crewai.events.types.llm_guardrail_events import LLMGuardrailCompletedEvent
        from crewai.events.types.task_events import TaskCompletedEvent

        if isinstance(event, LLMCallFailedEvent):
            self.failed_calls.append(str(event.error))
            return
        task = self.tasks.get(str(event.task_id))
        name, addressed = (task.name if task is not None else None), self.addresses.get(str(event.task_id), ())
        if isinstance(event, LLMGuardrailCompletedEvent):
            if not event.success:
                self._guardrail_failed(event, task, addressed)
        elif isinstance(event, TaskCompletedEvent):
            raw = event.output.raw
            self.outputs.append({"name": name, "agent": event.output.agent, "raw": raw})
            for i, s in self.acts.of("task_output"):
                if s["task"] in addressed and matches(s, raw):
                    self.acts.act(i, s, _reason(s, raw))
        elif self.exhausted.match(str(event.error)):  # a TaskFailedEvent: CrewAI's own exhaustion
            for i, s in self.acts.of("exhaustion"):
                if s["task"] in addressed:
                    self.acts.act(i, s, event.error)

    def _guardrail_failed(self, event, task, addressed) -> None:
        error = event.error or ""
        will_retry = task is not None and event.retry_count < task.guardrail_max_retries
        for kind in ("guardrail", "guardrail_retry") if will_retry else ("guardrail",):
            for i, s in self.acts.of(kind):
                if (
                    s["task"] in addressed
                    and s.get("guardrail_type", event.guardrail_type) == event.guardrail_type
                    and matches(s, error)
                ):
                    self.acts.act(i, s, event.error)

    def raise_if_a_call_failed(self) -> None:
        from adapters.crewai_pipeline import ModelCallFailed

        if self.failed_calls:
            raise ModelCallFailed(
                f"{len(self.failed_calls)} model call(s) failed inside the crew: {self.failed_calls[0]}"
            )


@contextlib.contextmanager
def _hooks(before_llm, before_tool):
    """CrewAI's global before-call hooks for the duration of one kickoff."""
    from crewai.hooks.llm_hooks import register_before_llm_call_hook, unregister_before_llm_call_hook
    from crewai.hooks.tool_hooks import register_before_tool_call_hook, unregister_before_tool_call_hook

    register_before_llm_call_hook(before_llm)
    register_before_tool_call_hook(before_tool)
    try:
        yield
    finally:
        unregister_before_llm_call_hook(before_llm)
        unregister_before_tool_call_hook(before_tool)


def revive_event_bus() -> None:
    """A fork copies only the forking thread. A CrewAI event bus whose thread pool and loop thread
    were started in the parent (a crew kicked off there before) would, in the pipeline's forked
    process, queue every event for threads that do not exist, and `kickoff` waits on the first
    forever. Its lazy start is armed again here, so the child starts its own on the first event."""
    from crewai.events.event_bus import crewai_event_bus as bus
    from crewai.utilities.rw_lock import RWLock

    loop_thread = getattr(bus, "_loop_thread", None)
    if bus._executor_initialized and (loop_thread is None or not loop_thread.is_alive()):
        bus._executor_initialized = False
        bus._pending_futures, bus._futures_lock, bus._rwlock = set(), threading.Lock(), RWLock()
        type(bus)._instance_lock = threading.RLock()


def run(crew, inputs: dict, acts: Acts, where) -> dict:
    revive_event_bus()
    state = _CrewRun(crew, acts)

    def before_llm(context) -> None:
        state.events.settle()

    def before_tool(context) -> None:
        state.events.settle()
        where.node = getattr(context.agent, "role", None) or "crew"

    failure = result = None
    with _hooks(before_llm, before_tool), state.events:
        try:
            result = crew.kickoff(inputs=inputs)
        except Exception as exc:  # judged below, once every event is settled
            failure = exc
    state.raise_if_a_call_failed()
    if failure is not None and not state.exhausted.match(str(failure)):
        raise failure
    return {
        "tasks": state.outputs,
        "raw": None if result is None else result.raw,
        "failed": None if failure is None else str(failure),
    }
