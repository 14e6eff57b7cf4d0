"""The tool seam: the framework's own tool objects, found by name at run time and wrapped in place.

Found where a pipeline keeps them: the factory module's globals, LangGraph ToolNodes, AutoGen
agents' tools, and a CrewAI crew's agents and tasks. A LangChain tool's `func` (and `coroutine`),
an AutoGen FunctionTool's `_func`, an Agent Framework FunctionTool's `func`, a CrewAI `@tool`'s `func` or a
CrewAI BaseTool subclass's `_run`
are swapped for a wrapper that routes every call through the run's fault; `restore()` puts them
back, since module-level tools outlive the run. A tool that is only ever called around its object
(as a plain function) cannot carry a fault: that cell is excluded as INJECTION_UNVERIFIED, with the
reason. (CrewAI caches a tool's results per crew by arguments: a repeated identical call is answered
from that cache without reaching the tool, so the caller sees what the first call returned.)
"""

import functools
import inspect

_ABSENT = object()  # an attribute the tool object held only through its class


def _attrs(obj) -> tuple[str, ...]:
    """The callable attributes of a tool object that do its work, by framework."""
    if (
        hasattr(obj, "name") and hasattr(obj, "to_structured_tool") and callable(getattr(obj, "_run", None))
    ):  # crewai BaseTool
        return ("func",) if callable(getattr(obj, "func", None)) else ("_run",)  # `@tool` functions keep theirs in func
    if hasattr(obj, "name") and hasattr(obj, "declaration_only") and callable(getattr(obj, "func", None)):
        return ("func",)  # agent_framework FunctionTool (`@tool`)
    if hasattr(obj, "name") and hasattr(obj, "args_schema") and hasattr(obj, "func"):
        return tuple(a for a in ("func", "coroutine") if getattr(obj, a, None) is not None)  # langchain BaseTool
    if hasattr(obj, "name") and callable(getattr(obj, "_func", None)) and hasattr(obj, "run_json"):
        return ("_func",)  # autogen_core FunctionTool
    return ()


def candidates(pipeline, module) -> list:
    found = list(vars(module).values()) if module is not None else []
    for node in getattr(pipeline, "nodes", {}).values() if isinstance(getattr(pipeline, "nodes", None), dict) else ():
        bound = getattr(node, "bound", None)
        found += list(getattr(bound, "tools_by_name", {}).values())
    if hasattr(pipeline, "kickoff") and isinstance(getattr(pipeline, "agents", None), list):  # a crewai Crew
        for part in [*pipeline.agents, *(getattr(pipeline, "tasks", None) or [])]:
            found += list(getattr(part, "tools", None) or ())
    executors = getattr(pipeline, "executors", None)
    for executor in executors.values() if isinstance(executors, dict) else ():  # an agent_framework Workflow's agents
        options = getattr(getattr(executor, "_agent", None), "default_options", None) or {}
        found += list(options.get("tools") or ())
    for agent in getattr(pipeline, "_participants", None) or ():
        found += list(getattr(agent, "_tools", None) or ())
        workbench = getattr(agent, "_workbench", None)
        for bench in workbench if isinstance(workbench, (list, tuple)) else [workbench] if workbench else []:
            found += list(getattr(bench, "_tools", None) or ())
    return found


def tool_objects(pipeline, module) -> list:
    """The distinct tool objects of a built pipeline that the seam can wrap."""
    found, done = [], set()
    for obj in candidates(pipeline, module):
        if id(obj) not in done and _attrs(obj):
            done.add(id(obj))
            found.append(obj)
    return found


class WrappedTools:
    """The pipeline's tool objects, each call routed through `seam`: the run's SeamFault in one process,
    or, in a team pipeline's process, the channel to the harness that holds it (adapters/byo/tool_channel.py)."""

    def __init__(self, pipeline, module, seam, who):
        self.seam, self.who = seam, who
        self._saved: list[tuple[object, str, object]] = []
        self.names: set[str] = set()  # every tool wrapped, kept after restore() for the record
        for obj in tool_objects(pipeline, module):
            self.names.add(obj.name)
            for attr in _attrs(obj):
                real = getattr(obj, attr)
                self._saved.append((obj, attr, vars(obj).get(attr, _ABSENT)))
                object.__setattr__(obj, attr, self._wrap(obj.name, real))

    def _wrap(self, name: str, real):
        if inspect.iscoroutinefunction(real):

            @functools.wraps(real)
            async def async_wrapper(*args, **kwargs):
                called = kwargs or args
                claimed = self.seam.claim(self.who(), name, called)
                if claimed is not None:
                    return claimed
                return self.seam.result(self.who(), name, called, await real(*args, **kwargs))

            return async_wrapper

        @functools.wraps(real)
        def wrapper(*args, **kwargs):
            called = kwargs or args
            claimed = self.seam.claim(self.who(), name, called)
            if claimed is not None:
                return claimed
            return self.seam.result(self.who(), name, called, real(*args, **kwargs))

        return wrapper

    def restore(self) -> None:
        for obj, attr, own in reversed(self._saved):
            if own is _ABSENT:  # a method of the class (a BaseTool's _run): drop the instance's wrapper
                object.__delattr__(obj, attr)
            else:
                object.__setattr__(obj, attr, own)
        self._saved.clear()
