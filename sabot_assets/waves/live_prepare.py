"""The `prepare` step of a live run asset (sabot_assets.waves.live_runs), on the store queue: reads
the store and the run root, decides which cells run, and the spend breaker's terms."""

from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
from dagster_duckdb import DuckDBResource

from sabot.matrix import Cell, Probe
from sabot.pricing import PriceTable
from sabot.registry import Registry, WaveDef
from sabot.store.db import StoreLocked
from sabot.store.recordings import read_recording
from sabot_assets.constants import REPLAY_TAG, RERUN_TAG, RUNNER_VERSION, SCHEDULED_TAG
from sabot_assets.resources import store_connection
from sabot.budget import LedgerBreaker
from sabot_assets.waves.budget import spend_is_capped, step_breaker
from sabot_assets.waves.attempts import (
    attempts_made_by,
    finish_killed_attempts,
    ingest_pending,
    reusable_attempts,
    run_root_of,
)
from sabot_assets.waves.step_plan import StepPlan

if (
    TYPE_CHECKING
):  # the run path (adapters: the pool, the gateway) is imported where a step runs, not when definitions load
    from adapters.runner import Recording, RunSpec


def _slot(target):
    return (target.operator, target.probe) if isinstance(target, Cell) else (None, target)


def _target(asset: str, key: str):
    return Probe.parse(key) if asset == "baseline_runs" else Cell.parse(key)


def prepare(context, store: DuckDBResource, registry: Registry, wave: WaveDef, asset: str, keys: list[str]) -> StepPlan:
    """Read what the store and the run root say about these cells; decide what runs. Launches nothing."""
    from adapters.run_attempt import current_identity
    from adapters.runner import RunSpec

    run_root = run_root_of(store)
    targets = [_target(asset, k) for k in keys]
    identity = current_identity(registry, RUNNER_VERSION, wave.protocol)
    rerun = context.run.tags.get(RERUN_TAG) == "true"
    replaying = context.run.tags.get(REPLAY_TAG) == "true"  # answered from the stored exchanges, nothing sent
    runnable = [t for t in targets if not (isinstance(t, Cell) and wave.is_carved_out(t))]
    plan = StepPlan(wave.name, asset, identity, keys, rerun=rerun, replaying=replaying)
    scheduled_by = context.run.tags.get(SCHEDULED_TAG)  # the wave's schedule ran these: settle, launch nothing
    made = attempts_made_by(run_root, wave.name, [_slot(t) for t in runnable], scheduled_by) if scheduled_by else {}
    stopped = finish_killed_attempts(
        run_root, wave.name, [_slot(t) for t in runnable], PriceTable.from_registry(registry)
    )
    if stopped:
        context.log.info(f"{asset}: {stopped} attempt(s) killed in flight finished as stopped from their journals")
    try:
        with store_connection(
            store
        ) as con:  # finished runs a lock or a crash left behind; settle ingests what the schedule made
            swept = ingest_pending(
                con,
                run_root,
                wave.name,
                [_slot(t) for t in runnable],
                context.run_id,
                plan.refused,
                skip=set(made.values()),
            )
        if swept:
            context.log.info(f"{asset}: ingested {swept} finished attempt(s) from the run root ({run_root})")
    except StoreLocked as exc:
        plan.locked = str(exc)
        context.log.warning(f"{asset}: {exc}")
    reuse = (
        {} if rerun else reusable_attempts(run_root, wave.name, [_slot(t) for t in runnable], identity, plan.refused)
    )
    for reason in sorted(set(plan.refused.values())):  # shown as found; the step fails naming them at the end
        context.log.error(f"{asset}: refused {reason}")
    for target in targets:
        slot = _slot(target)
        if target not in runnable:
            plan.carved.append(target.key)
        elif slot in made:
            plan.made[target.key] = made[slot]
        elif slot in reuse:
            plan.reused[target.key] = reuse[slot].directory
        elif scheduled_by:
            plan.unscheduled += 1
        else:
            operator, probe = slot
            spec = RunSpec(wave.name, wave.protocol, probe.framework, probe.config, probe.task, operator, probe.seed)
            plan.to_run[target.key] = spec
            if replaying:
                plan.replays[spec] = _recording(store, wave, spec, probe)
    if plan.to_run:
        plan.spend = spend_terms(context, store, registry, identity, replaying)
    return plan


def spend_terms(context, store: DuckDBResource, registry: Registry, identity, replaying: bool) -> dict | None:
    """The spend breaker's terms, read from the store here so the executing host never opens it;
    None where spend does not bound the launches."""
    if not spend_is_capped(
        context.run.tags, identity.endpoint, replaying
    ):  # nothing to read: a lock cannot stop the runs
        return None
    try:
        with store_connection(store) as con:
            breaker = step_breaker(context.run.tags, Path(store.database), con, identity.endpoint, replaying, registry)
    except StoreLocked as exc:
        # No spend figure, no launch: a paid run is never made blind to the cap.
        raise dg.Failure(
            description=f"cannot read the spend so far to enforce the cap: {exc}", allow_retries=False
        ) from exc
    breaker.close()
    if not isinstance(breaker, LedgerBreaker):
        return None
    return {
        "kind": breaker.kind,
        "ceiling": breaker.cap,
        "margin": breaker.margin,
        "expected": breaker.expected,
        "pilot": breaker.pilot,
    }


def _recording(store: DuckDBResource, wave: WaveDef, spec: "RunSpec", probe: Probe) -> "Recording":
    from adapters.runner import Recording

    with store_connection(store) as con:
        stored = read_recording(con, wave.name, spec.operator, probe.key, spec.run_id, run_root_of(store))
    return Recording(stored.exchanges, stored.endpoint_label, stored.intent, stored.source)
