"""One schedule per wave: every run of the selection in one bounded pool, verdicts as runs land.

Run block by block, a wave leaves slots idle at every block edge (a block's last runs, then its
verdicts, then the next block's first runs). Here the whole selection is one ordered list,
baselines first, then fault runs, across blocks, executed in one Dagster run (the wave's
schedule, visible in the UI) whose step claims `llm_agent` pool slots as a run-asset step
does (one slot per run in flight), so the CLI, UI backfills and the daemon still share one bound. A fault run waits only for
its own cell's baseline to land.

The schedule executes: it writes sealed attempts to the run root and touches no store. The run
assets settle, from the attempts the schedule made (tag `sabot/scheduled_by`, nothing launched by
those steps), while the pool goes on running: a block's baseline partitions as soon as its
baselines have landed (early: they run first), its fault-run partitions and then its verdicts as
soon as every run of it has landed. So when the last run lands, only the last blocks' fault runs
and verdicts are left to settle.
"""

import queue
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import dagster as dg

from adapters.pool import crashed_attempt
from adapters.run_attempt import run_attempt
from adapters.runner import Recording, RunSpec
from sabot import runroot
from sabot.matrix import Probe
from sabot.registry import Registry
from sabot_assets.constants import LLM_POOL
from sabot_assets.materialize import quiet
from sabot_assets.waves.concurrency import run_in_processes
from sabot_assets.waves.attempts import settle_cost

SLOT_WAIT_SECONDS = 0.5  # poll for a pool slot when every one is held elsewhere
DONE = object()  # the pool's last message: nothing more will land


def spec_of(wave, slot: tuple[str | None, Probe]) -> RunSpec:
    operator, probe = slot
    return RunSpec(wave.name, wave.protocol, probe.framework, probe.config, probe.task, operator, probe.seed)


def ordered(specs: list[RunSpec]) -> list[RunSpec]:
    """Baselines first, then fault runs; each group in the selection's order (block by block)."""
    return [s for s in specs if s.operator is None] + [s for s in specs if s.operator is not None]


@dataclass
class Plan:
    """What the schedule runs and with what: built in the caller, handed to the schedule's step."""

    registry: Registry
    run_root: Path
    work_root: Path
    identity: object
    specs: list[RunSpec]  # in launch order
    breaker: object  # sabot.budget.Breaker (may_launch / add)
    replays: dict = field(default_factory=dict)  # spec -> Recording, for a replay
    holder: str = ""  # "host:pid" of this command: the claims on its specs' slots
    foreign: list = field(default_factory=list)  # specs another live command has claimed: waited for, never run here
    circuit: object = (
        None  # the provider endpoint's host-wide breaker (adapters.gateway); None for the scripted model or a replay
    )

    def release(self, spec: RunSpec) -> None:
        runroot.release_claim(
            self.run_root,
            spec.wave,
            Probe(spec.framework, spec.config, spec.task, spec.seed),
            spec.operator,
            self.holder,
        )

    def foreign_pending(self) -> list[RunSpec]:
        host = self.holder.rpartition(":")[0]
        return [
            s
            for s in self.foreign
            if runroot.live_claim(self.run_root, s.wave, Probe(s.framework, s.config, s.task, s.seed), s.operator, host)
        ]

    def baseline_of(self, spec: RunSpec) -> RunSpec:
        return RunSpec(spec.wave, spec.protocol, spec.framework, spec.config, spec.task, None, spec.seed)


class Gate:
    """May a run launch now: not once the wave or its endpoint stopped, a fault run only once its own baseline has
    landed (or needs no run), then the spend breaker, which reserves the run's cost when it says yes."""

    def __init__(self, plan: Plan, slot_wanted=lambda: False):
        self.plan = plan
        self.baselines_pending = {s for s in plan.specs if s.operator is None}
        self.stopped = threading.Event()
        self.breaker_refused = False
        self.slot_wanted = slot_wanted

    def may_launch(self, spec: RunSpec) -> bool:
        if self.stopped.is_set():
            return False
        if (
            self.plan.circuit is not None and self.plan.circuit.opened()
        ):  # the endpoint stopped the wave: launch nothing more
            self.stopped.set()
            return False
        if spec.operator is not None and self.plan.baseline_of(spec) in self.baselines_pending:
            return False
        if self.slot_wanted():  # this launch's slot goes back to the pool, to the step waiting for it
            return False
        if not self.plan.breaker.may_launch(spec):
            # Held by runs in flight (another command's too): wait for them to settle; else stop.
            self.breaker_refused = self.breaker_refused or not self.plan.breaker.may_fit_later(spec)
            return False
        return True

    def may_wait_for_slots(self) -> bool:
        """Launching stopped with nothing in flight: for want of a pool slot (another command, a
        settling step holds them) unless the wave stopped or the breaker refused."""
        return not self.stopped.is_set() and not self.breaker_refused

    def landed(self, spec: RunSpec) -> None:
        self.baselines_pending.discard(spec)


def slot_wanted_by_others(context):
    """Whether a step of another Dagster run waits for an `llm_agent` slot: the schedule hands its slot from
    run to run, so without this a waiting step (another command's, a UI backfill's) would get one only once
    the schedule stops launching. Asked before each launch; the step waiting gets the
    slot of the run that just finished, and the schedule takes it back at a later launch once it is free."""
    storage = context.instance.event_log_storage

    def wanted() -> bool:
        pending = storage.get_concurrency_info(LLM_POOL).pending_steps
        return any(step.assigned_timestamp is None and step.run_id != context.run_id for step in pending)

    return wanted


def _run_pool(context, plan: Plan, gate: Gate, landed: queue.Queue) -> None:
    """Every spec of the plan through one bounded pool; each attempt reported as it lands."""
    attempt = partial(
        run_attempt,
        registry=plan.registry,
        run_root=plan.run_root,
        work_root=plan.work_root,
        identity=plan.identity,
        dagster_run_id=context.run_id,
        replays=plan.replays,
    )
    crashed = partial(crashed_attempt, run_root=plan.run_root, identity=plan.identity, dagster_run_id=context.run_id)
    left = list(plan.specs)
    try:
        while left:
            for spec, directory, _seconds in run_in_processes(
                context, attempt, left, crashed, may_launch=gate.may_launch, holds_own_slot=False
            ):
                left.remove(spec)
                plan.release(spec)
                gate.landed(spec)
                settle_cost(plan.breaker, runroot.read_attempt(plan.run_root, directory), spec)
                landed.put((spec, directory))
            if left and not gate.may_wait_for_slots():
                break
            time.sleep(SLOT_WAIT_SECONDS if left else 0)
    except BaseException as exc:  # handed to the step's thread, which raises it
        landed.put(exc)
    finally:
        plan.breaker.close()
        for spec in left:  # never launched: free for a later command
            plan.release(spec)
        landed.put(DONE)


def _landed(landed: queue.Queue, counts: Counter):
    while True:
        item = landed.get()
        if item is DONE:
            return
        if isinstance(item, BaseException):
            raise item
        counts["launched"] += 1
        yield item


def execute(context, plan: Plan, drive) -> int:
    """The schedule's step. The pool runs in a thread of this step; `drive(landed)` (the caller's
    settling, Dagster runs of their own) consumes the attempts in this thread as they land. If it
    raises, nothing more is launched and the runs in flight finish before the step fails."""
    gate, landed, counts = Gate(plan, slot_wanted_by_others(context)), queue.Queue(), Counter()
    pool = threading.Thread(
        target=_run_pool, args=(context, plan, gate, landed), name="wave-schedule-pool", daemon=True
    )
    pool.start()
    try:
        drive(_landed(landed, counts))
    except BaseException:
        gate.stopped.set()
        raise
    finally:
        pool.join()
    context.log.info(f"schedule: {counts['launched']} of {len(plan.specs)} run(s) launched")
    return counts["launched"]


def schedule_job(wave_name: str, plan: Plan, drive, raised: list) -> dg.JobDefinition:
    # Outside the pool: the step claims a slot per run in flight, so another command's step (a UI
    # backfill) can take one between runs, even at a limit of 1. The block steps it settles meanwhile
    # launch nothing, so their execute step is skipped and claims no slot (live_runs).
    @dg.op(name="run_schedule", description="Every run of the wave's selection in one bounded pool.")
    def run_schedule(context: dg.OpExecutionContext):
        try:
            execute(context, plan, drive)
        except BaseException as exc:
            raised.append(exc)  # the caller re-raises the error itself, not Dagster's wrapper
            raise

    @dg.job(name=f"{wave_name}__schedule", description="One schedule per wave: the runs a `sabot wave run` launches.")
    def job():
        run_schedule()

    return job


def run_schedule(wave_name: str, plan: Plan, instance: dg.DagsterInstance, tags: dict, drive, run_id: str) -> None:
    """Execute the plan as one Dagster run (`<wave>__schedule`, holding `llm_agent` slots), calling
    `drive` with the attempts as they land; with nothing to run, `drive` sees none."""
    if not plan.specs:
        drive(iter(()))
        return
    if not plan.holder:
        raise ValueError("a schedule needs its claims' holder")
    raised: list = []
    result = schedule_job(wave_name, plan, drive, raised).execute_in_process(
        run_config=quiet(), instance=instance, tags=tags, run_id=run_id, raise_on_error=False
    )
    if raised:
        raise raised[0]
    if not result.success:
        failure = next((e for e in result.all_events if e.is_failure), None)
        raise RuntimeError(
            f"the wave's schedule (run {run_id}) failed: {failure.message if failure else 'see the Dagster run log'}"
        )


def wait_for_foreign(plan: Plan, poll_seconds: float = 1.0):
    """The specs other commands claimed, each as its claim is released (run, or given up)."""
    waiting = list(plan.foreign)
    while waiting:
        pending = set(plan.foreign_pending())
        done = [s for s in waiting if s not in pending]
        waiting = [s for s in waiting if s in pending]
        yield from done
        if waiting:
            time.sleep(poll_seconds)


def new_run_id() -> str:
    return str(uuid.uuid4())  # what Dagster makes its run ids from


BASELINES, WHOLE = "baselines", "whole"  # what of a block has landed: its baselines, or every run of it


class BlockCounter:
    """Which blocks have landed: first a block's baselines (they run first, across blocks, so they land
    long before its fault runs), then the whole block. Each stage of a block is handed out once, its
    baselines always before the whole block."""

    def __init__(self, blocks: list, block_of, specs: list[RunSpec]):
        self.blocks = blocks
        self.left = {
            WHOLE: Counter(block_of(s) for s in specs),
            BASELINES: Counter(block_of(s) for s in specs if s.operator is None),
        }
        self.block_of = block_of
        self.settled: dict[str, set] = {WHOLE: set(), BASELINES: set()}

    def ready_now(self) -> list[tuple[str, object]]:
        return self._take(BASELINES, [b for b in self.blocks if self.left[BASELINES][b] == 0]) + self._take(
            WHOLE, [b for b in self.blocks if self.left[WHOLE][b] == 0]
        )

    def land(self, spec: RunSpec) -> list[tuple[str, object]]:
        block = self.block_of(spec)
        stages = [WHOLE] + ([BASELINES] if spec.operator is None else [])
        for stage in stages:
            self.left[stage][block] -= 1
        return self._take(BASELINES, [block] if self.left[BASELINES][block] == 0 else []) + self._take(
            WHOLE, [block] if self.left[WHOLE][block] == 0 else []
        )

    def rest(self) -> list[tuple[str, object]]:
        return self._take(BASELINES, list(self.blocks)) + self._take(WHOLE, list(self.blocks))

    def _take(self, stage: str, blocks: list) -> list[tuple[str, object]]:
        # A block's baselines are a part of it, so they are whole first, and every caller takes them first.
        out = [b for b in blocks if b not in self.settled[stage]]
        self.settled[stage].update(out)
        return [(stage, b) for b in out]


def recordings_for(specs: list[RunSpec], read) -> dict:
    """spec -> Recording for a replay, read in the caller (the schedule never opens the store)."""
    out = {}
    for spec in specs:
        stored = read(spec)
        out[spec] = Recording(stored.exchanges, stored.endpoint_label, stored.intent, stored.source)
    return out


__all__ = [
    "BASELINES",
    "WHOLE",
    "BlockCounter",
    "Plan",
    "new_run_id",
    "wait_for_foreign",
    "ordered",
    "recordings_for",
    "run_schedule",
    "spec_of",
]
