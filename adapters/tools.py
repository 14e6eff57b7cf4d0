"""The harness tools every pipeline calls, with the fault seams wired in.

Framework-agnostic: an adapter calls these from its own nodes, agents or tools. Each call is
recorded as a `tool-call` event; an injected result is marked `injected` (where the fault landed).
Outputs are recorded under `output`, never `text`, so they are not read as a component's words.
"""

from pathlib import Path

from operators import Fault
from sabot import tasks
from sabot.recorder import Recorder
from sabot.trace import EventKind


class TaskTools:
    def __init__(self, task: "tasks.ServedTask", recorder: Recorder, fault: Fault, run_dir: Path, worker: str):
        self.task, self.recorder, self.fault, self.run_dir, self.worker = task, recorder, fault, Path(run_dir), worker

    def _tool(self, agent: str, tool: str, text: str, perturbed: str | None, **extra) -> str:
        if perturbed is None:
            self.recorder.record(agent, EventKind.TOOL_CALL, tool=tool, injected=False, output=text, **extra)
            return text
        self.recorder.record(
            agent,
            EventKind.TOOL_CALL,
            tool=tool,
            injected=True,
            operator=self.fault.operator,
            output=perturbed,
            **extra,
        )
        return perturbed

    def load_document(self) -> str:
        text = self.task.documents["source"]
        return self._tool(
            self.worker, "load_document", text, self.fault.tool_result("load_document", text), field="result"
        )

    def load_context(self) -> str:
        text = self.task.documents["context"]
        return self._tool(
            self.worker, "load_context", text, self.fault.tool_result("load_context", text), field="context"
        )

    def handoff(self, draft: str) -> str:
        """The worker's draft as the reviewer receives it."""
        return self._tool(self.worker, "handoff", draft, self.fault.handoff(draft), field="handoff")

    def precheck(self, draft: str) -> str:
        """The deterministic structural check (output contract only) shown to the reviewer."""
        note = tasks.precheck_note(self.task.id, draft)
        return self._tool("reviewer", "precheck", note, self.fault.tool_result("precheck", note), field="result")

    def write_output(self, artifact: str) -> str:
        path = self.run_dir / self.task.artifact_file
        if self.fault.suppresses_write():
            reply = self.fault.spec["success_response"]
            self.recorder.record(
                self.worker,
                EventKind.TOOL_CALL,
                tool="write_output",
                injected=True,
                operator=self.fault.operator,
                output=reply,
            )
            return reply
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(tasks.strip_flags_head(artifact))
        reply = f"wrote {len(artifact)} characters to {self.task.artifact_file}"
        self.recorder.record(
            self.worker, EventKind.TOOL_CALL, tool="write_output", injected=False, artifact_present=True, output=reply
        )
        return reply
