"""Running a live wave (or a slice of it) through the asset graph."""

from dataclasses import dataclass, field

import dagster as dg

from adapters.runner import PIPELINES
from sabot.registry import Registry, RegistryError
from sabot_assets.constants import REPLAY_TAG, RERUN_TAG
from sabot_assets.materialize import Block, RunTally, WaveRunner
from sabot_assets.waves.concurrency import free_slots_of_dead_runs


@dataclass(frozen=True)
class Slice:
    """Which part of a wave to run; None in a field means all of it."""

    frameworks: tuple[str, ...] | None = None
    configs: tuple[str, ...] | None = None
    tasks: tuple[str, ...] | None = None
    operators: tuple[str, ...] | None = None


@dataclass
class WaveRun:
    wave: str
    rows: list[tuple[str, str]]
    skipped: list[str]  # frameworks not run, with the reason
    tally: RunTally = field(default_factory=RunTally)


def _pick(wave_name: str, what: str, wanted, registered) -> list:
    if not wanted:
        return list(registered)
    unknown = [w for w in wanted if w not in registered]
    if unknown:
        raise RegistryError(f"wave {wave_name} has no {what}(s) {', '.join(unknown)} (it has {', '.join(registered)})")
    return [r for r in registered if r in wanted]


def run_wave(registry: Registry, defs: dg.Definitions, instance: dg.DagsterInstance, wave_name: str, frameworks=None,
             progress=iter, selection: Slice | None = None, rerun: bool = False, replay: bool = False) -> WaveRun:
    """Baselines and fault runs block by block (one framework, config and task at a time), then the board.

    Cells whose stored run is complete at the same runner version, endpoint, model ids and protocol
    are reused, not run again, unless `rerun`. Cells ending in RUN_ERROR are scored (excluded,
    itemized) and returned in the tally; the caller decides the exit status.
    """
    registry.require_registered()
    wave = registry.wave(wave_name)
    if wave.source != "live":
        raise RegistryError(f"wave {wave_name} is filled by import; use `sabot corpus score`")
    selection = selection or Slice()
    wanted = _pick(wave_name, "framework", frameworks or selection.frameworks, wave.frameworks)
    configs = _pick(wave_name, "config", selection.configs, wave.configs)
    tasks = _pick(wave_name, "task", selection.tasks, wave.tasks)
    operators = tuple(_pick(wave_name, "operator", selection.operators, wave.operators)) if selection.operators else None
    runnable = [f for f in wanted if f in PIPELINES]
    skipped = [f"{f}: no adapter yet" for f in wanted if f not in PIPELINES]
    # A replay re-executes every selected cell (a new attempt each), answered from its stored exchanges.
    tags = {RERUN_TAG: "true"} if rerun or replay else {}
    if replay:
        tags[REPLAY_TAG] = "true"
    free_slots_of_dead_runs(instance)  # a wave killed earlier would otherwise hold its pool slots forever
    runner = WaveRunner(defs, wave, instance, tags or None)
    runner.preregister()
    blocks = [Block(fw, cfg, task, task, operators) for fw in runnable for cfg in configs for task in tasks]
    for block in progress(blocks):
        runner.runs(block)
        runner.verdicts(block)
    runner.kappa()
    runner.board()
    return WaveRun(wave.name, [(fw, cfg) for fw in runnable for cfg in configs], skipped, runner.tally)
