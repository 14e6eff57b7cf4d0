"""One planted fault for a project's run, at a seam the platform owns: a tool object or the model endpoint.

The operator's spec comes from the project's registered `operators.json`:
  tool seam   {"tool": name, "find"/"replace" | "result" | "claim"}: the tool's result corrupted or
              replaced, or (a `claim`) the tool not run at all and the claim returned as its result;
  model seam  {"agent": name, "find"/"replace" | "model"}: a request of that agent altered as the
              model sees it, or every request of that agent served by another model.
How long it acts is the entry's `duration` (`sabot.projects.DEFAULT_DURATION` per seam): "once", on
the first call it can act on, or "persists", on every call of the tool and every request of the
agent that carries the text it alters (so a framework that re-sends the unaltered history, or a
retry that calls the tool again, meets the same fault). A model swap always persists, and lands
when the endpoint reports serving the target's family: the id itself or a dated snapshot of it
(`gpt-5.6-luna-2026-07-01`; `sabot.model_ids`, data/standard/model_ids.v1.json). What
actually reached the pipeline is recorded; `landed` is decided from that evidence alone, and
`why_not` says why a fault did not land, which the scorer turns into an INJECTION_UNVERIFIED
exclusion, never a miss.
"""

import copy
import threading
from collections.abc import Callable

from sabot.projects import duration_of
from sabot.recorder import Recorder
from sabot.trace import EventKind


def exactly(target: str | None) -> Callable[[str | None], bool]:
    """The served-id test when no registry is at hand: the id itself, nothing else."""
    return lambda served: served is not None and served == target


class SeamFault:
    """`serves_target(served_id)`: whether an id the endpoint reported is the O4 target's model,
    by family (the pin or a dated snapshot of it, `sabot.model_ids`); exact when not given."""

    def __init__(
        self,
        operator: str | None,
        spec: dict | None,
        recorder: Recorder,
        serves_target: Callable[[str | None], bool] | None = None,
    ):
        self.operator, self.spec, self.recorder = operator, spec or {}, recorder
        self.serves_target = serves_target or exactly(self.spec.get("model"))
        self.seam = self.spec.get("seam")
        self.duration = duration_of(self.spec) if self.seam else None
        self.lock = threading.Lock()
        self.attempts = 0  # calls through the seam the fault could have landed on
        self.acted = 0  # calls and requests it acted on (a model swap: the calls sent as the other model)
        self.evidence: list[str] = []
        self.landed = False
        self.served_target = False
        self.tools_seen: set[str] = set()  # the tools called through their objects, as the harness saw them

    def _may_act(self) -> bool:
        return not self.landed or self.duration == "persists"

    def _acted(self, evidence: str) -> None:
        self.landed = True
        self.acted += 1
        self.evidence.append(f"{evidence} (act {self.acted}, {self.duration})")

    def summary(self) -> dict:
        """The fault's part of the cell's evidence: its seam, how long it acts, what it did."""
        return {
            "seam": self.seam,
            "duration": self.duration,
            "acted": self.acted,
            "landed": self.landed,
            "evidence": list(self.evidence),
        }

    # -- the tool seam (called by the proxy for the pipeline's wrapped tools, adapters/byo/tool_channel.py) --

    def claim(self, agent: str, name: str, args) -> str | None:
        """A wrapped tool's call, before it runs: the claim its caller receives instead (the tool not run), or None."""
        with self.lock:
            self.tools_seen.add(name)
            if not (self._targets_tool(name) and "claim" in self.spec):
                return None
            self.attempts += 1
            reply = self.spec["claim"]
            self._acted(f"{name} was not run; its caller received the claim {reply!r}")
        self._record_tool(agent, name, args, reply, injected=True)
        return reply

    def replacement(self, agent: str, name: str, args, text: str | None, output) -> str | None:
        """After a wrapped tool ran (`text`: its result when that is text; else `output`, the result as data):
        the result its caller receives instead, or None for the result as it is."""
        output = text if text is not None else output
        with self.lock:
            self.tools_seen.add(name)
            perturbed = None
            if self._targets_tool(name) and text is not None:
                self.attempts += 1
                perturbed = self._perturb_text(text)
                if perturbed is not None:
                    self._acted(f"{name} returned the perturbed result to its caller")
        self._record_tool(agent, name, args, output if perturbed is None else perturbed, injected=perturbed is not None)
        return perturbed

    def _record_tool(self, agent: str, name: str, args, output, injected: bool) -> None:
        """The tool call as its caller met it: what it received, and whether the fault put it there."""
        planted = {"operator": self.operator} if injected else {}
        self.recorder.record(
            agent,
            EventKind.TOOL_CALL,
            tool=name,
            injected=injected,
            **planted,
            args=jsonable(args),
            output=jsonable(output),
        )

    def result(self, agent: str, name: str, args, value):
        """The result a wrapped tool's caller receives for `value`, what the tool returned."""
        text = value if isinstance(value, str) else None
        replaced = self.replacement(agent, name, args, text, value)
        return value if replaced is None else replaced

    def call_tool(self, agent: str, name: str, args, run):
        """A wrapped tool's call in one process: run it (or not), perturb the result, record what the caller got."""
        claimed = self.claim(agent, name, args)
        return claimed if claimed is not None else self.result(agent, name, args, run())

    def _targets_tool(self, name: str) -> bool:
        return self.seam == "tool" and self.spec.get("tool") == name and self._may_act()

    def _perturb_text(self, text: str) -> str | None:
        if "result" in self.spec:
            return self.spec["result"]
        if self.spec["find"] in text:
            return text.replace(self.spec["find"], self.spec["replace"], 1)
        return None

    # -- the model seam (called by the proxy, on its threads) ----------------------------------

    def model_request(self, agent: str, body: dict) -> dict:
        """The request as the model will see it (a persisting edit: every request carrying the text)."""
        if self.seam != "model" or self.spec.get("agent") != agent:
            return body
        with self.lock:
            if "model" in self.spec:
                self.acted += 1
                return {**body, "model": self.spec["model"]}
            if not self._may_act():
                return body
            self.attempts += 1
            altered, changed = _replace_in_messages(
                body, self.spec["find"], self.spec["replace"], everywhere=self.duration == "persists"
            )
            if changed:
                self._acted(f"a request of {agent} was forwarded with {self.spec['find']!r} replaced")
                self.recorder.record(
                    agent,
                    EventKind.TOOL_CALL,
                    tool="model_endpoint",
                    injected=True,
                    operator=self.operator,
                    field="request",
                    output=self.spec["replace"],
                )
                return altered
            return body

    def model_reply(self, agent: str, served_model: str | None) -> None:
        """What the endpoint said served a swapped call: the O4 landing evidence (SPEC §10.7.2)."""
        if self.seam == "model" and "model" in self.spec and self.spec.get("agent") == agent:
            with self.lock:
                if self.serves_target(served_model) and not self.served_target:
                    self.served_target = self.landed = True
                    self.evidence.append(f"{agent}'s call was served by {served_model}")
                    self.recorder.record(
                        agent,
                        EventKind.TOOL_CALL,
                        tool="model_endpoint",
                        injected=True,
                        operator=self.operator,
                        field="model",
                        output=served_model,
                    )

    # -- the verdict on landing ---------------------------------------------------------------

    def why_not(self, tools_seen: set[str], agents_seen: set[str]) -> str | None:
        if self.operator is None or self.landed:
            return None
        spec = self.spec
        if self.seam == "tool":
            if spec["tool"] not in tools_seen:
                return (
                    f"tool {spec['tool']!r} was never called through its tool object (not found, or called around it)"
                )
            return f"tool {spec['tool']!r} was called but its result never contained {spec.get('find')!r}"
        if spec["agent"] not in agents_seen:
            return f"no model request was identified as agent {spec['agent']!r} (check project.json agents)"
        if "model" in spec:
            return f"{spec['agent']}'s calls were sent as {spec['model']!r} but the endpoint never reported serving it"
        return f"no request of {spec['agent']!r} contained {spec['find']!r}"


def _texts(message: dict) -> list[tuple[dict, str]]:
    """(holder, key) of each text of a chat message: its string content, or its content parts' text."""
    content = message.get("content")
    if isinstance(content, str):
        return [(message, "content")]
    if isinstance(content, list):
        return [(part, "text") for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)]
    return []


def _replace_in_messages(body: dict, find: str, replace: str, everywhere: bool) -> tuple[dict, bool]:
    """The body with `find` replaced: its first occurrence in the latest message carrying it, or
    (`everywhere`, a persisting fault) every occurrence in every message, so that history a
    framework re-sends reaches the model altered too."""
    altered = copy.deepcopy(body)
    hits = [
        (holder, key)
        for message in reversed(altered.get("messages") or [])
        for holder, key in _texts(message)
        if find in holder[key]
    ]
    if not hits:
        return body, False
    for holder, key in hits if everywhere else hits[:1]:
        holder[key] = holder[key].replace(find, replace, -1 if everywhere else 1)
    return altered, True


def jsonable(value):
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return str(value)
