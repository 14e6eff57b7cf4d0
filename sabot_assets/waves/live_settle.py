"""The `settle` step of a live run asset (sabot_assets.waves.live_runs), on the store queue: ingests
what ran, was reused or another command ran, reports each cell, and fails naming the RUN_ERROR cells."""

import contextlib
import time
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from sabot.matrix import Cell
from sabot.registry import WaveDef
from sabot.store.db import StoreLocked, append_manifest
from sabot.store.runs import ingest_attempt
from sabot_assets.constants import NOT_LAUNCHED_KEY, RUN_ERRORS_KEY, STOPPED_KEY, UNINGESTED_KEY
from sabot_assets.resources import store_connection
from sabot.budget import usd
from sabot_assets.waves.cell_metadata import (
    RUN_ERROR_KEY,
    attempt_metadata,
    carved_out_metadata,
    log_line,
    run_error_observation,
)
from sabot_assets.waves.attempts import reusable_attempts, run_root_of, sealed_attempt
from sabot_assets.waves.step_plan import StepPlan, StepResults
from sabot_assets.waves.live_execute import _Claims, _probe_of


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
        self.context.log_event(
            dg.AssetMaterialization(self.asset_key, partition=key, metadata=carved_out_metadata(wave, Cell.parse(key)))
        )

    def finished(self, key: str, directory: Path, reused: bool = False, seconds: float | None = None):
        attempt = sealed_attempt(self.run_root, directory, self.refused)
        if attempt is None:  # not evidence: no materialization, the step fails naming it
            self.context.log.error(f"{self.asset} {key}: refused: {self.refused[str(directory)]}")
            return None
        if attempt.outcome != "stopped":
            self.tally["reused" if reused else "ran"] += 1
        try:
            ingest_attempt(
                self.connection(), attempt, self.context.run_id
            )  # idempotent: a reused attempt is usually stored already
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
            self.context.log_event(
                dg.AssetMaterialization(self.asset_key, partition=key, metadata=attempt_metadata(attempt, reused))
            )
        return attempt


def settle(
    context, store: DuckDBResource, wave: WaveDef, plan: StepPlan, results: StepResults, asset_key: dg.AssetKey
) -> None:
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
    context.log.info(
        f"{asset}: {len(plan.keys)} partition(s): ran {tally['ran']}, reused {tally['reused']}, carved out {tally['carved out']}, RUN_ERROR {len(errors)}"
    )
    if not done.locked:
        try:
            append_manifest(
                done.connection(),
                wave.name,
                asset,
                context.run_id,
                len(plan.keys),
                len(plan.keys) - len(plan.carved),
                "live",
                {"protocol": wave.protocol, **tally, "run errors": len(errors)},
            )
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
    context.log.info(
        f"{plan.asset}: {len(waiting)} cell(s) run by another command meanwhile; settled from its runs once it lets go"
    )
    while any(claims.live_elsewhere(spec) for spec in waiting.values()):
        time.sleep(FOREIGN_POLL_SECONDS)
    slots = {key: (spec.operator, _probe_of(spec)) for key, spec in waiting.items()}
    found = reusable_attempts(run_root, plan.wave, list(slots.values()), plan.identity, done.refused)
    for key, slot in slots.items():
        if slot in found:
            done.finished(key, found[slot].directory, reused=True)
    return sum(slot not in found for slot in slots.values())


def _report_unlaunched(
    context, asset_key: dg.AssetKey, asset: str, unlaunched: int, stopped: dict, results: StepResults
) -> None:
    """Why runs were never launched (or cut off), on the asset: they stay missing, never RUN_ERROR."""
    if results.opened or stopped:  # the endpoint stopped the wave (here, or in the wave's schedule)
        missing = unlaunched + len(stopped)
        reason = (results.opened or {}).get("message") or next(iter(stopped.values())).removeprefix("stopped: ")
        context.log.warning(
            f"{asset}: the endpoint stopped the wave: {reason}; {missing} run(s) left missing for a later wave run"
        )
        context.log_event(dg.AssetObservation(asset_key, metadata={NOT_LAUNCHED_KEY: missing, STOPPED_KEY: reason}))
    elif unlaunched:  # the spend breaker (or the wave's schedule, or another command) stopped launching
        why = (
            f"spend reached {usd(results.spent)} of its {usd(results.cap)} ceiling"
            if results.cap is not None
            else "the wave's schedule stopped launching"
        )
        context.log.info(f"{asset}: {why}; {unlaunched} run(s) not launched, left missing for a later wave run")
        context.log_event(
            dg.AssetObservation(
                asset_key,
                metadata={
                    NOT_LAUNCHED_KEY: unlaunched,
                    "spent (USD)": round(results.spent, 6),
                    "ceiling (USD)": results.cap,
                },
            )
        )


def _refuse_if_needed(asset: str, refused: dict) -> None:
    """Attempts that are not sealed, or differ from their seal, stop the wave naming them: they were
    neither ingested nor reused, and stay in the run root for someone to look at (or remove)."""
    if refused:
        lines = sorted(set(refused.values()))
        raise dg.Failure(
            description=f"{asset}: refused {lines[0]}"
            + (f" (and {len(lines) - 1} more)\n" + "\n".join(lines[1:]) if len(lines) > 1 else ""),
            metadata={"refused attempts": dg.MetadataValue.json(refused)},
            allow_retries=False,
        )


def _fail_if_needed(asset: str, errors: dict, waiting: list, locked, tally: dict) -> None:
    """Fail the step when a cell ended in RUN_ERROR or a finished run could not be ingested: the
    cells that reported no materialization are then exactly the failed partitions."""
    if not errors and not waiting:
        return
    lines = [
        f"{k}: RUN_ERROR: {e}" for k, e in errors.items()
    ]  # the first line is a reason, not a count: it is what the UI shows first
    if waiting:
        lines.append(f"{len(waiting)} finished run(s) not ingested: {locked}")
    summary = f"{asset}: {len(errors)} cell(s) ended in RUN_ERROR" + (
        f"; {len(waiting)} finished run(s) wait for ingest" if waiting else ""
    )
    first = {RUN_ERROR_KEY: f"{next(iter(errors))}: {next(iter(errors.values()))}"} if errors else {}
    raise dg.Failure(
        description="\n".join(lines + [summary]),
        metadata={
            **first,
            RUN_ERRORS_KEY: dg.MetadataValue.json(errors),
            UNINGESTED_KEY: dg.MetadataValue.json(waiting),
            **{k: v for k, v in tally.items()},
        },
        allow_retries=False,
    )
