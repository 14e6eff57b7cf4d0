"""The run record: a superset of the reference corpus's runresult.json (schema_version 1).

A run record is what one pipeline run left behind: its events (seq, agent, kind, payload), where
the fault landed, whether the task passed and any infrastructure error. Live runs add what the
reference format has no room for (the model id that served each call, the raw model exchanges);
those ride in `extra` and in event payloads, so a reference file round-trips byte-for-byte in
content: `to_runresult(parse_runresult(obj)) == obj`.
"""

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

SCHEMA_VERSION = 1
RESULT_KEYS = ("error", "injection_seq", "injection_verified", "task_passed", "trace")
TRACE_KEYS = ("config", "events", "framework", "operator", "run_id", "schema_version", "seed", "task")
EVENT_KEYS = ("agent", "kind", "payload", "seq")


class EventKind(StrEnum):
    """The kinds of event a run record holds: one definition, whose values are the reference
    corpus's strings (so stored and published traces read unchanged; a member equals its string)."""

    TOOL_CALL = "tool-call"  # a tool's result as the pipeline received it; the fault lands on one
    AGENT_MSG = "agent-msg"  # a model reply as an agent received it, with the served model id
    GUARDRAIL_EVENT = "guardrail-event"  # an own-check act on a framework surface (a §5 mapping's act)
    VERDICT = "verdict"  # a verdict token, stop reason or the harness's pass verdict
    PIPELINE_ERROR = "pipeline-error"  # a team's pipeline raised (its code, not the endpoint)


class TraceError(ValueError):
    """A run record that does not follow the schema; the message names the source and field."""

    def __init__(self, source: str, where: str, problem: str):
        super().__init__(f"{source}: {where}: {problem}")
        self.source, self.where, self.problem = source, where, problem


@dataclass(frozen=True)
class Event:
    seq: int
    agent: str
    kind: str
    payload: dict[str, Any]

    @property
    def text(self) -> str | None:
        """The persisted text of an event, where it carries one (agent messages, raw verdicts)."""
        for key in ("text", "raw"):
            value = self.payload.get(key)
            if isinstance(value, str):
                return value
        return None


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    framework: str
    config: str
    task: str
    operator: str | None  # None for a no-fault baseline
    seed: int
    events: tuple[Event, ...]
    injection_seq: int | None
    injection_verified: bool
    task_passed: bool
    error: str | None
    schema_version: int = SCHEMA_VERSION
    extra: dict[str, Any] = field(default_factory=dict)  # keys beyond the reference schema

    @property
    def is_baseline(self) -> bool:
        return self.operator is None

    def served_model_ids(self) -> set[str]:
        return {e.payload["model_id"] for e in self.events if isinstance(e.payload.get("model_id"), str)}


def _require(obj: dict, keys, source: str, where: str) -> None:
    if not isinstance(obj, dict):
        raise TraceError(source, where, f"expected an object, got {type(obj).__name__}")
    missing = [k for k in keys if k not in obj]
    if missing:
        raise TraceError(source, where, f"missing field(s) {', '.join(missing)}")


def _typed(value, types, source: str, where: str):
    types = types if isinstance(types, tuple) else (types,)
    # bool is an int in Python; a seq or seed of `true` is still malformed.
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        names = " or ".join(t.__name__ for t in types)
        raise TraceError(source, where, f"expected {names}, got {type(value).__name__} {value!r:.60}")
    return value


def parse_event(obj: dict, source: str, index: int) -> Event:
    # A well-formed event is read in one test (a scoring reads tens of thousands); anything else
    # takes the checked path, which names what is wrong and where. `type(...) is int` refuses a bool.
    if type(obj) is dict:
        seq, agent, kind, payload = obj.get("seq"), obj.get("agent"), obj.get("kind"), obj.get("payload")
        if type(seq) is int and type(agent) is str and type(kind) is str and type(payload) is dict:
            return Event(seq, agent, kind, payload)
    return _checked_event(obj, source, index)


def _checked_event(obj: dict, source: str, index: int) -> Event:
    where = f"trace.events[{index}]"
    _require(obj, EVENT_KEYS, source, where)
    return Event(
        seq=_typed(obj["seq"], int, source, f"{where}.seq"),
        agent=_typed(obj["agent"], str, source, f"{where}.agent"),
        kind=_typed(obj["kind"], str, source, f"{where}.kind"),
        payload=_typed(obj["payload"], dict, source, f"{where}.payload"),
    )


def parse_runresult(obj: dict, source: str) -> RunRecord:
    """Validate and read one runresult.json object; `source` names it in every error."""
    _require(obj, RESULT_KEYS, source, "runresult")
    trace = obj["trace"]
    _require(trace, TRACE_KEYS, source, "trace")
    if trace["schema_version"] != SCHEMA_VERSION:
        raise TraceError(source, "trace.schema_version", f"unsupported version {trace['schema_version']!r}")
    events = tuple(
        parse_event(e, source, i) for i, e in enumerate(_typed(trace["events"], list, source, "trace.events"))
    )
    seqs = [e.seq for e in events]
    if len(set(seqs)) != len(seqs):
        raise TraceError(source, "trace.events", "duplicate seq numbers")
    extra = {k: v for k, v in obj.items() if k not in RESULT_KEYS}
    extra_trace = {k: v for k, v in trace.items() if k not in TRACE_KEYS}
    if extra_trace:
        extra["trace"] = extra_trace
    return RunRecord(
        run_id=_typed(trace["run_id"], str, source, "trace.run_id"),
        framework=_typed(trace["framework"], str, source, "trace.framework"),
        config=_typed(trace["config"], str, source, "trace.config"),
        task=_typed(trace["task"], str, source, "trace.task"),
        operator=_typed(trace["operator"], (str, type(None)), source, "trace.operator"),
        seed=_typed(trace["seed"], int, source, "trace.seed"),
        events=events,
        injection_seq=_typed(obj["injection_seq"], (int, type(None)), source, "injection_seq"),
        injection_verified=_typed(obj["injection_verified"], bool, source, "injection_verified"),
        task_passed=_typed(obj["task_passed"], bool, source, "task_passed"),
        error=_typed(obj["error"], (str, type(None)), source, "error"),
        schema_version=trace["schema_version"],
        extra=extra,
    )


def to_runresult(record: RunRecord) -> dict:
    """The reference-format object for a record (lossless for anything parse_runresult read)."""
    extra = dict(record.extra)
    extra_trace = extra.pop("trace", {})
    trace = {
        "config": record.config,
        "events": [{"agent": e.agent, "kind": e.kind, "payload": e.payload, "seq": e.seq} for e in record.events],
        "framework": record.framework,
        "operator": record.operator,
        "run_id": record.run_id,
        "schema_version": record.schema_version,
        "seed": record.seed,
        "task": record.task,
        **extra_trace,
    }
    return {
        "error": record.error,
        "injection_seq": record.injection_seq,
        "injection_verified": record.injection_verified,
        "task_passed": record.task_passed,
        "trace": trace,
        **extra,
    }
