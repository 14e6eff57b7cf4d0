"""A built-in row's pipeline, as it runs inside the confined fork server (adapters/confined_server.py).

The harness's run process keeps the model gateway (the only holder of a provider key), the
scripted model, the exchange journal, the run root and the sealing; it hands this side a
`PipelineRequest` (what to run, the gateway's loopback endpoint with a placeholder key, the
scratch directory) and gets back a `PipelineResult` as JSON: the events the pipeline's recorder
holds, whether the fault landed, the pipeline's exception as text, and what the frameworks logged
(AutoGen logs a provider's 401 with a page of traceback): the harness keeps that in the attempt's
`pipeline.log`, as it did when pipelines ran in its own process, not on the terminal. JSON, not
pickle: the answer comes from the scored party's process, and unpickling it would run whatever it
chose.
"""

import io
import json
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from sabot.recorder import Recorder
from sabot.trace import Event, EventKind

SOCKETS_KEPT = 10_000
RESULT_LIMIT_BYTES = 64 << 20  # far above any run's events; a larger answer is refused, not parsed
LOG_KEPT_CHARS = 1 << 20  # what the frameworks logged, kept up to this much (a looping run's log is the first MB)


class ConfinementFailed(RuntimeError):
    """The confined child could not set the run up (its namespaces, its scratch): no run, said plainly."""


@dataclass(frozen=True)
class PipelineRequest:
    framework: str
    pipeline_target: str  # the built-in pipeline's "module:Class", as the harness's plug-in registry names it
    config: str
    task: str
    operator: str | None
    protocol: int
    o4_downgrade_model: str
    client_endpoint: object  # adapters.endpoint.Endpoint: the gateway's loopback URL, a placeholder key
    protocols: object  # sabot.parse_rules.Protocols
    run_dir: str  # the run's scratch directory: its cwd, its HOME's parent, the only place it may write
    environ: dict = field(default_factory=dict)
    cover: str = ""  # the empty directory that hides the other runs' scratch (adapters.confined_isolation)


@dataclass
class PipelineResult:
    recorder: Recorder
    fault_landed: bool
    error: dict | None = None  # {"kind", "message", "infrastructure"}: what the pipeline raised
    sockets: list = field(
        default_factory=list
    )  # [event, host, port]: every socket the pipeline's process connected or resolved
    log: str = ""  # what the frameworks logged (WARNING and above, as the root logger lets through)

    def to_json(self) -> bytes:
        events = [[e.seq, e.agent, str(e.kind), e.payload] for e in self.recorder.events]
        return json.dumps(
            {
                "events": events,
                "injection_seq": self.recorder.injection_seq,
                "fault_landed": self.fault_landed,
                "error": self.error,
                "sockets": self.sockets,
                "log": self.log,
            },
            default=str,
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "PipelineResult":
        """The confined side's answer, read as data: anything malformed is that run's failure, named."""
        if len(data) > RESULT_LIMIT_BYTES:
            raise ValueError(f"the pipeline's answer is {len(data)} bytes, over the {RESULT_LIMIT_BYTES}-byte limit")
        doc = json.loads(data)
        if "failure" in doc:
            raise ConfinementFailed(f"the pipeline's confined process could not start the run: {doc['failure']}")
        recorder = Recorder()
        for seq, agent, kind, payload in doc["events"]:
            if not isinstance(payload, dict):
                raise ValueError(f"event {seq}: its payload is not an object")
            recorder.events.append(Event(int(seq), str(agent), str(EventKind(kind)), payload))
        injection = doc.get("injection_seq")
        recorder.injection_seq = None if injection is None else int(injection)
        error = doc.get("error")
        if error is not None:
            error = {
                "kind": str(error["kind"]),
                "message": str(error["message"]),
                "infrastructure": bool(error["infrastructure"]),
            }
        sockets = [[str(event), str(host), str(port)] for event, host, port in doc.get("sockets", [])[:SOCKETS_KEPT]]
        log = doc.get("log", "")
        if not isinstance(log, str):
            raise ValueError("the pipeline's log is not text")
        return cls(recorder, bool(doc["fault_landed"]), error, sockets, log[:LOG_KEPT_CHARS])

    def audit_sockets(self) -> None:
        """Raise the pipeline's socket events here as this process's own audit events (sys.audit, PEP 578),
        so an audit hook of the harness sees what the confined pipeline connected to, as it did when
        pipelines ran in the harness's process."""
        for event, host, port in self.sockets:
            if event == "socket.connect":
                sys.audit("socket.connect", None, (host, port))
            elif event == "socket.getaddrinfo":
                sys.audit("socket.getaddrinfo", host, port, 0, 0, 0)


def run_pipeline(request: PipelineRequest) -> PipelineResult:
    """Build the run's tools, fault and pipeline and run it (inside the sandbox); never raises for
    what the pipeline raised: that is handed back as text for the harness to judge."""
    from adapters.outcome import infrastructure_errors
    from adapters.tools import TaskTools
    from operators import make_fault
    from sabot import plugins, tasks

    run_dir = Path(request.run_dir)
    (run_dir / "home").mkdir(parents=True, exist_ok=True)
    os.environ["HOME"] = str(run_dir / "home")  # this process runs this one run: no restoring needed
    task, oracle = tasks.served(request.task), tasks.oracle(request.task)
    recorder = Recorder()
    fault = make_fault(request.operator, oracle.operators, request.o4_downgrade_model)
    if request.operator == "O4":  # the swap happens at set-up, before any call: that is where it lands
        recorder.record(task.worker_role, EventKind.TOOL_CALL, tool="model_config", injected=True, operator="O4")
    tools = TaskTools(task, recorder, fault, run_dir, task.worker_role)
    error, sockets = None, []

    def note_socket(event: str, args) -> None:  # an audit hook cannot be removed: this process runs one run
        if event == "socket.connect" and isinstance(args[1], tuple) and len(sockets) < SOCKETS_KEPT:
            sockets.append([event, str(args[1][0]), str(args[1][1])])
        elif event == "socket.getaddrinfo" and len(sockets) < SOCKETS_KEPT:
            sockets.append([event, str(args[0]), str(args[1])])

    sys.addaudithook(note_socket)
    logged = io.StringIO()
    handler = logging.StreamHandler(logged)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)  # with a handler on the root, logging's stderr last resort stays unused
    try:
        pipeline_class = plugins.resolve_path(request.pipeline_target, f"pipeline {request.framework!r}")
        pipeline = pipeline_class(
            request.config,
            task,
            tools,
            recorder,
            request.client_endpoint,
            fault,
            request.protocols,
            request.protocol >= 2,
        )
        pipeline.run()
    except Exception as exc:
        error = {
            "kind": type(exc).__name__,
            "message": str(exc),
            "infrastructure": isinstance(exc, infrastructure_errors()),
        }
    finally:
        logging.getLogger().removeHandler(handler)
    return PipelineResult(recorder, fault.landed, error, sockets, logged.getvalue()[:LOG_KEPT_CHARS])
