"""The `execute` step of a live run asset (sabot_assets.waves.live_runs), in the `llm_agent` pool on
any worker host: runs the plan's runs, each claimed first, and touches the run root only."""

import os
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
from dagster_duckdb import DuckDBResource

from sabot import runroot
from sabot.matrix import Probe
from sabot.registry import Registry
from sabot.budget import Breaker, LedgerBreaker
from sabot_assets.waves.concurrency import host_label, run_in_processes
from sabot_assets.waves.attempts import attempts_made_by, reusable_attempts, run_root_of, sealed_attempt, settle_cost
from sabot_assets.waves.step_plan import StepPlan, StepResults

if (
    TYPE_CHECKING
):  # the run path (adapters: the pool, the gateway) is imported where a step runs, not when definitions load
    from adapters.runner import RunSpec


def spend_ledger_for(store_path: Path):
    """The spend ledger the executing host reserves from: the store's file on one host, the shared
    Postgres (SABOT_SHARED_STATE_URL) on a deployment with worker hosts (sabot.store.ledger)."""
    from sabot.store.ledger import ledger_path, spend_ledger

    return spend_ledger(ledger_path(store_path), host_label())


def _execute_breaker(plan: StepPlan, store_path: Path) -> Breaker:
    if plan.spend is None:
        return Breaker(None)
    terms = plan.spend
    return LedgerBreaker(
        spend_ledger_for(store_path),
        terms["kind"],
        terms["ceiling"],
        terms["margin"],
        terms["expected"],
        terms["pilot"],
    )


class _EndpointGate:
    """may_launch for the endpoint's host-wide breaker: no run launches while the endpoint is open."""

    def __init__(self, circuit):
        self.circuit, self.reason = circuit, None

    def __call__(self, spec) -> bool:
        if self.circuit is None:
            return True
        self.reason = self.reason or self.circuit.opened()
        return self.reason is None


class _Claims:
    """The cells this step runs, each claimed in the run root first. The holder is this process
    (host label and pid), the owner this Dagster run and step: a claim is taken over once its
    process is gone (judged on its own host), its Dagster run has ended (judged from the instance,
    on any host), or it is this very step's (an earlier delivery of it: the broker redelivers a
    step only after its worker went silent for the visibility timeout, deploy/hosts/celery.yaml)."""

    def __init__(self, context, run_root: Path):
        self.instance, self.run_root = context.instance, run_root
        self.holder = f"{host_label()}:{os.getpid()}"
        self.owner = f"{context.run_id}/{context.op_handle}"

    def _over(self, record: dict) -> bool:
        return claim_over(self.instance, record, self.owner)

    def take(self, spec: "RunSpec") -> bool:
        return runroot.claim(
            self.run_root, spec.wave, _probe_of(spec), spec.operator, self.holder, host_label(), self.owner, self._over
        )

    def release(self, spec: "RunSpec") -> None:
        runroot.release_claim(self.run_root, spec.wave, _probe_of(spec), spec.operator, self.holder)

    def live_elsewhere(self, spec: "RunSpec") -> bool:
        record = runroot.claim_record(self.run_root, spec.wave, _probe_of(spec), spec.operator)
        return (
            record is not None
            and record["holder"] != self.holder
            and not self._over(record)
            and runroot.live_claim(self.run_root, spec.wave, _probe_of(spec), spec.operator, host_label()) is not None
        )


def claim_over(instance: dg.DagsterInstance, record: dict, owner: str) -> bool:
    """Whether a claim may be taken over by `owner` (a Dagster run and step): it is that step's own
    (an earlier delivery), or its Dagster run has ended, so no process of it runs the cell any more."""
    if record.get("owner") == owner:
        return True
    run_id = str(record.get("owner") or "").partition("/")[0]
    run = instance.get_run_by_id(run_id) if run_id else None
    return run is not None and run.is_finished


def _probe_of(spec: "RunSpec") -> Probe:
    return Probe(spec.framework, spec.config, spec.task, spec.seed)


def execute(context, store: DuckDBResource, registry: Registry, plan: StepPlan) -> StepResults:
    """Run the plan's runs, each claimed first, up to the pool's bound; touches the run root only."""
    from adapters.pool import crashed_attempt
    from adapters.run_attempt import provider_circuit, run_attempt

    run_root, store_path = run_root_of(store), Path(store.database)  # paths only: the store is never opened here
    results = StepResults()
    run = context.instance.get_run_by_id(context.run_id)
    if run is not None and run.is_finished:  # a step redelivered after its run ended: nothing of it may run now
        results.skipped = f"the Dagster run {context.run_id} has ended ({run.status.value})"
        results.unlaunched = len(plan.to_run)
        return results
    claims = _Claims(context, run_root)
    key_of = {spec: key for key, spec in plan.to_run.items()}
    mine = []
    for key, spec in plan.to_run.items():
        if not claims.take(spec):
            results.foreign.append(key)  # another command runs it now: settled from its run
            continue
        slot = (spec.operator, _probe_of(spec))
        done = attempts_made_by(
            run_root, plan.wave, [slot], context.run_id
        )  # a redelivered step: what its first delivery made
        again = (
            {} if plan.rerun else reusable_attempts(run_root, plan.wave, [slot], plan.identity)
        )  # landed since prepare
        if slot in done:
            results.ran.append((key, done[slot], None))
        elif slot in again:
            results.reused.append((key, again[slot].directory))
        if slot in done or slot in again:
            claims.release(spec)
        else:
            mine.append(spec)
    attempt = partial(
        run_attempt,
        registry=registry,
        run_root=run_root,
        work_root=store_path.parent / "runs" / plan.wave,
        identity=plan.identity,
        dagster_run_id=context.run_id,
        replays=plan.replays,
    )
    crashed = partial(crashed_attempt, run_root=run_root, identity=plan.identity, dagster_run_id=context.run_id)
    breaker = _execute_breaker(plan, store_path)
    circuit = None if plan.replaying else provider_circuit(registry)
    closed = _EndpointGate(circuit)

    def may_launch(spec) -> bool:  # the endpoint first: an open one reserves no spend
        return closed(spec) and breaker.may_launch(spec)

    left = set(mine)
    try:
        for spec, directory, seconds in run_in_processes(context, attempt, mine, crashed, may_launch=may_launch):
            left.discard(spec)
            claims.release(spec)
            finished = sealed_attempt(run_root, directory)
            if finished is not None:
                settle_cost(breaker, finished, spec)
            results.ran.append((key_of[spec], directory, seconds))
    finally:
        breaker.close()
        for spec in left:  # never launched: free for a later wave run
            claims.release(spec)
    results.unlaunched = len(left)
    stopped_some = bool(left) or any(_stopped(run_root, d) for _, d, _ in results.ran)
    results.opened = closed.reason or (circuit.opened() if circuit is not None and stopped_some else None)
    results.spent, results.cap = breaker.spent, breaker.cap
    return results


def _stopped(run_root: Path, directory) -> bool:
    attempt = sealed_attempt(run_root, Path(directory))
    return attempt is not None and attempt.outcome == "stopped"
