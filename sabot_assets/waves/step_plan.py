"""What a live run asset's steps pass on (sabot_assets.waves.live_runs): the plan `prepare` writes,
the results `execute` writes, as files in the run root keyed by the Dagster run id."""

import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg


STEPS_DIR = ".steps"  # under the run root: each step's plan and results, by Dagster run id


@dataclass
class StepPlan:
    """What `prepare` decided, for `execute` and `settle` (written to the run root; see step_file)."""

    wave: str
    asset: str
    identity: object
    keys: list[str]  # every partition of the step, in order
    carved: list[str] = field(default_factory=list)
    made: dict = field(default_factory=dict)  # key -> attempt directory the wave's schedule made
    reused: dict = field(default_factory=dict)  # key -> attempt directory of a matching complete run
    to_run: dict = field(default_factory=dict)  # key -> RunSpec, in launch order
    replays: dict = field(default_factory=dict)  # RunSpec -> Recording, for a replay
    unscheduled: int = 0  # the wave's schedule never launched these: missing, resumable
    refused: dict = field(default_factory=dict)  # attempt directory -> why it is not evidence
    locked: str | None = None  # the store lock that stopped the sweep
    spend: dict | None = None  # the spend breaker's terms (spend_terms); None: launches are not capped by spend
    rerun: bool = False
    replaying: bool = False

    @property
    def executes(self) -> bool:
        """Whether the execute step runs (else it is skipped, and writes no results)."""
        return bool(self.to_run)


@dataclass
class StepResults:
    """What `execute` did: the runs it made, the cells another holder had claimed, why it stopped launching."""

    ran: list = field(default_factory=list)  # (key, attempt directory, seconds)
    reused: list = field(default_factory=list)  # (key, attempt directory): a matching run landed since prepare
    foreign: list = field(default_factory=list)  # keys whose claim another live process holds
    unlaunched: int = 0
    opened: dict | None = None  # the endpoint breaker's reason, when it stopped the wave
    spent: float = 0.0
    cap: float | None = None
    skipped: str | None = None  # why nothing ran at all (the Dagster run had ended)


def step_file(run_root: Path, dagster_run_id: str, asset: str, what: str) -> Path:
    return run_root / STEPS_DIR / dagster_run_id / f"{asset}.{what}.pickle"


def _write(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_bytes(pickle.dumps(value))
    os.replace(tmp, path)  # whole or absent: a step redelivered after a crash reads no half of it


def _read(path: Path):
    try:
        return pickle.loads(path.read_bytes())
    except FileNotFoundError:
        raise dg.Failure(
            description=f"{path} is missing: the step before this one did not finish in this Dagster run "
            "(is the run root a path every host mounts?)",
            allow_retries=False,
        ) from None
