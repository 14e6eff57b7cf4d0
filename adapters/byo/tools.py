"""The tool seam: the framework's own tool objects, found by name at run time and wrapped in place.

Found where a pipeline keeps them: the factory module's globals, LangGraph ToolNodes, and AutoGen
agents' tools. A LangChain tool's `func` (and `coroutine`), an AutoGen FunctionTool's `_func` are
swapped for a wrapper that routes every call through the run's fault; `restore()` puts them back,
since module-level tools outlive the run. A tool that is only ever called around its object (as a
plain function) cannot carry a fault: that cell is excluded as INJECTION_UNVERIFIED, with the reason.
"""

import functools
import inspect


def _attrs(obj) -> tuple[str, ...]:
    """The callable attributes of a tool object that do its work, by framework."""
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
    for agent in getattr(pipeline, "_participants", None) or ():
        found += list(getattr(agent, "_tools", None) or ())
        workbench = getattr(agent, "_workbench", None)
        for bench in workbench if isinstance(workbench, (list, tuple)) else [workbench] if workbench else []:
            found += list(getattr(bench, "_tools", None) or ())
    return found


class WrappedTools:
    def __init__(self, pipeline, module, fault, who):
        self.fault, self.who = fault, who
        self.seen: set[str] = set()
        self._saved: list[tuple[object, str, object]] = []
        done = set()
        for obj in candidates(pipeline, module):
            if id(obj) in done or not _attrs(obj):
                continue
            done.add(id(obj))
            for attr in _attrs(obj):
                real = getattr(obj, attr)
                self._saved.append((obj, attr, real))
                object.__setattr__(obj, attr, self._wrap(obj.name, real))

    @property
    def names(self) -> set[str]:
        return {obj.name for obj, _, _ in self._saved}

    def _wrap(self, name: str, real):
        if inspect.iscoroutinefunction(real):
            @functools.wraps(real)
            async def async_wrapper(*args, **kwargs):
                self.seen.add(name)
                result = {}

                async def run_real():
                    result["value"] = await real(*args, **kwargs)
                    return result["value"]

                if self.fault.seam == "tool" and self.fault.spec.get("tool") == name and "claim" in self.fault.spec and not self.fault.landed:
                    return self.fault.call_tool(self.who(), name, kwargs or args, lambda: None)
                value = await run_real()
                return self.fault.call_tool(self.who(), name, kwargs or args, lambda: value)
            return async_wrapper

        @functools.wraps(real)
        def wrapper(*args, **kwargs):
            self.seen.add(name)
            return self.fault.call_tool(self.who(), name, kwargs or args, lambda: real(*args, **kwargs))
        return wrapper

    def restore(self) -> None:
        for obj, attr, real in reversed(self._saved):
            object.__setattr__(obj, attr, real)
        self._saved.clear()
