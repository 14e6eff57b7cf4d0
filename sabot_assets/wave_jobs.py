"""Running a live wave (or a slice of it) through the asset graph."""

from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from adapters.runner import PIPELINES
from sabot.matrix import Cell, Probe
from sabot.registry import Registry, RegistryError, WaveDef
from sabot_assets.constants import REPLAY_TAG, RERUN_TAG, RUNNER_VERSION
from sabot_assets.materialize import Block, RunTally, WaveRunner
from sabot_assets.waves.budget import ceiling_tag
from sabot_assets.waves.concurrency import free_slots_of_dead_runs


@dataclass(frozen=True)
class Slice:
    """Which part of a wave to run; None in a field means all of it."""

    frameworks: tuple[str, ...] | None = None
    configs: tuple[str, ...] | None = None
    tasks: tuple[str, ...] | None = None
    operators: tuple[str, ...] | None = None
    seeds: tuple[int, ...] | None = None


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
        raise RegistryError(f"wave {wave_name} has no {what}(s) {', '.join(map(str, unknown))} (it has {', '.join(map(str, registered))})")
    return [r for r in registered if r in wanted]


@dataclass(frozen=True)
class Selected:
    """A wave slice resolved against the registry: what will be run."""

    wave: WaveDef
    frameworks: list[str]  # those with an adapter
    configs: list[str]
    tasks: list[str]
    operators: tuple[str, ...] | None  # None: every operator
    seeds: tuple[int, ...] | None  # None: every seed
    skipped: list[str]  # frameworks not run, with the reason

    def slots(self) -> list[tuple[str | None, Probe]]:
        """(operator or None for the baseline, probe) of every run the slice holds, carved-out cells left out."""
        out = []
        for probe in self.wave.probes():
            if (probe.framework in self.frameworks and probe.config in self.configs and probe.task in self.tasks
                    and (self.seeds is None or probe.seed in self.seeds)):
                out.append((None, probe))
                out += [(op, probe) for op in (self.operators or self.wave.operators) if not self.wave.is_carved_out(Cell(op, probe))]
        return out


def select(registry: Registry, wave_name: str, selection: Slice | None = None, frameworks=None) -> Selected:
    wave = registry.wave(wave_name)
    if wave.source != "live":
        raise RegistryError(f"wave {wave_name} is filled by import; use `sabot corpus score`")
    selection = selection or Slice()
    wanted = _pick(wave_name, "framework", frameworks or selection.frameworks, wave.frameworks)
    configs = _pick(wave_name, "config", selection.configs, wave.configs)
    tasks = _pick(wave_name, "task", selection.tasks, wave.tasks)
    operators = tuple(_pick(wave_name, "operator", selection.operators, wave.operators)) if selection.operators else None
    seeds = tuple(_pick(wave_name, "seed", selection.seeds, wave.seeds)) if selection.seeds else None
    runnable = [f for f in wanted if f in PIPELINES]
    skipped = [f"{f}: no adapter yet" for f in wanted if f not in PIPELINES]
    return Selected(wave, runnable, configs, tasks, operators, seeds, skipped)


def runs_to_launch(registry: Registry, store_path: Path, chosen: Selected, rerun: bool) -> list[Probe]:
    """The probe of every run the slice will launch: its slots less those a matching complete run
    in the run root answers (all of them with `rerun`). What the budget projection counts."""
    from adapters.run_attempt import current_identity
    from sabot_assets.waves.live_runs import reusable_attempts, run_root_beside

    slots = chosen.slots()
    if rerun:
        return [probe for _, probe in slots]
    identity = current_identity(registry, RUNNER_VERSION, chosen.wave.protocol)
    reuse = reusable_attempts(run_root_beside(store_path), chosen.wave.name, slots, identity)
    return [probe for slot in slots if slot not in reuse for probe in (slot[1],)]


def rerun_reasons(registry: Registry, store_path: Path, chosen: Selected) -> dict[str, int]:
    """Why the slice's stored complete runs will run again rather than be reused: reason -> slots."""
    from adapters.run_attempt import current_identity
    from sabot_assets.waves.live_runs import rerun_reasons as reasons_in, run_root_beside

    identity = current_identity(registry, RUNNER_VERSION, chosen.wave.protocol)
    return reasons_in(run_root_beside(store_path), chosen.wave.name, chosen.slots(), identity)


def missing_slots(store_path: Path, chosen: Selected) -> int:
    """How many runs of the slice the store holds no scored run for (never run, or only stopped)."""
    from sabot.store.db import connect

    slots = chosen.slots()
    if not Path(store_path).exists():
        return len(slots)
    with connect(store_path, read_only=True) as con:
        held = set(con.execute("SELECT operator, probe FROM runs WHERE wave = ? AND status = 'present'", [chosen.wave.name]).fetchall())
    return sum(1 for operator, probe in slots if (operator or "", probe.key) not in held)


def run_wave(registry: Registry, defs: dg.Definitions, instance: dg.DagsterInstance, wave_name: str, frameworks=None,
             progress=iter, selection: Slice | None = None, rerun: bool = False, replay: bool = False,
             spend_ceiling: float | None = None) -> WaveRun:
    """Baselines and fault runs block by block (one framework, config and task at a time), then the board.

    Cells whose stored run is complete at the same runner version, endpoint, model ids and protocol
    are reused, not run again, unless `rerun`. Cells ending in RUN_ERROR are scored (excluded,
    itemized) and returned in the tally; the caller decides the exit status. Once the spend breaker
    stops launching (project spend reached `spend_ceiling`, or the project cap), no further block is
    run: the board is made from what was stored, and the rest resumes later.
    """
    registry.require_registered()
    chosen = select(registry, wave_name, selection, frameworks)
    wave = chosen.wave
    # A replay re-executes every selected cell (a new attempt each), answered from its stored exchanges.
    tags = {RERUN_TAG: "true"} if rerun or replay else {}
    if replay:
        tags[REPLAY_TAG] = "true"
    tags.update(ceiling_tag(spend_ceiling))
    free_slots_of_dead_runs(instance)  # a wave killed earlier would otherwise hold its pool slots forever
    runner = WaveRunner(defs, wave, instance, tags or None)
    runner.preregister()
    blocks = [Block(fw, cfg, task, task, chosen.operators, chosen.seeds) for fw in chosen.frameworks for cfg in chosen.configs for task in chosen.tasks]
    for block in progress(blocks):
        runner.runs(block)
        runner.verdicts(block)
        if runner.tally.not_launched:
            break
    runner.kappa()
    runner.board()
    return WaveRun(wave.name, [(fw, cfg) for fw in chosen.frameworks for cfg in chosen.configs], chosen.skipped, runner.tally)
