"""How many live runs are in flight: the `llm_agent` pool, for the CLI and for backfills alike.

The pool's limit (dagster.yaml `concurrency.pools.default_limit`, the UI's pool page, or
`sabot wave run --concurrency N`) bounds the pipeline runs in flight across every Dagster run on
the instance, not only the steps: a run-asset step holds one pool slot for its first pipeline
run and claims one more slot per further run it keeps in flight, freed as each finishes. With a
Postgres instance the slots are shared by every host that runs against it.
"""

import os

import dagster as dg

from sabot.runroot import holder_gone

# One host label for launcher tags, claims and ledger holders alike (SABOT_HOST_LABEL, else the host name).
from sabot.shared_state import host_label
from sabot_assets.constants import CONCURRENCY_TAG, LAUNCHER_TAG, LLM_POOL


def launcher_tag() -> dict[str, str]:
    """The tag an in-process run carries so a later wave can tell whether its process still lives."""
    return {LAUNCHER_TAG: f"{host_label()}:{os.getpid()}"}


def _process_gone(launcher: str | None) -> bool:
    # another host's, or not launched in-process: its own monitoring answers for it
    return holder_gone(launcher or "", host_label())


def free_slots_of_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Free the pool slots held by runs that can no longer release them, and return their ids.

    A wave killed with -9 leaves its Dagster run STARTED and its `llm_agent` slots claimed; the next
    wave's step would then wait for a slot forever. A run that already ended holds its slots by
    mistake; an in-process run (the CLI's) whose launching process is gone on this host is marked
    failed first. Runs launched by the daemon are left to its run monitoring.
    """
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return []
    freed = []
    for run_id in sorted(storage.get_concurrency_run_ids()):
        run = instance.get_run_by_id(run_id)
        if run is not None and not run.is_finished:
            if not _process_gone(run.tags.get(LAUNCHER_TAG)):
                continue
            instance.report_run_failed(
                run, f"the process that executed this run ({run.tags[LAUNCHER_TAG]}) is gone; its pool slots were freed"
            )
        storage.free_concurrency_slots_for_run(run_id)
        freed.append(run_id)
    return freed


def pool_limit(instance: dg.DagsterInstance) -> int | None:
    """The pool's slot count on this instance, None where the instance sets no limit."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return None
    if LLM_POOL not in storage.get_concurrency_keys():
        storage.initialize_concurrency_limit_to_default(LLM_POOL)
    if LLM_POOL not in storage.get_concurrency_keys():
        return None
    return storage.get_concurrency_info(LLM_POOL).slot_count


def set_pool_limit(instance: dg.DagsterInstance, limit: int) -> None:
    """What the UI's pool page does: the limit holds for every later run on the instance."""
    if limit < 1:
        raise ValueError(f"concurrency must be at least 1, got {limit}")
    instance.event_log_storage.set_concurrency_slots(LLM_POOL, limit)


def width_of(context) -> int:
    """Worker processes for this step: the run's `sabot/concurrency` tag, else the pool limit."""
    tagged = context.run.tags.get(CONCURRENCY_TAG)
    if tagged:
        return max(1, int(tagged))
    from adapters.pool import DEFAULT_CONCURRENCY  # the run path: imported where runs run, not when definitions load

    return pool_limit(context.instance) or DEFAULT_CONCURRENCY


class PoolSlots:
    """Pool slots for the pipeline runs of one step. The step's own slot covers one run; every
    further run in flight claims a slot of its own, or is not launched yet.

    With `hand_over`, a finished run's slot passes straight to the step's next run instead of being
    freed and claimed again: freed, Dagster assigns it to the oldest step waiting on the pool, which
    notices only at its next poll (backing off to 15 s), and the slot idles meanwhile. A slot goes
    back to the pool once the step has nothing left to launch."""

    def __init__(self, context, holds_own: bool = True, hand_over: bool = False):
        self.storage = context.instance.event_log_storage
        self.run_id, self.step = context.run_id, str(context.op_handle)
        self.bounded = pool_limit(context.instance) is not None
        self.own_free = holds_own  # a step outside the pool (the wave's schedule) claims a slot for every run
        self.owner_of_own: str | None = None
        self.claimed: dict[str, str] = {}  # item -> its slot's key
        self.hand_over, self.idle, self.made = hand_over, [], 0

    def _new_key(self, item: str) -> str:
        self.made += 1
        return f"{self.step}[slot-{self.made}]" if self.hand_over else f"{self.step}[{item}]"

    def acquire(self, item: str) -> bool:
        if self.own_free:
            self.own_free, self.owner_of_own = False, item
            return True
        if not self.bounded:
            return True
        if self.idle:
            self.claimed[item] = self.idle.pop()
            return True
        key = self._new_key(item)
        status = self.storage.claim_concurrency_slot(LLM_POOL, self.run_id, key)
        if status.is_claimed:
            self.claimed[item] = key
            return True
        self.storage.free_concurrency_slot_for_step(self.run_id, key)  # leave no pending claim behind
        return False

    def release(self, item: str, keep: bool = False) -> None:
        """The run of `item` finished; with `keep` (and hand-over), its slot waits for the next run."""
        if item == self.owner_of_own:
            self.own_free, self.owner_of_own = True, None
        elif item in self.claimed:
            key = self.claimed.pop(item)
            if keep and self.hand_over:
                self.idle.append(key)
            else:
                self.storage.free_concurrency_slot_for_step(self.run_id, key)

    def free_idle(self) -> None:
        while self.idle:
            self.storage.free_concurrency_slot_for_step(self.run_id, self.idle.pop())

    def close(self) -> None:
        for item in list(self.claimed):
            self.release(item)
        self.free_idle()


def run_in_processes(context, fn, specs: list, on_crash, may_launch=lambda spec: True, holds_own_slot: bool = True):
    """(spec, result, seconds) as each run finishes: `fn(spec)` in a process of its own, up to the
    step's width at once, each launch holding a pool slot (and passing `may_launch`, the breaker).
    A step outside the pool (`holds_own_slot=False`, the wave's schedule) hands slots over."""
    from adapters.pool import run_many  # the run path: imported where runs run, not when definitions load

    slots = PoolSlots(context, holds_own_slot, hand_over=not holds_own_slot)
    launched = 0

    def launch(spec) -> bool:
        nonlocal launched
        if not slots.acquire(spec.run_id):
            return False
        if not may_launch(spec):  # asked last: the breaker reserves the run's expected cost when it says yes
            slots.release(spec.run_id)
            slots.free_idle()  # launching stops here for now: what it holds goes back to the pool
            return False
        launched += 1
        return True

    try:
        for spec, result, seconds in run_many(fn, specs, width_of(context), launch, on_crash):
            slots.release(spec.run_id, keep=launched < len(specs))
            if launched >= len(specs):
                slots.free_idle()
            yield spec, result, seconds
    finally:
        slots.close()
