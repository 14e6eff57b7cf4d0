"""The experiment matrix: cells, probes and their partition keys.

A cell is (framework, config, operator, task, seed). Dagster allows two partition dimensions, so
a cell is keyed as operator x probe, where a probe is framework.config.task.sSEED. Probe keys are
ordered framework-major with the seed last, so `langgraph.*`, `*.s11` and contiguous ranges all
work in the Dagster UI's partition selector.
"""

import itertools
from dataclasses import dataclass

FRAMEWORKS = ("langgraph", "crewai", "autogen")
CONFIGS = ("default", "guardrail")
TASKS = ("T1", "T2", "T3", "T4", "T5")
OPERATORS = ("O1", "O2", "O3", "O4", "O5", "O6")


class MatrixError(ValueError):
    """A key or coordinate that is not part of the matrix."""


@dataclass(frozen=True, order=True)
class Probe:
    """One pipeline doing one task under one seed: the unit a baseline run covers."""

    framework: str
    config: str
    task: str
    seed: int

    @property
    def key(self) -> str:
        return f"{self.framework}.{self.config}.{self.task}.s{self.seed}"

    @property
    def row(self) -> str:
        return f"{self.framework}/{self.config}"

    @classmethod
    def parse(cls, key: str) -> "Probe":
        parts = key.split(".")
        if len(parts) != 4 or not parts[3].startswith("s") or not parts[3][1:].isdigit():
            raise MatrixError(f"not a probe key (framework.config.task.sSEED): {key!r}")
        framework, config, task, seed = parts
        return cls(framework, config, task, int(seed[1:]))


@dataclass(frozen=True, order=True)
class Cell:
    """The atomic unit of the experiment: one operator planted into one probe."""

    operator: str
    probe: Probe

    @property
    def key(self) -> str:
        """The Dagster multi-partition key string; dimensions sort by name, so operator first."""
        return f"{self.operator}|{self.probe.key}"

    @property
    def label(self) -> str:
        p = self.probe
        return f"{p.framework}/{p.config}/{p.task}/{self.operator}/seed{p.seed}"

    @classmethod
    def parse(cls, key: str) -> "Cell":
        operator, sep, probe = key.partition("|")
        if not sep:
            raise MatrixError(f"not a cell key (OPERATOR|probe): {key!r}")
        return cls(operator, Probe.parse(probe))


def probes(frameworks, configs, tasks, seeds) -> list[Probe]:
    """Every probe of a matrix, in partition order (framework-major, seed last)."""
    return [Probe(*combo) for combo in itertools.product(frameworks, configs, tasks, seeds)]
