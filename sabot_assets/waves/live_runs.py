"""Run assets of a live wave: every partition is a real pipeline run against the model endpoint.

Model calls go through the `llm_agent` pool; a backfill runs partitions in chunks so a wave does
not pay a process start per cell. A run that fails for infrastructure is retried once inside the
runner and then stored as RUN_ERROR: the partition still materializes, nothing crashes.
"""

import hashlib
import json
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from adapters.runner import RunSpec, run
from sabot.matrix import Cell, Probe
from sabot.registry import Registry, WaveDef
from sabot.store.db import append_manifest, transaction
from sabot.store.runs import RunSlot, write_intent, write_slots
from sabot.trace import to_runresult
from sabot_assets.constants import COST_TAG, LLM_POOL, LIVE_CHUNK, RUNNER_VERSION
from sabot_assets.partitions import cell_partitions, probe_partitions
from sabot_assets.resources import store_connection


def _run_targets(context, store: DuckDBResource, registry: Registry, wave: WaveDef, asset: str, targets: list) -> dg.MaterializeResult:
    work_root = Path(store.database).parent / "runs" / wave.name
    counts = {"passed": 0, "failed": 0, "run errors": 0}
    for i, target in enumerate(targets, 1):
        cell = target if isinstance(target, Cell) else None
        probe = cell.probe if cell else target
        spec = RunSpec(wave.name, wave.protocol, probe.framework, probe.config, probe.task, cell.operator if cell else None, probe.seed)
        outcome = run(spec, registry, work_root)  # no store connection is held across model calls
        record = outcome.record
        body = json.dumps(to_runresult(record), sort_keys=True)
        slot = RunSlot(spec.operator, probe, f"live:{spec.run_id}", record, hashlib.sha256(body.encode()).hexdigest())
        with store_connection(store) as con, transaction(con):
            write_slots(con, wave.name, [slot], context.run_id)
            write_intent(con, wave.name, spec.operator, probe.key, spec.run_id, outcome.intent)
        counts["run errors" if record.error else ("passed" if record.task_passed else "failed")] += 1
        if i % 10 == 0 or i == len(targets):
            context.log.info(f"{asset}: {i}/{len(targets)} runs")
    with store_connection(store) as con:
        append_manifest(con, wave.name, asset, context.run_id, len(targets), len(targets), "live", {"protocol": wave.protocol})
    return dg.MaterializeResult(metadata={"dagster/row_count": len(targets), **{f"runs {k}": v for k, v in counts.items()}})


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
    )

    @dg.asset(name="baseline_runs", partitions_def=probe_partitions(wave), description="No-fault baseline runs, executed live.", **common)
    def baseline_runs(context: dg.AssetExecutionContext, store: DuckDBResource) -> dg.MaterializeResult:
        probes = [Probe.parse(k) for k in context.partition_keys]
        return _run_targets(context, store, registry, wave, "baseline_runs", probes)

    @dg.asset(name="fault_runs", partitions_def=cell_partitions(wave), description="Fault runs, one planted fault each, executed live.", **common)
    def fault_runs(context: dg.AssetExecutionContext, store: DuckDBResource) -> dg.MaterializeResult:
        cells = [Cell.parse(k) for k in context.partition_keys]
        return _run_targets(context, store, registry, wave, "fault_runs", [c for c in cells if not wave.is_carved_out(c)])

    return [baseline_runs, fault_runs]
