"""Run assets of a live wave: every partition is a real pipeline run against the model endpoint.

Model calls go through the `llm_agent` pool; a backfill runs partitions in chunks so a wave does
not pay a process start per cell. Per cell:

- **Resume.** A slot whose run root holds a complete attempt at the same runner version,
  endpoint, model ids and protocol is reused, not run again, unless the run carries the tag
  `sabot/rerun=true` (`sabot wave run --rerun`).
- **No lost work.** A run writes its record to the run root first (`adapters.run_attempt`), then
  it is ingested into the store as a new attempt; a failed attempt never replaces a good one.
  A store lock delays the ingest, never loses the run: the next wave run ingests it.
- **Failures show.** Each cell reports its own materialization as it finishes, with its own
  metadata. A RUN_ERROR cell reports none, and the step fails at the end naming those cells, so
  Dagster marks exactly them failed ("backfill failed and missing" picks them).
- **Concurrency.** Runs go in processes of their own, up to the `llm_agent` pool's limit in
  flight across every Dagster run (`sabot_assets.waves.concurrency`).
- **Execute apart from settle.** Each run asset is a graph of three steps: `prepare` reads the store
  (sweep, reuse, recordings for a replay, the spend so far) and writes the step's plan to the run
  root; `execute` (in the `llm_agent` pool) only runs runs and writes sealed attempts to the run
  root, so it can run on a worker host that never opens the store (sabot_assets/hosts.py); `settle`
  ingests them and reports each cell. `prepare` and `settle` go to the store queue. With no run to
  make (the wave's schedule made them, or every cell is reused) `execute` is skipped, so a settling
  Dagster run never holds an `llm_agent` slot while the schedule could use it. Plans and results
  pass as files in the run root keyed by the Dagster run id (a path every host mounts), not through
  an IO manager. A cell is claimed before it runs (`sabot.runroot` claims, holder "label:pid", owner
  the Dagster run and step), so a UI backfill, a CLI wave or a redelivered step never run it twice.
- **Carved-out cells** (pre-registered, never run) materialize as such, so they never look like
  missing work.
"""

import contextlib
import os
import pickle
import re
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
from dagster_duckdb import DuckDBResource

from sabot import runroot
from sabot.exchange_journal import finish_killed
from sabot.matrix import Cell, Probe
from sabot.pricing import PriceTable
from sabot.registry import Registry, WaveDef
from sabot.seal import SealError
from sabot.store.db import StoreLocked, append_manifest
from sabot.trace import TraceError
from sabot.store.recordings import read_recording
from sabot.store.runs import ingest_attempt
from sabot.store.spend import record_key
from sabot_assets.constants import COST_TAG, LLM_POOL, LIVE_CHUNK, NOT_LAUNCHED_KEY, REPLAY_TAG, RERUN_TAG, RUN_ERRORS_KEY, RUNNER_VERSION, SCHEDULED_TAG, STOPPED_KEY, UNINGESTED_KEY
from sabot_assets.partitions import cell_partitions, probe_partitions
from sabot_assets.resources import store_connection
from sabot.budget import Breaker, LedgerBreaker, usd
from sabot_assets.waves.budget import spend_is_capped, step_breaker
from sabot_assets.guard import GUARDED, require_registered
from sabot_assets.hosts import store_step_tags, worker_step_tags
from sabot_assets.waves.concurrency import host_label, run_in_processes
from sabot_assets.waves.cell_metadata import RUN_ERROR_KEY, attempt_metadata, carved_out_metadata, log_line, run_error_observation
from sabot_assets.waves.sealed_reads import read_verified

if TYPE_CHECKING:  # the run path (adapters: the pool, the gateway) is imported where a step runs, not when definitions load
    from adapters.runner import Recording, RunSpec


def run_root_of(store: DuckDBResource) -> Path:
    return run_root_beside(store.database)


def run_root_beside(store_path) -> Path:
    return Path(store_path).parent / "runroot"


def sealed_attempt(run_root: Path, directory: Path, refused: dict | None = None):
    """The attempt in `directory` if it is sealed and unmodified; else None, with the one-line
    reason recorded in `refused` (directory -> reason). A refused attempt is never ingested,
    reused or replayed."""
    try:
        return read_verified(run_root, directory)  # once per command where the command asked (sealed_reads)
    except (SealError, TraceError) as exc:
        if refused is not None:
            refused[str(directory)] = str(exc)
        return None


def ingest_pending(con, run_root: Path, wave: str, slots, dagster_run_id: str, refused: dict | None = None, skip=frozenset(),
                   prices: PriceTable | None = None) -> int:
    """Ingest every finished, sealed attempt of these slots that the store does not hold yet (but those in
    `skip`: attempts the step ingests itself). With `prices`, attempts whose process was killed are first
    finished as `stopped` from their exchange journal, so the calls they were answered are stored and counted."""
    done = 0
    for operator, probe in slots:
        if prices is not None:
            finish_killed(run_root, wave, probe, operator, prices)
        for directory in runroot.finished_attempts(run_root, wave, probe, operator):
            if directory in skip:
                continue
            attempt = sealed_attempt(run_root, directory, refused)
            done += ingest_attempt(con, attempt, dagster_run_id) if attempt else 0
    return done


def reusable_attempts(run_root: Path, wave: str, slots, identity, refused: dict | None = None) -> dict:
    """slot -> its stored run (latest complete sealed attempt) where that run was made with `identity`.
    Read from the run root, so a held store lock cannot force a paid run to be repeated."""
    from adapters.run_attempt import is_replay
    out = {}
    for operator, probe in slots:
        for directory in reversed(runroot.finished_attempts(run_root, wave, probe, operator)):
            attempt = sealed_attempt(run_root, directory, refused)
            if attempt is None:
                continue
            if attempt.outcome == "complete":
                if is_replay(attempt.identity) and not is_replay(identity):
                    continue  # a replay never answers for live work; the live run it replayed still may
                if attempt.identity == identity:
                    out[(operator, probe)] = attempt
                break
    return out


def rerun_reasons(run_root: Path, wave: str, slots, identity) -> dict[str, int]:
    """Why stored runs will not be reused: reason -> how many slots, for each slot whose latest
    complete attempt was made with another identity (e.g. "pass criterion my_checks.py changed")."""
    from adapters.run_attempt import is_replay
    reasons: dict[str, int] = {}
    for operator, probe in slots:
        for directory in reversed(runroot.finished_attempts(run_root, wave, probe, operator)):
            attempt = sealed_attempt(run_root, directory)
            if attempt is not None and attempt.outcome == "complete":
                if is_replay(attempt.identity) and not is_replay(identity):
                    continue  # as reuse reads them (reusable_attempts)
                if attempt.identity != identity:
                    reason = identity.change_from(attempt.identity)
                    reasons[reason] = reasons.get(reason, 0) + 1
                break
    return reasons


def attempts_made_by(run_root: Path, wave: str, slots, dagster_run_id: str) -> dict:
    """slot -> the latest finished attempt a given Dagster run (the wave's schedule) made there."""
    out = {}
    for operator, probe in slots:
        for directory in reversed(runroot.finished_attempts(run_root, wave, probe, operator)):
            attempt = sealed_attempt(run_root, directory)  # a refused one is named where it is ingested
            if attempt is not None and attempt.dagster_run_id == dagster_run_id:
                out[(operator, probe)] = directory
                break
    return out


def settle_cost(breaker, attempt, spec) -> None:
    """A launched run's reservation gives way to what its record cost, keyed as the store keys it."""
    cost = ((attempt.record.extra or {}).get("usage") or {}).get("cost_usd")
    breaker.add(cost, spec, record_key(attempt.wave, attempt.operator, attempt.probe.key, attempt.record))


CHUNK_ENV = "SABOT_LIVE_CHUNK"
STEPS_DIR = ".steps"  # under the run root: each step's plan and results, by Dagster run id
FOREIGN_POLL_SECONDS = 1.0


class Settle:
    """What happens to each finished (or reused) attempt on the settling step: ingest it into the
    store, log its line, report its partition.

    One store connection serves the whole step, opened at its first ingest: opening, preparing and
    closing (a checkpoint) the store per cell cost ~170 ms of the coordinator's time a cell (measured
    with py-spy), more than the ingest itself. A lock met here leaves the step's remaining attempts
    waiting in the run root at once, instead of each waiting out the lock again."""

    def __init__(self, context, store: DuckDBResource, asset: str, run_root: Path, asset_key: dg.AssetKey):
        self.context, self.store, self.asset, self.run_root, self.asset_key = context, store, asset, run_root, asset_key
        self.errors, self.waiting, self.locked, self.refused, self.stopped = {}, [], None, {}, {}
        self.tally = {"reused": 0, "ran": 0, "carved out": 0}
        self._connection, self._locked_here, self._open = None, None, contextlib.ExitStack()

    def connection(self):
        """The step's store connection; StoreLocked if the store is (or was, in this step) locked."""
        if self._locked_here is not None:
            raise self._locked_here
        if self._connection is None:
            try:
                self._connection = self._open.enter_context(store_connection(self.store))
            except StoreLocked as exc:
                self._locked_here = exc
                raise
        return self._connection

    def close(self) -> None:
        """Let go of the store (another command may need it to ingest what this step waits for)."""
        self._open.close()
        self._connection = None

    def carved_out(self, key: str, wave: WaveDef) -> None:
        self.tally["carved out"] += 1
        self.context.log_event(dg.AssetMaterialization(self.asset_key, partition=key, metadata=carved_out_metadata(wave, Cell.parse(key))))

    def finished(self, key: str, directory: Path, reused: bool = False, seconds: float | None = None):
        attempt = sealed_attempt(self.run_root, directory, self.refused)
        if attempt is None:  # not evidence: no materialization, the step fails naming it
            self.context.log.error(f"{self.asset} {key}: refused: {self.refused[str(directory)]}")
            return None
        if attempt.outcome != "stopped":
            self.tally["reused" if reused else "ran"] += 1
        try:
            ingest_attempt(self.connection(), attempt, self.context.run_id)  # idempotent: a reused attempt is usually stored already
        except StoreLocked as exc:
            self.locked = exc
            self.waiting.append(attempt.source_path)
        if not reused and attempt.outcome != "complete":
            # A complete run's line would repeat its materialization's metadata (outcome, attempt, model
            # calls, duration, endpoint), one stored event per cell; the step's summary line counts them.
            self.context.log.info(log_line(self.asset, key, attempt, seconds))
        if attempt.outcome == "stopped":  # cut off by the endpoint's stop: missing, resumed later, never RUN_ERROR
            self.stopped[key] = attempt.record.error
        elif attempt.outcome != "complete":
            self.errors[key] = attempt.record.error
            self.context.log_event(run_error_observation(self.asset_key, key, attempt))  # the reason, on the partition
        elif attempt.source_path not in self.waiting:
            self.context.log_event(dg.AssetMaterialization(self.asset_key, partition=key, metadata=attempt_metadata(attempt, reused)))
        return attempt


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


def live_chunk() -> int:
    """Partitions per backfill run: one process start per chunk. With worker hosts, smaller chunks
    spread one backfill over more hosts (each run's execute step runs on one host)."""
    value = os.environ.get(CHUNK_ENV, "")
    if not value:
        return LIVE_CHUNK
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{CHUNK_ENV} must be a whole number of partitions >= 1, got {value!r}")
    return int(value)


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
        raise dg.Failure(description=f"{path} is missing: the step before this one did not finish in this Dagster run "
                                     "(is the run root a path every host mounts?)", allow_retries=False) from None


def _slot(target):
    return (target.operator, target.probe) if isinstance(target, Cell) else (None, target)


def _target(asset: str, key: str):
    return Probe.parse(key) if asset == "baseline_runs" else Cell.parse(key)


# --- prepare: the store queue --------------------------------------------------------------------


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
    try:
        with store_connection(store) as con:  # finished runs a lock or a crash left behind; settle ingests what the schedule made
            swept = ingest_pending(con, run_root, wave.name, [_slot(t) for t in runnable], context.run_id, plan.refused, skip=set(made.values()),
                                   prices=PriceTable.from_registry(registry))
        if swept:
            context.log.info(f"{asset}: ingested {swept} finished attempt(s) from the run root ({run_root})")
    except StoreLocked as exc:
        plan.locked = str(exc)
        context.log.warning(f"{asset}: {exc}")
    reuse = {} if rerun else reusable_attempts(run_root, wave.name, [_slot(t) for t in runnable], identity, plan.refused)
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
    if not spend_is_capped(context.run.tags, identity.endpoint, replaying):  # nothing to read: a lock cannot stop the runs
        return None
    try:
        with store_connection(store) as con:
            breaker = step_breaker(context.run.tags, Path(store.database), con, identity.endpoint, replaying, registry)
    except StoreLocked as exc:
        # No spend figure, no launch: a paid run is never made blind to the cap.
        raise dg.Failure(description=f"cannot read the spend so far to enforce the cap: {exc}", allow_retries=False) from exc
    breaker.close()
    if not isinstance(breaker, LedgerBreaker):
        return None
    return {"kind": breaker.kind, "ceiling": breaker.cap, "margin": breaker.margin, "expected": breaker.expected, "pilot": breaker.pilot}


def spend_ledger_for(store_path: Path):
    """The spend ledger the executing host reserves from: the store's file on one host, the shared
    Postgres (SABOT_SHARED_STATE_URL) on a deployment with worker hosts (sabot.store.ledger)."""
    from sabot.store.ledger import ledger_path, spend_ledger

    return spend_ledger(ledger_path(store_path), host_label())


def _execute_breaker(plan: StepPlan, store_path: Path) -> Breaker:
    if plan.spend is None:
        return Breaker(None)
    terms = plan.spend
    return LedgerBreaker(spend_ledger_for(store_path), terms["kind"], terms["ceiling"], terms["margin"], terms["expected"], terms["pilot"])


# --- execute: a worker host; the run root only ---------------------------------------------------


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
        return runroot.claim(self.run_root, spec.wave, _probe_of(spec), spec.operator, self.holder, host_label(), self.owner, self._over)

    def release(self, spec: "RunSpec") -> None:
        runroot.release_claim(self.run_root, spec.wave, _probe_of(spec), spec.operator, self.holder)

    def live_elsewhere(self, spec: "RunSpec") -> bool:
        record = runroot.claim_record(self.run_root, spec.wave, _probe_of(spec), spec.operator)
        return (record is not None and record["holder"] != self.holder and not self._over(record)
                and runroot.live_claim(self.run_root, spec.wave, _probe_of(spec), spec.operator, host_label()) is not None)


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
        done = attempts_made_by(run_root, plan.wave, [slot], context.run_id)  # a redelivered step: what its first delivery made
        again = {} if plan.rerun else reusable_attempts(run_root, plan.wave, [slot], plan.identity)  # landed since prepare
        if slot in done:
            results.ran.append((key, done[slot], None))
        elif slot in again:
            results.reused.append((key, again[slot].directory))
        if slot in done or slot in again:
            claims.release(spec)
        else:
            mine.append(spec)
    attempt = partial(run_attempt, registry=registry, run_root=run_root, work_root=store_path.parent / "runs" / plan.wave,
                      identity=plan.identity, dagster_run_id=context.run_id, replays=plan.replays)
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


# --- settle: the store queue ---------------------------------------------------------------------


def settle(context, store: DuckDBResource, wave: WaveDef, plan: StepPlan, results: StepResults, asset_key: dg.AssetKey) -> None:
    """Ingest what ran (or was reused, or another command ran) and report each cell; fail naming the RUN_ERROR cells."""
    run_root, asset = run_root_of(store), plan.asset
    done = Settle(context, store, asset, run_root, asset_key)
    try:
        _settle(context, done, wave, plan, results, asset_key)
    finally:
        done.close()
    _refuse_if_needed(asset, done.refused)
    _fail_if_needed(asset, done.errors, done.waiting, done.locked, done.tally)


def _settle(context, done: Settle, wave: WaveDef, plan: StepPlan, results: StepResults, asset_key: dg.AssetKey) -> None:
    run_root, asset = done.run_root, plan.asset
    done.refused.update(plan.refused)
    done.locked = plan.locked
    if results.skipped:
        context.log.warning(f"{asset}: nothing executed: {results.skipped}")
    ran = {key: (Path(directory), seconds) for key, directory, seconds in results.ran}
    reused_since = {key: Path(directory) for key, directory in results.reused}
    for key in plan.keys:
        if key in plan.carved:
            done.carved_out(key, wave)
        elif key in plan.made:
            done.finished(key, Path(plan.made[key]))
        elif key in plan.reused:
            done.finished(key, Path(plan.reused[key]), reused=True)
        elif key in ran:
            done.finished(key, ran[key][0], seconds=ran[key][1])
        elif key in reused_since:
            done.finished(key, reused_since[key], reused=True)
    unlaunched = results.unlaunched + plan.unscheduled + _settle_foreign(context, done, plan, results, run_root)
    _report_unlaunched(context, asset_key, asset, unlaunched, done.stopped, results)
    tally, errors = done.tally, done.errors
    context.log.info(f"{asset}: {len(plan.keys)} partition(s): ran {tally['ran']}, reused {tally['reused']}, carved out {tally['carved out']}, RUN_ERROR {len(errors)}")
    if not done.locked:
        try:
            append_manifest(done.connection(), wave.name, asset, context.run_id, len(plan.keys), len(plan.keys) - len(plan.carved), "live",
                            {"protocol": wave.protocol, **tally, "run errors": len(errors)})
        except StoreLocked as exc:
            done.locked = exc


def _settle_foreign(context, done: Settle, plan: StepPlan, results: StepResults, run_root: Path) -> int:
    """Cells another live command had claimed: wait for it to let go, then settle its run; those it
    left without a complete run stay missing. Returns how many."""
    if not results.foreign:
        return 0
    done.close()  # the other command ingests its runs meanwhile: the store must not be held while waiting
    claims = _Claims(context, run_root)
    waiting = {key: plan.to_run[key] for key in results.foreign}
    context.log.info(f"{plan.asset}: {len(waiting)} cell(s) run by another command meanwhile; settled from its runs once it lets go")
    while any(claims.live_elsewhere(spec) for spec in waiting.values()):
        time.sleep(FOREIGN_POLL_SECONDS)
    slots = {key: (spec.operator, _probe_of(spec)) for key, spec in waiting.items()}
    found = reusable_attempts(run_root, plan.wave, list(slots.values()), plan.identity, done.refused)
    for key, slot in slots.items():
        if slot in found:
            done.finished(key, found[slot].directory, reused=True)
    return sum(slot not in found for slot in slots.values())


def _report_unlaunched(context, asset_key: dg.AssetKey, asset: str, unlaunched: int, stopped: dict, results: StepResults) -> None:
    """Why runs were never launched (or cut off), on the asset: they stay missing, never RUN_ERROR."""
    if results.opened or stopped:  # the endpoint stopped the wave (here, or in the wave's schedule)
        missing = unlaunched + len(stopped)
        reason = (results.opened or {}).get("message") or next(iter(stopped.values())).removeprefix("stopped: ")
        context.log.warning(f"{asset}: the endpoint stopped the wave: {reason}; {missing} run(s) left missing for a later wave run")
        context.log_event(dg.AssetObservation(asset_key, metadata={NOT_LAUNCHED_KEY: missing, STOPPED_KEY: reason}))
    elif unlaunched:  # the spend breaker (or the wave's schedule, or another command) stopped launching
        why = f"spend reached {usd(results.spent)} of its {usd(results.cap)} ceiling" if results.cap is not None else "the wave's schedule stopped launching"
        context.log.info(f"{asset}: {why}; {unlaunched} run(s) not launched, left missing for a later wave run")
        context.log_event(dg.AssetObservation(asset_key, metadata={
            NOT_LAUNCHED_KEY: unlaunched, "spent (USD)": round(results.spent, 6), "ceiling (USD)": results.cap}))


def _recording(store: DuckDBResource, wave: WaveDef, spec: "RunSpec", probe: Probe) -> "Recording":
    from adapters.runner import Recording
    with store_connection(store) as con:
        stored = read_recording(con, wave.name, spec.operator, probe.key, spec.run_id, run_root_of(store))
    return Recording(stored.exchanges, stored.endpoint_label, stored.intent, stored.source)


def _refuse_if_needed(asset: str, refused: dict) -> None:
    """Attempts that are not sealed, or differ from their seal, stop the wave naming them: they were
    neither ingested nor reused, and stay in the run root for someone to look at (or remove)."""
    if refused:
        lines = sorted(set(refused.values()))
        raise dg.Failure(description=f"{asset}: refused {lines[0]}" + (f" (and {len(lines) - 1} more)\n" + "\n".join(lines[1:]) if len(lines) > 1 else ""),
                         metadata={"refused attempts": dg.MetadataValue.json(refused)}, allow_retries=False)


def _fail_if_needed(asset: str, errors: dict, waiting: list, locked, tally: dict) -> None:
    """Fail the step when a cell ended in RUN_ERROR or a finished run could not be ingested: the
    cells that reported no materialization are then exactly the failed partitions."""
    if not errors and not waiting:
        return
    lines = [f"{k}: RUN_ERROR: {e}" for k, e in errors.items()]  # the first line is a reason, not a count: it is what the UI shows first
    if waiting:
        lines.append(f"{len(waiting)} finished run(s) not ingested: {locked}")
    summary = f"{asset}: {len(errors)} cell(s) ended in RUN_ERROR" + (f"; {len(waiting)} finished run(s) wait for ingest" if waiting else "")
    first = {RUN_ERROR_KEY: f"{next(iter(errors))}: {next(iter(errors.values()))}"} if errors else {}
    raise dg.Failure(
        description="\n".join(lines + [summary]),
        metadata={**first, RUN_ERRORS_KEY: dg.MetadataValue.json(errors), UNINGESTED_KEY: dg.MetadataValue.json(waiting),
                  **{k: v for k, v in tally.items()}},
        allow_retries=False,
    )


# --- the assets ----------------------------------------------------------------------------------


def _guarded(fn):
    setattr(fn, GUARDED, True)  # sabot_assets.guard: this step checks the registry itself, first
    return fn


def _run_asset(wave: WaveDef, registry: Registry, upstream: dg.AssetKey, asset: str, partitions_def, description: str) -> dg.AssetsDefinition:
    key = dg.AssetKey([wave.name, asset])
    step = re.sub(r"[^A-Za-z0-9_]", "_", f"{wave.name}__{asset}")  # op names are unique across the code location

    # `to_execute` only when a run is to be made: with none (the wave's schedule made them, or all are
    # reused) the execute step is skipped, so settling never waits for, or holds, an `llm_agent` slot.
    @dg.op(name=f"{step}__prepare", tags=store_step_tags(), ins={"upstream": dg.In(dg.Nothing)},
           out={"planned": dg.Out(dg.Nothing), "to_execute": dg.Out(dg.Nothing, is_required=False)},
           description="Reads the store and the run root; decides which cells run (store queue).")
    @_guarded
    def prepare_op(context: dg.OpExecutionContext, store: DuckDBResource):
        require_registered(registry, store)
        plan = prepare(context, store, registry, wave, asset, list(context.partition_keys))
        _write(step_file(run_root_of(store), context.run_id, asset, "plan"), plan)
        yield dg.Output(None, "planned")
        if plan.executes:
            yield dg.Output(None, "to_execute")

    # In the pool: the step's own slot covers its first run; each further run in flight claims one more.
    @dg.op(name=f"{step}__execute", pool=LLM_POOL, ins={"prepared": dg.In(dg.Nothing)}, out=dg.Out(dg.Nothing),
           tags={COST_TAG: "llm", **worker_step_tags()},
           description="Runs the cells' pipeline runs; writes sealed attempts to the run root, never the store (any worker host).")
    @_guarded
    def execute_op(context: dg.OpExecutionContext, store: DuckDBResource):
        require_registered(registry)  # this host's checkout is the registered one; the store's pin is read where the store is
        run_root = run_root_of(store)
        plan = _read(step_file(run_root, context.run_id, asset, "plan"))
        _write(step_file(run_root, context.run_id, asset, "results"), execute(context, store, registry, plan))

    @dg.op(name=f"{step}__settle", tags=store_step_tags(), ins={"executed": dg.In(dg.Nothing)},
           out=dg.Out(dg.Nothing, is_required=False), description="Ingests the attempts and reports each cell (store queue).")
    @_guarded
    def settle_op(context: dg.OpExecutionContext, store: DuckDBResource):
        require_registered(registry, store)
        run_root = run_root_of(store)
        plan = _read(step_file(run_root, context.run_id, asset, "plan"))
        results = _read(step_file(run_root, context.run_id, asset, "results")) if plan.executes else StepResults()
        settle(context, store, wave, plan, results, key)
        yield from ()  # each cell reported its own materialization (see the module docstring)

    @dg.graph_asset(
        key=key, group_name=wave.name, partitions_def=partitions_def, description=description,
        ins={"upstream": dg.AssetIn(key=upstream, dagster_type=dg.Nothing)},
        backfill_policy=dg.BackfillPolicy.multi_run(max_partitions_per_run=live_chunk()),
        code_version=RUNNER_VERSION, kinds={"duckdb"}, tags={COST_TAG: "llm"},
    )
    def run_asset(upstream):
        planned, to_execute = prepare_op(upstream)
        return settle_op([planned, execute_op(to_execute)])  # fan-in: settle runs if execute was skipped

    return run_asset


def build_live_run_assets(wave: WaveDef, registry: Registry, upstream: dg.AssetKey) -> list[dg.AssetsDefinition]:
    return [
        _run_asset(wave, registry, upstream, "baseline_runs", probe_partitions(wave), "No-fault baseline runs, executed live."),
        _run_asset(wave, registry, upstream, "fault_runs", cell_partitions(wave),
                   "Fault runs, one planted fault each, executed live; carved-out cells are recorded as such, never run."),
    ]
