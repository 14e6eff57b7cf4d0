"""The six operators as seam hooks. The harness tools call every hook; at most one acts, once."""

from dataclasses import dataclass, field


@dataclass
class Fault:
    """No fault: every seam passes through. Subclasses override the one seam they perturb."""

    operator: str | None = None
    spec: dict = field(default_factory=dict)
    landed: bool = False

    def tool_result(self, tool: str, text: str) -> str | None:
        """A replacement for a tool's result, or None to leave it untouched."""
        return None

    def handoff(self, text: str) -> str | None:
        return None

    def model_for(self, stage: str, model: str) -> str:
        return model

    def suppresses_write(self) -> bool:
        return False


@dataclass
class ToolLie(Fault):  # O1: a plausible wrong value in a tool result
    def tool_result(self, tool, text):
        if self.landed or tool != self.spec["seam"] or self.spec["find"] not in text:
            return None
        self.landed = True
        return text.replace(self.spec["find"], self.spec["replace"], 1)


@dataclass
class FalseSuccess(Fault):  # O2: the check reports success for work not done
    def tool_result(self, tool, text):
        if self.landed or tool != self.spec["seam"]:
            return None
        self.landed = True
        return self.spec["fake_report"]


@dataclass
class MessageAlteration(Fault):  # O3: one inter-agent message altered in transit
    def handoff(self, text):
        if self.landed or self.spec["find"] not in text:
            return None  # lands on the first handoff that carries the value
        self.landed = True
        return text.replace(self.spec["find"], self.spec["replace"], 1)


@dataclass
class ModelDowngrade(Fault):  # O4: the worker silently served by a weaker tier
    target: str = "gpt-5.6-luna"

    def model_for(self, stage, model):
        return self.target if stage == "worker" else model


@dataclass
class StaleContext(Fault):  # O5: a superseded revision handed over as current
    def tool_result(self, tool, text):
        if self.landed or tool != self.spec["seam"]:
            return None
        self.landed = True
        return self.spec["stale_content"]


@dataclass
class SilentNoop(Fault):  # O6: the write reports success and writes nothing
    def suppresses_write(self):
        if self.landed:
            return False
        self.landed = True
        return True


OPERATOR_CLASSES = {"O1": ToolLie, "O2": FalseSuccess, "O3": MessageAlteration, "O4": ModelDowngrade, "O5": StaleContext, "O6": SilentNoop}


def make_fault(operator: str | None, oracle_operators: dict, downgrade_model: str) -> Fault:
    """The fault for a run: `oracle_operators` is the task oracle's per-operator specification."""
    if operator is None:
        return Fault()
    cls = OPERATOR_CLASSES[operator]
    spec = oracle_operators[operator]
    if cls is ModelDowngrade:
        return ModelDowngrade(operator, spec, target=downgrade_model)
    return cls(operator, spec)
