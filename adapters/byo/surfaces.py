"""Acts from the surfaces a project's mapping names, and only those (the pattern's mapping-first rule).

Every act is recorded as a `guardrail-event` carrying the surface it came from and the mapping
entry's index, so `sabot explain` shows which registered surface produced it.
"""

import re

from sabot.recorder import Recorder
from sabot.trace import EventKind


class Acts:
    def __init__(self, surfaces: list[dict], recorder: Recorder):
        self.surfaces, self.recorder = list(enumerate(surfaces)), recorder

    def of(self, kind: str):
        return [(i, s) for i, s in self.surfaces if s["surface"] == kind]

    def act(self, index: int, surface: dict, reason) -> None:
        component = (
            surface.get("component")
            or surface.get("node")
            or surface.get("agent")
            or surface.get("task")
            or surface.get("from")
            or surface["surface"]
        )
        self.recorder.record(
            component,
            EventKind.GUARDRAIL_EVENT,
            act=surface["act"],
            component=component,
            reason=None if reason is None else str(reason),
            surface=surface["surface"],
            mapping_entry=index,
        )


def matches(surface: dict, text) -> bool:
    return isinstance(text, str) and bool(re.search(surface.get("pattern", ""), text))
