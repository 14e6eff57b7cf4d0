"""Running a team's Agent Framework workflow (agent-framework 1.12.0) as it is, reading acts from its mapping's surfaces.

The factory returns a built Workflow (Magentic, group chat, sequential, or any other), run with
`workflow.run(task, stream=True)`, each event observed as it is produced:
  agent_message       an agent's response (the AgentExecutorResponse of an `executor_completed`
                      event) from `agent` whose text matches `pattern` (a reviewer's verdict);
  orchestrator_event  a MagenticOrchestratorEvent of type `event` (plan_created, replanned,
                      progress_ledger_updated) whose content matches `pattern` (any, without one);
  request_info        the workflow asking outside for input (plan review, tool approval) matching
                      `pattern`: an escalation; nobody answers, so the run ends there;
  output              the workflow's output matching `pattern` (a final verdict, or the
                      orchestrator's own termination message).
The output handed to the pass criterion is {"messages": [{"source", "content"}], "output": text}.
"""

import asyncio
import json

from adapters.byo.surfaces import Acts, matches

MAGENTIC_EVENTS = ("plan_created", "replanned", "progress_ledger_updated")


def parts(workflow) -> dict[str, set[str]]:
    """What a mapping may name in a built workflow: its agents (by name) and, for Magentic, its orchestrator's event types."""
    executors = getattr(workflow, "executors", None) or {}
    agents = {eid for eid, ex in executors.items() if getattr(ex, "_agent", None) is not None}
    magentic = any(type(ex).__name__ == "MagenticOrchestrator" for ex in executors.values())
    return {"agent": agents, "event": set(MAGENTIC_EVENTS) if magentic else set()}


def _text(data) -> str:
    """The text of an event's payload: a message, a response, a ledger, or a list of them."""
    if isinstance(data, (list, tuple)):
        return "".join(_text(d) for d in data)
    response = getattr(data, "agent_response", None)
    if response is not None:
        return response.text or ""
    if hasattr(data, "to_dict") and not hasattr(data, "text"):
        return json.dumps(data.to_dict(), default=str)
    text = getattr(data, "text", None)
    return text if isinstance(text, str) else data if isinstance(data, str) else ""


def run(workflow, inputs: dict, acts: Acts, where) -> dict:
    async def go() -> dict:
        messages, outputs = [], []
        async for event in workflow.run(inputs["task"], stream=True):
            data = getattr(event, "data", None)
            if event.type == "executor_invoked":
                where.node = event.executor_id
            elif event.type == "executor_completed":
                for item in data if isinstance(data, list) else [data]:
                    if getattr(item, "agent_response", None) is None:
                        continue
                    source, text = item.executor_id, _text(item)
                    messages.append({"source": source, "content": text})
                    for i, s in acts.of("agent_message"):
                        if source == s["agent"] and matches(s, text):
                            acts.act(i, s, text)
            elif event.type == "magentic_orchestrator":
                kind = getattr(getattr(data, "event_type", None), "value", None)
                text = _text(getattr(data, "content", None))
                for i, s in acts.of("orchestrator_event"):
                    if kind == s["event"] and (not s.get("pattern") or matches(s, text)):
                        acts.act(i, s, text)
            elif event.type == "request_info":
                text = _text(data) or type(data).__name__
                for i, s in acts.of("request_info"):
                    if not s.get("pattern") or matches(s, text):
                        acts.act(i, s, text)
            elif event.type == "output":
                outputs.append(_text(data))
        output = "".join(outputs)
        for i, s in acts.of("output"):
            if matches(s, output):
                acts.act(i, s, output)
        return {"messages": messages, "output": output}

    return asyncio.run(go())
