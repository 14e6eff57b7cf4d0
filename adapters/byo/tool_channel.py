"""The tool seam's channel: a team's wrapped tools ask the harness, never decide in the pipeline's process.

A team's tools run in the pipeline's own (confined) process, where the scored party's code runs too, so
that process is never handed the run's fault: not the operator, not its spec, not its ground truth. Each
call of a wrapped tool (adapters/byo/tools.py) asks the fault layer in the harness, over the same loopback
port the pipeline's model calls take (adapters/byo/proxy.py), twice: before the tool runs ("is this call
answered with a claim?") and after ("what does the caller receive for this result?"). Every run asks the
same questions, a baseline's too, so the questions say nothing about the fault. The harness's SeamFault
(adapters/byo/seams.py) answers and records the tool call; what the fault did, and which tools were
called through their objects, is the harness's own record, never something the pipeline reports.
"""

import threading

import httpx

from adapters.byo.seams import jsonable

CLAIM_PATH = "/sabot/tool/claim"
RESULT_PATH = "/sabot/tool/result"


class ChannelRefused(ValueError):
    """A channel request the harness cannot read: named in the 400 it answers."""


def _text(value) -> str | None:
    return value if isinstance(value, str) else None


def read_claim(doc) -> tuple[str, str, object]:
    """(agent, tool, args) of a claim request, checked: it comes from the scored party's process."""
    if not (isinstance(doc, dict) and isinstance(doc.get("agent"), str) and isinstance(doc.get("tool"), str)):
        raise ChannelRefused('a tool-channel request is {"agent": text, "tool": text, "args": ...}')
    return doc["agent"], doc["tool"], doc.get("args")


def read_result(doc) -> tuple[str, str, object, str | None, object]:
    """(agent, tool, args, text, output) of a result request, checked."""
    agent, tool, args = read_claim(doc)
    if "text" in doc and doc["text"] is not None and not isinstance(doc["text"], str):
        raise ChannelRefused("a tool-channel result's 'text' is text or null")
    return agent, tool, args, doc.get("text"), doc.get("output")


class ToolChannel:
    """The pipeline's side: the interface SeamFault offers in one process (`claim`, `result`), asked of
    the harness at `base_url` (the fault layer's address the pipeline's model client is given)."""

    def __init__(self, base_url: str, timeout: float = 60.0):
        self.origin = base_url.rstrip("/").removesuffix("/v1")
        self.timeout = timeout
        self._local = threading.local()  # a client per thread: tools may run on a framework's worker threads

    def _ask(self, path: str, payload: dict) -> str | None:
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = httpx.Client(timeout=self.timeout, trust_env=False)
        response = client.post(self.origin + path, json=payload)
        response.raise_for_status()
        return _text(response.json().get("replace"))

    def claim(self, agent: str, name: str, args) -> str | None:
        return self._ask(CLAIM_PATH, {"agent": agent, "tool": name, "args": jsonable(args)})

    def result(self, agent: str, name: str, args, value):
        text = _text(value)
        replaced = self._ask(
            RESULT_PATH,
            {
                "agent": agent,
                "tool": name,
                "args": jsonable(args),
                "text": text,
                "output": None if text is not None else jsonable(value),
            },
        )
        return value if replaced is None else replaced
