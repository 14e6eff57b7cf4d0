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
  flight across every Dagster run (`sabot_assets.waves.concurrency`), each settled as it finishes.
- **Carved-out cells** (pre-registered, never run) materialize as such, so they never look like
  missing work.
"""

from functools import partial
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from adapters.pool import crashed_attempt
from adapters.run_attempt import current_identity, is_replay, provider_circuit, run_attempt
from adapters.runner import Recording, RunSpec
from sabot import runroot
from sabot.matrix import Cell, Probe
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
from sabot.budget import Breaker, usd
from sabot_assets.waves.budget import spend_is_capped, step_breaker
from sabot_assets.waves.concurrency import run_in_processes
from sabot_assets.waves.cell_metadata import attempt_metadata, carved_out_metadata, log_line, run_error_observation



def run_root_of(store: DuckDBResource) -> Path:
    return run_root_beside(store.database)


def run_root_beside(store_path) -> Path:
    return Path(store_path).parent / "runroot"


def sealed_attempt(run_root: Path, directory: Path, refused: dict | None = None):
    """The attempt in `directory` if it is sealed and unmodified; else None, with the one-line
    reason recorded in `refused` (directory -> reason). A refused attempt is never ingested,
    reused or replayed."""
    try:
        return runroot.read_attempt(run_root, directory)
    except (SealError, TraceError) as exc:
        if refused is not None:
            refused[str(directory)] = str(exc)
        return None


def ingest_pending(con, run_root: Path, wave: str, slots, dagster_run_id: str, refused: dict | None = None) -> int:
    """Ingest every finished, sealed attempt of these slots that the store does not hold yet."""
    done = 0
    for operator, probe in slots:
        for directory in runroot.finished_attempts(run_root, wave, probe, operator):
            attempt = sealed_attempt(run_root, directory, refused)
            done += ingest_attempt(con, attempt, dagster_run_id) if attempt else 0
    return done


def reusable_attempts(run_root: Path, wave: str, slots, identity, refused: dict | None = None) -> dict:
    """slot -> its stored run (latest complete sealed attempt) where that run was made with `identity`.
    Read from the run root, so a held store lock cannot force a paid run to be repeated."""
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


class Settle:
    """What happens to each finished (or reused) attempt in the parent: ingest it into the store,
    log its line, report its partition. An executor running attempts elsewhere calls `finished`
    once per attempt directory it gets back."""

    def __init__(self, context, store: DuckDBResource, asset: str, run_root: Path):
        self.context, self.store, self.asset, self.run_root = context, store, asset, run_root
        self.errors, self.waiting, self.locked, self.refused, self.stopped = {}, [], None, {}, {}
        self.tally = {"reused": 0, "ran": 0, "carved out": 0}

    def carved_out(self, key: str, wave: WaveDef) -> None:
        self.tally["carved out"] += 1
        self.context.log_event(dg.AssetMaterialization(self.context.asset_key, partition=key, metadata=carved_out_metadata(wave)))

    def finished(self, key: str, directory: Path, reused: bool = False, seconds: float | None = None):
        attempt = sealed_attempt(self.run_root, directory, self.refused)
        if attempt is None:  # not evidence: no materialization, the step fails naming it
            self.context.log.error(f"{self.asset} {key}: refused: {self.refused[str(directory)]}")
            return None
        if attempt.outcome != "stopped":
            self.tally["reused" if reused else "ran"] += 1
        try:
            with store_connection(self.store) as con:
                ingest_attempt(con, attempt, self.context.run_id)  # idempotent: a reused attempt is usually stored already
        except StoreLocked as exc:
            self.locked = exc
            self.waiting.append(attempt.source_path)
        if not reused:
            self.context.log.info(log_line(self.asset, key, attempt, seconds))
        if attempt.outcome == "stopped":  # cut off by the endpoint's stop: missing, resumed later, never RUN_ERROR
            self.stopped[key] = attempt.record.error
        elif attempt.outcome != "complete":
            self.errors[key] = attempt.record.error
            self.context.log_event(run_error_observation(self.context.asset_key, key, attempt))  # the reason, on the partition
        elif attempt.source_path not in self.waiting:
            self.context.log_event(dg.AssetMaterialization(self.context.asset_key, partition=key, metadata=attempt_metadata(attempt, reused)))
        return attempt


def _run_targets(context, store: DuckDBResource, registry: Registry, wave: WaveDef, asset: str, targets: list) -> None:
    run_root, work_root = run_root_of(store), Path(store.database).parent / "runs" / wave.name
    identity = current_identity(registry, RUNNER_VERSION, wave.protocol)
    rerun = context.run.tags.get(RERUN_TAG) == "true"
    replaying = context.run.tags.get(REPLAY_TAG) == "true"  # answered from the stored exchanges, nothing sent
    slot_of = {t: ((t.operator, t.probe) if isinstance(t, Cell) else (None, t)) for t in targets}
    runnable = [t for t in targets if not (isinstance(t, Cell) and wave.is_carved_out(t))]
    settle = Settle(context, store, asset, run_root)
    try:
        with store_connection(store) as con:  # finished runs a lock or a crash left behind
            swept = ingest_pending(con, run_root, wave.name, [slot_of[t] for t in runnable], context.run_id, settle.refused)
        if swept:
            context.log.info(f"{asset}: ingested {swept} finished attempt(s) from the run root ({run_root})")
    except StoreLocked as exc:
        settle.locked = exc
        context.log.warning(f"{asset}: {exc}")
    reuse = {} if rerun else reusable_attempts(run_root, wave.name, [slot_of[t] for t in runnable], identity, settle.refused)
    for reason in sorted(set(settle.refused.values())):  # shown as found; the step fails naming them at the end
        context.log.error(f"{asset}: refused {reason}")
    scheduled_by = context.run.tags.get(SCHEDULED_TAG)  # the wave's schedule ran these: settle, launch nothing
    made = attempts_made_by(run_root, wave.name, [slot_of[t] for t in runnable], scheduled_by) if scheduled_by else {}
    to_run, replays, unscheduled = {}, {}, 0
    for target in targets:
        if target not in runnable:
            settle.carved_out(target.key, wave)
        elif slot_of[target] in made:
            settle.finished(target.key, made[slot_of[target]])
        elif slot_of[target] in reuse:
            settle.finished(target.key, reuse[slot_of[target]].directory, reused=True)
        elif scheduled_by:
            unscheduled += 1  # the schedule never launched it (the spend breaker): missing, resumable
        else:
            operator, probe = slot_of[target]
            spec = RunSpec(wave.name, wave.protocol, probe.framework, probe.config, probe.task, operator, probe.seed)
            to_run[spec] = target
            if replaying:
                replays[spec] = _recording(store, wave, spec, probe)
    # Each run in a process of its own, up to the llm_agent pool's limit at once, settled as it finishes.
    attempt = partial(run_attempt, registry=registry, run_root=run_root, work_root=work_root, identity=identity,
                      dagster_run_id=context.run_id, replays=replays)
    crashed = partial(crashed_attempt, run_root=run_root, identity=identity, dagster_run_id=context.run_id)
    breaker = _breaker(context, store, registry, identity, replaying)
    circuit = None if replaying else provider_circuit(registry)
    closed = _EndpointGate(circuit)
    launched = 0

    def may_launch(spec) -> bool:  # the endpoint first: an open one reserves no spend
        return closed(spec) and breaker.may_launch(spec)

    try:
        for spec, directory, seconds in run_in_processes(context, attempt, list(to_run), crashed, may_launch=may_launch):
            launched += 1
            finished = settle.finished(to_run[spec].key, directory, seconds=seconds)
            if finished is not None:
                settle_cost(breaker, finished, spec)
    finally:
        breaker.close()
    _report_unlaunched(context, asset, len(to_run) - launched + unscheduled, settle.stopped, closed, circuit, breaker)
    tally, errors = settle.tally, settle.errors
    context.log.info(f"{asset}: {len(targets)} partition(s): ran {tally['ran']}, reused {tally['reused']}, carved out {tally['carved out']}, RUN_ERROR {len(errors)}")
    if not settle.locked:
        try:
            with store_connection(store) as con:
                append_manifest(con, wave.name, asset, context.run_id, len(targets), len(runnable), "live",
                                {"protocol": wave.protocol, **tally, "run errors": len(errors)})
        except StoreLocked as exc:
            settle.locked = exc
    _refuse_if_needed(asset, settle.refused)
    _fail_if_needed(asset, errors, settle.waiting, settle.locked, tally)


def _report_unlaunched(context, asset: str, unlaunched: int, stopped: dict, closed, circuit, breaker) -> None:
    """Why runs were never launched (or cut off), on the asset: they stay missing, never RUN_ERROR."""
    opened = closed.reason or (circuit.opened() if circuit is not None and (unlaunched or stopped) else None)
    if opened or stopped:  # the endpoint stopped the wave (here, or in the wave's schedule)
        missing = unlaunched + len(stopped)
        reason = (opened or {}).get("message") or next(iter(stopped.values())).removeprefix("stopped: ")
        context.log.warning(f"{asset}: the endpoint stopped the wave: {reason}; {missing} run(s) left missing for a later wave run")
        context.log_event(dg.AssetObservation(context.asset_key, metadata={NOT_LAUNCHED_KEY: missing, STOPPED_KEY: reason}))
    elif unlaunched:  # the spend breaker (or the wave's schedule) stopped launching
        why = f"spend reached {usd(breaker.spent)} of its {usd(breaker.cap)} ceiling" if breaker.cap is not None else "the wave's schedule stopped launching"
        context.log.info(f"{asset}: {why}; {unlaunched} run(s) not launched, left missing for a later wave run")
        context.log_event(dg.AssetObservation(context.asset_key, metadata={
            NOT_LAUNCHED_KEY: unlaunched, "spent (USD)": round(breaker.spent, 6), "ceiling (USD)": breaker.cap}))


class _EndpointGate:
    """may_launch for the endpoint's host-wide breaker: no run launches while the endpoint is open."""

    def __init__(self, circuit):
        self.circuit, self.reason = circuit, None

    def __call__(self, spec) -> bool:
        if self.circuit is None:
            return True
        self.reason = self.reason or self.circuit.opened()
        return self.reason is None


def _breaker(context, store: DuckDBResource, registry: Registry, identity, replaying: bool):
    if not spend_is_capped(context.run.tags, identity.endpoint, replaying):  # nothing to read: a lock cannot stop the runs
        return Breaker(None)
    try:
        with store_connection(store) as con:
            return step_breaker(context.run.tags, Path(store.database), con, identity.endpoint, replaying, registry)
    except StoreLocked as exc:
        # No spend figure, no launch: a paid run is never made blind to the cap.
        raise dg.Failure(description=f"cannot read the spend so far to enforce the cap: {exc}", allow_retries=False) from exc


def _recording(store: DuckDBResource, wave: WaveDef, spec: RunSpec, probe: Probe) -> Recording:
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
    lines = [f"{k}: {e}" for k, e in errors.items()]
    if waiting:
        lines.append(f"{len(waiting)} finished run(s) not ingested: {locked}")
    raise dg.Failure(
        description=f"{asset}: {len(errors)} cell(s) ended in RUN_ERROR" + (f"; {len(waiting)} finished run(s) wait for ingest" if waiting else "") + "\n" + "\n".join(lines),
        metadata={RUN_ERRORS_KEY: dg.MetadataValue.json(errors), UNINGESTED_KEY: dg.MetadataValue.json(waiting),
                  **{k: v for k, v in tally.items()}},
        allow_retries=False,
    )


def build_live_run_assets(wave: WaveDef, registry: Registry, upstream: dg.AssetKey) -> list[dg.AssetsDefinition]:
    common = dict(
        key_prefix=wave.name,
        group_name=wave.name,
        backfill_policy=dg.BackfillPolicy.multi_run(max_partitions_per_run=LIVE_CHUNK),
        code_version=RUNNER_VERSION,
        deps=[upstream],
        pool=LLM_POOL,
        kinds={"duckdb"},
        tags={COST_TAG: "llm"},
        output_required=False,  # each cell reports its own materialization (see the module docstring)
    )

    @dg.asset(name="baseline_runs", partitions_def=probe_partitions(wave), description="No-fault baseline runs, executed live.", **common)
    def baseline_runs(context: dg.AssetExecutionContext, store: DuckDBResource):
        _run_targets(context, store, registry, wave, "baseline_runs", [Probe.parse(k) for k in context.partition_keys])
        yield from ()

    @dg.asset(name="fault_runs", partitions_def=cell_partitions(wave), description="Fault runs, one planted fault each, executed live; carved-out cells are recorded as such, never run.", **common)
    def fault_runs(context: dg.AssetExecutionContext, store: DuckDBResource):
        _run_targets(context, store, registry, wave, "fault_runs", [Cell.parse(k) for k in context.partition_keys])
        yield from ()

    return [baseline_runs, fault_runs]
