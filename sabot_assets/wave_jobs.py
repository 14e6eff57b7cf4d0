"""Running a live wave (or a slice of it) through the asset graph."""

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

from adapters.pipelines import PIPELINES
from sabot import runroot
from sabot.matrix import Cell, Probe
from sabot.registry import Registry, RegistryError, WaveDef
from sabot.store.db import connect
from sabot_assets.constants import REPLAY_TAG, RERUN_TAG, RUNNER_VERSION, SCHEDULED_TAG
from sabot_assets.materialize import Block, RunTally, WaveRunner
from sabot_assets.settled import fingerprint, mark_settled, own_assets, settled_by
from sabot_assets.settled_blocks import block_fingerprints, is_settled, mark_block
from sabot_assets.waves.budget import ceiling_tag
from sabot_assets.waves.concurrency import free_slots_of_dead_runs, host_label

if TYPE_CHECKING:  # the schedule imports the runner and the fork server: only a command with runs to launch does
    from sabot_assets.waves.schedule import BlockCounter, Plan


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
        raise RegistryError(
            f"wave {wave_name} has no {what}(s) {', '.join(map(str, unknown))} (it has {', '.join(map(str, registered))})"
        )
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

    def probes(self) -> list[Probe]:
        return [
            p
            for p in self.wave.probes()
            if p.framework in self.frameworks
            and p.config in self.configs
            and p.task in self.tasks
            and (self.seeds is None or p.seed in self.seeds)
        ]

    def carved_out(self) -> int:
        """How many of the slice's fault cells the wave carves out (never run)."""
        return sum(
            self.wave.is_carved_out(Cell(op, p))
            for p in self.probes()
            for op in (self.operators or self.wave.operators)
        )

    def slots(self) -> list[tuple[str | None, Probe]]:
        """(operator or None for the baseline, probe) of every run the slice holds, carved-out cells left out."""
        out = []
        for probe in self.probes():
            out.append((None, probe))
            out += [
                (op, probe)
                for op in (self.operators or self.wave.operators)
                if not self.wave.is_carved_out(Cell(op, probe))
            ]
        return out


def select(registry: Registry, wave_name: str, selection: Slice | None = None, frameworks=None) -> Selected:
    wave = registry.wave(wave_name)
    if wave.source != "live":
        raise RegistryError(f"wave {wave_name} is filled by import; use `sabot corpus score`")
    selection = selection or Slice()
    wanted = _pick(wave_name, "framework", frameworks or selection.frameworks, wave.frameworks)
    configs = _pick(wave_name, "config", selection.configs, wave.configs)
    tasks = _pick(wave_name, "task", selection.tasks, wave.tasks)
    operators = (
        tuple(_pick(wave_name, "operator", selection.operators, wave.operators)) if selection.operators else None
    )
    seeds = tuple(_pick(wave_name, "seed", selection.seeds, wave.seeds)) if selection.seeds else None
    runnable = [f for f in wanted if f in PIPELINES]
    skipped = [f"{f}: no adapter yet" for f in wanted if f not in PIPELINES]
    return Selected(wave, runnable, configs, tasks, operators, seeds, skipped)


def runs_to_launch(registry: Registry, store_path: Path, chosen: Selected, rerun: bool) -> list[Probe]:
    """The probe of every run the slice will launch: its slots less those a matching complete run
    in the run root answers (all of them with `rerun`). What the budget projection counts."""
    from adapters.run_attempt import current_identity
    from sabot_assets.waves.attempts import reusable_attempts, run_root_beside

    slots = chosen.slots()
    if rerun:
        return [probe for _, probe in slots]
    identity = current_identity(registry, RUNNER_VERSION, chosen.wave.protocol)
    reuse = reusable_attempts(run_root_beside(store_path), chosen.wave.name, slots, identity)
    return [probe for slot in slots if slot not in reuse for probe in (slot[1],)]


def rerun_reasons(registry: Registry, store_path: Path, chosen: Selected) -> dict[str, int]:
    """Why the slice's stored complete runs will run again rather than be reused: reason -> slots."""
    from adapters.run_attempt import current_identity
    from sabot_assets.waves.attempts import rerun_reasons as reasons_in, run_root_beside

    identity = current_identity(registry, RUNNER_VERSION, chosen.wave.protocol)
    return reasons_in(run_root_beside(store_path), chosen.wave.name, chosen.slots(), identity)


def missing_slots(store_path: Path, chosen: Selected) -> int:
    """How many runs of the slice the store holds no scored run for (never run, or only stopped)."""
    slots = chosen.slots()
    if not Path(store_path).exists():
        return len(slots)
    with connect(store_path, read_only=True) as con:
        held = set(
            con.execute(
                "SELECT operator, probe FROM runs WHERE wave = ? AND status = 'present'", [chosen.wave.name]
            ).fetchall()
        )
    return sum(1 for operator, probe in slots if (operator or "", probe.key) not in held)


def run_wave(
    registry: Registry,
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    wave_name: str,
    frameworks=None,
    progress=iter,
    selection: Slice | None = None,
    rerun: bool = False,
    replay: bool = False,
    spend_ceiling: float | None = None,
) -> WaveRun:
    """Every run of the slice in one schedule (baselines first, then fault runs, across blocks), each
    block's run assets and verdicts materialized as soon as its runs have landed, then the board.

    Cells whose stored run is complete at the same runner version, endpoint, model ids and protocol
    are reused, not run again, unless `rerun`. Cells ending in RUN_ERROR are scored (excluded,
    itemized) and returned in the tally; the caller decides the exit status. Once the spend breaker
    stops launching (project spend reached `spend_ceiling`, or the project cap), no further run is
    launched: the board is made from what was stored, and the rest resumes later. A block with nothing
    stale since its last settling (sabot_assets.settled_blocks) is not materialized again.
    """
    from adapters.pool import start_fork_server
    from judges.stats.kappa import import_backends  # numpy: not imported by a command with nothing to run
    from sabot_assets.waves.schedule import BlockCounter, new_run_id, run_schedule

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
    if rerun or replay or missing_slots(Path(defs.resources["store"].database), chosen):
        start_fork_server(
            chosen.frameworks
        )  # its imports (these frameworks only) overlap the pre-registration, not the first run
    runner.preregister()
    blocks = [
        Block(fw, cfg, task, task, chosen.operators, chosen.seeds)
        for fw in chosen.frameworks
        for cfg in chosen.configs
        for task in chosen.tasks
    ]
    plan = _plan(registry, defs.resources["store"], chosen, runner.tags, rerun or replay, replay)
    schedule_id = new_run_id()
    schedule_tags = dict(runner.tags)
    runner.tags[SCHEDULED_TAG] = schedule_id  # the run assets settle what the schedule made
    block_of = {(b.framework, b.config, b.first_task): b for b in blocks}
    counter = BlockCounter(
        blocks, lambda spec: block_of[(spec.framework, spec.config, spec.task)], plan.specs + plan.foreign
    )

    assets, store_path = defs.assets, Path(defs.resources["store"].database)
    slots_of = {
        b: [s for s in chosen.slots() if block_of[(s[1].framework, s[1].config, s[1].task)] == b] for b in blocks
    }
    prints = (
        {}
        if rerun or replay or not store_path.exists()
        else block_fingerprints(registry, assets, store_path, wave, slots_of, plan.identity)
    )
    fresh = {b for b, print_ in prints.items() if is_settled(instance, wave.name, print_)}
    for block in fresh:  # counted as a settling would count them: every run reused, carved-out cells as such
        runner.tally.reused += len(slots_of[block])
        probes = [probe for operator, probe in slots_of[block] if operator is None]
        runner.tally.carved_out += sum(
            wave.is_carved_out(Cell(op, p)) for p in probes for op in (chosen.operators or wave.operators)
        )

    def settle(landed) -> None:  # a block nothing of which is stale is left as its last settling left it
        for block in progress(_baselines_on_the_way(_as_blocks_land(landed, counter, plan), runner, fresh)):
            runner.fault_runs(block)
            last = runner.verdicts(block)
            mark_block(
                instance,
                last,
                block_fingerprints(registry, assets, store_path, wave, {block: slots_of[block]}, plan.identity)[block],
            )

    # The kappa audit after the last run would wait seconds for its statistics' imports: made meanwhile.
    threading.Thread(target=import_backends, name="import-kappa-backends", daemon=True).start()
    run_schedule(wave.name, plan, instance, schedule_tags, settle, schedule_id)
    runner.kappa()
    board = runner.board()
    tally = runner.tally
    if not (tally.run_errors or tally.waiting or tally.not_launched or tally.stopped):
        with connect(store_path) as con:
            print_ = _fingerprint(registry, defs.assets, store_path, chosen, con)
            if print_ is not None:  # the next command with nothing to do says so at once
                mark_settled(instance, store_path, wave, board.run_id, print_, con)
    return WaveRun(
        wave.name, [(fw, cfg) for fw in chosen.frameworks for cfg in chosen.configs], chosen.skipped, runner.tally
    )


def settled_wave(
    registry: Registry,
    store_path: Path,
    wave_name: str,
    selection: Slice | None = None,
    frameworks=None,
) -> tuple[WaveRun, str] | None:
    """(what a wave run would report, the board run that settled it) when nothing of the slice is
    stale: every slot answered by a reusable stored run, and the code, registry and stored results
    exactly as a successful board run left them (sabot_assets.settled). None: something is stale.

    Only this wave's assets are built for their code versions, not the whole code location's, and
    no Dagster instance is needed (the store records each settling: sabot_assets.settled)."""
    registry.require_registered()
    chosen = select(registry, wave_name, selection, frameworks)
    assets = own_assets(registry, chosen.wave)
    store_path = Path(store_path)
    if not store_path.exists():
        return None
    with connect(store_path, read_only=True) as con:  # one opening for the fingerprint and the lookup
        print_ = _fingerprint(registry, assets, store_path, chosen, con)
        board_run = print_ and settled_by(store_path, chosen.wave, print_, con)
    if not board_run:
        return None
    result = WaveRun(
        chosen.wave.name, [(fw, cfg) for fw in chosen.frameworks for cfg in chosen.configs], chosen.skipped
    )
    result.tally.reused = len(chosen.slots())
    result.tally.carved_out = chosen.carved_out()
    return result, board_run


def _fingerprint(registry: Registry, assets, store_path: Path, chosen: Selected, con=None) -> str | None:
    """The slice's fingerprint (sabot_assets.settled); None when a slot has no reusable stored run.
    `con`: a connection the caller holds on the store."""
    from adapters.run_attempt import current_identity
    from sabot_assets.waves.attempts import reusable_attempts, run_root_beside

    slots = chosen.slots()
    identity = current_identity(registry, RUNNER_VERSION, chosen.wave.protocol)
    reuse = reusable_attempts(run_root_beside(store_path), chosen.wave.name, slots, identity)
    if len(reuse) < len(slots):
        return None
    asked = {
        "frameworks": chosen.frameworks,
        "configs": chosen.configs,
        "tasks": chosen.tasks,
        "operators": chosen.operators,
        "seeds": chosen.seeds,
        "identity": repr(identity),
    }
    return fingerprint(
        registry,
        assets,
        store_path,
        chosen.wave,
        asked,
        {(op, p.key): a.sha256 for (op, p), a in reuse.items()},
        con,
    )


def _as_blocks_land(landed, counter: "BlockCounter", plan: "Plan"):
    from sabot_assets.waves.schedule import wait_for_foreign

    yield from counter.ready_now()  # every run reused: nothing to wait for
    for spec, _directory in landed:
        yield from counter.land(spec)
    for spec in wait_for_foreign(plan):  # cells another command claimed: settled from its runs once it lets go
        yield from counter.land(spec)
    yield from counter.rest()  # blocks whose runs the breaker never launched settle as missing


def _baselines_on_the_way(stages, runner: WaveRunner, fresh: set):
    """Whole blocks, as they land; a block's baselines are settled as soon as they have landed. They run
    first, so this happens while the pool runs fault runs and leaves only fault runs and verdicts
    to settle once a block's last run lands. `fresh` blocks have nothing stale: skipped."""
    from sabot_assets.waves.schedule import BASELINES

    for stage, block in stages:
        if block in fresh:
            continue
        if stage == BASELINES:
            runner.baselines(block)
        else:
            yield block


def _plan(registry: Registry, store, chosen: Selected, tags: dict, rerun: bool, replay: bool) -> "Plan":
    """The schedule's runs: every slot of the slice less those a matching complete run answers, in
    launch order, with the step breaker's ceiling and, for a replay, the recordings that answer them."""
    from adapters.run_attempt import current_identity, provider_circuit
    from sabot_assets.resources import store_connection
    from sabot.store.recordings import read_recording
    from sabot_assets.waves.budget import step_breaker
    from sabot_assets.waves.attempts import reusable_attempts, run_root_beside
    from sabot_assets.waves.schedule import Plan, ordered, recordings_for, spec_of

    store_path = Path(store.database)
    wave, run_root = chosen.wave, run_root_beside(store_path)
    identity = current_identity(registry, RUNNER_VERSION, wave.protocol)
    slots = chosen.slots()
    reuse = {} if rerun else reusable_attempts(run_root, wave.name, slots, identity)
    wanted = ordered([spec_of(wave, slot) for slot in slots if slot not in reuse])
    holder = f"{host_label()}:{os.getpid()}"
    claimed = {
        s
        for s in wanted
        if runroot.claim(
            run_root, wave.name, Probe(s.framework, s.config, s.task, s.seed), s.operator, holder, host_label()
        )
    }
    specs, foreign = [s for s in wanted if s in claimed], [s for s in wanted if s not in claimed]
    with store_connection(store) as con:
        breaker = step_breaker(tags, store_path, con, identity.endpoint, replay, registry)
        replays = (
            recordings_for(
                specs,
                lambda s: read_recording(
                    con, wave.name, s.operator, Probe(s.framework, s.config, s.task, s.seed).key, s.run_id, run_root
                ),
            )
            if replay
            else {}
        )
    circuit = None if replay else provider_circuit(registry)
    return Plan(
        registry,
        run_root,
        store_path.parent / "runs" / wave.name,
        identity,
        specs,
        breaker,
        replays,
        holder,
        foreign,
        circuit,
    )
