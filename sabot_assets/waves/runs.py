"""Run assets of an imported wave: baselines and fault runs, filled from the import landing zone.

An imported corpus is a wave whose runs were made elsewhere; these assets turn its landed files
into run slots. A slot the corpus lacks is recorded as absent (and named), never crashed on.
"""

import hashlib

import dagster as dg
from dagster_duckdb import DuckDBResource

from sabot.corpus import expected_path
from sabot.matrix import Cell, Probe
from sabot.registry import WaveDef
from sabot.store.db import append_manifest, transaction
from sabot.store.landing import landed_files, write_landed_slots
from sabot.store.runs import RunSlot
from sabot_assets.constants import COST_TAG, IMPORT_RUNS_VERSION
from sabot_assets.partitions import cell_partitions, probe_partitions
from sabot_assets.resources import store_connection


def _land(context, store: DuckDBResource, wave: WaveDef, asset: str, kind: str, targets: list) -> dg.MaterializeResult:
    """Write the slots of `targets` (Cells or Probes) from the landing zone, in one transaction."""
    keys = [((t.operator if isinstance(t, Cell) else ""), (t.probe if isinstance(t, Cell) else t).key) for t in targets]
    with store_connection(store) as con:
        landed = landed_files(con, wave.name, kind, keys)
        slots = []
        for target, key in zip(targets, keys):
            probe = target.probe if isinstance(target, Cell) else target
            path, sha = landed.get(key, (expected_path(wave, target), None))
            slots.append(RunSlot(key[0] or None, probe, path, None, sha))  # a landed run's record stays in the store
        digest = hashlib.sha256(
            "".join(sorted(f"{s.source_path}:{s.source_sha256}" for s in slots)).encode()
        ).hexdigest()
        with transaction(con):
            present, absent = write_landed_slots(con, wave.name, slots, context.run_id)
            append_manifest(con, wave.name, asset, context.run_id, len(slots), present, digest, {"landing": kind})
    absent_paths = [s.source_path for s in slots if s.source_sha256 is None]
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": present,
            "runs present": present,
            "runs absent": absent,
            "absent files": dg.MetadataValue.md("\n".join(f"- `{p}`" for p in absent_paths[:50]) or "none"),
            "content sha256": digest,
        }
    )


def build_run_assets(wave: WaveDef, upstream: dg.AssetKey) -> list[dg.AssetsDefinition]:
    common = dict(
        key_prefix=wave.name,
        group_name=wave.name,
        backfill_policy=dg.BackfillPolicy.single_run(),
        code_version=IMPORT_RUNS_VERSION,
        deps=[upstream],
        kinds={"duckdb"},
        tags={COST_TAG: "import"},
    )

    @dg.asset(
        name="baseline_runs",
        partitions_def=probe_partitions(wave),
        description="No-fault baseline runs, one per probe (framework.config.task.seed).",
        **common,
    )
    def baseline_runs(context: dg.AssetExecutionContext, store: DuckDBResource) -> dg.MaterializeResult:
        probes = [Probe.parse(k) for k in context.partition_keys]
        return _land(context, store, wave, "baseline_runs", "baseline", probes)

    @dg.asset(
        name="fault_runs",
        partitions_def=cell_partitions(wave),
        description="Fault runs, one per cell (operator x probe). Carved-out cells are never run.",
        **common,
    )
    def fault_runs(context: dg.AssetExecutionContext, store: DuckDBResource) -> dg.MaterializeResult:
        cells = [Cell.parse(k) for k in context.partition_keys]
        return _land(context, store, wave, "fault_runs", "fault", [c for c in cells if not wave.is_carved_out(c)])

    return [baseline_runs, fault_runs]
