"""Running a team's AutoGen team (autogen-agentchat 0.7.5) as it is, reading acts from its mapping's surfaces.

The team is run with `run_stream(task=...)`, each message observed as it is produced:
  agent_message  a message from `agent` whose text matches `pattern` (a critic's verdict);
  routing        the next message after one from `from` matching `pattern` is from `to` (the team
                 handing the work back: a retry carrying the previous message as its reason);
  stop_reason    TaskResult.stop_reason matching `pattern` (the termination surface).
The output handed to the pass criterion is {"messages": [{"source", "content"}], "stop_reason"}.
"""

import asyncio

from adapters.byo.surfaces import Acts, matches


def parts(team) -> dict[str, set[str]]:
    """What a mapping may name in a built team: its participants (by name)."""
    return {"agent": {getattr(a, "name", "") for a in getattr(team, "_participants", None) or ()} - {""}}


def _content(message) -> str | None:
    content = getattr(message, "content", None)
    return content if isinstance(content, str) else None


def run(team, inputs: dict, acts: Acts, where) -> dict:
    from autogen_agentchat.base import TaskResult

    async def go() -> dict:
        messages, stop_reason, pending = [], None, []
        async for item in team.run_stream(task=inputs["task"]):
            if isinstance(item, TaskResult):
                stop_reason = item.stop_reason
                continue
            source, text = getattr(item, "source", ""), _content(item)
            if text is None:
                continue
            where.node = source
            for i, s, reason in pending:
                if source == s["to"]:
                    acts.act(i, s, reason)
            pending = [(i, s, text) for i, s in acts.of("routing") if source == s["from"] and matches(s, text)]
            for i, s in acts.of("agent_message"):
                if source == s["agent"] and matches(s, text):
                    acts.act(i, s, text)
            messages.append({"source": source, "content": text})
        for i, s in acts.of("stop_reason"):
            if matches(s, stop_reason):
                acts.act(i, s, stop_reason)
        return {"messages": messages, "stop_reason": stop_reason}

    return asyncio.run(go())
