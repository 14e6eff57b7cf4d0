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

The steps live beside this module: `live_prepare`, `live_execute` and `live_settle`; the run root's
attempts in `attempts`, the plan and its files in `step_plan`. This module builds the assets.
"""

import os
import re

import dagster as dg
from dagster_duckdb import DuckDBResource

from sabot.registry import Registry, WaveDef
from sabot_assets.constants import COST_TAG, LLM_POOL, LIVE_CHUNK, RUNNER_VERSION
from sabot_assets.partitions import cell_partitions, probe_partitions
from sabot_assets.guard import GUARDED, require_registered
from sabot_assets.hosts import store_step_tags, worker_step_tags
from sabot_assets.waves.attempts import run_root_of
from sabot_assets.waves.step_plan import StepResults, _read, _write, step_file
from sabot_assets.waves.live_prepare import prepare
from sabot_assets.waves.live_execute import execute
from sabot_assets.waves.live_settle import settle


CHUNK_ENV = "SABOT_LIVE_CHUNK"


def live_chunk() -> int:
    """Partitions per backfill run: one process start per chunk. With worker hosts, smaller chunks
    spread one backfill over more hosts (each run's execute step runs on one host)."""
    value = os.environ.get(CHUNK_ENV, "")
    if not value:
        return LIVE_CHUNK
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{CHUNK_ENV} must be a whole number of partitions >= 1, got {value!r}")
    return int(value)


def _guarded(fn):
    setattr(fn, GUARDED, True)  # sabot_assets.guard: this step checks the registry itself, first
    return fn


def _run_asset(
    wave: WaveDef, registry: Registry, upstream: dg.AssetKey, asset: str, partitions_def, description: str
) -> dg.AssetsDefinition:
    key = dg.AssetKey([wave.name, asset])
    step = re.sub(r"[^A-Za-z0-9_]", "_", f"{wave.name}__{asset}")  # op names are unique across the code location

    # `to_execute` only when a run is to be made: with none (the wave's schedule made them, or all are
    # reused) the execute step is skipped, so settling never waits for, or holds, an `llm_agent` slot.
    @dg.op(
        name=f"{step}__prepare",
        tags=store_step_tags(),
        ins={"upstream": dg.In(dg.Nothing)},
        out={"planned": dg.Out(dg.Nothing), "to_execute": dg.Out(dg.Nothing, is_required=False)},
        description="Reads the store and the run root; decides which cells run (store queue).",
    )
    @_guarded
    def prepare_op(context: dg.OpExecutionContext, store: DuckDBResource):
        require_registered(registry, store)
        plan = prepare(context, store, registry, wave, asset, list(context.partition_keys))
        _write(step_file(run_root_of(store), context.run_id, asset, "plan"), plan)
        yield dg.Output(None, "planned")
        if plan.executes:
            yield dg.Output(None, "to_execute")

    # In the pool: the step's own slot covers its first run; each further run in flight claims one more.
    @dg.op(
        name=f"{step}__execute",
        pool=LLM_POOL,
        ins={"prepared": dg.In(dg.Nothing)},
        out=dg.Out(dg.Nothing),
        tags={COST_TAG: "llm", **worker_step_tags()},
        description="Runs the cells' pipeline runs; writes sealed attempts to the run root, never the store (any worker host).",
    )
    @_guarded
    def execute_op(context: dg.OpExecutionContext, store: DuckDBResource):
        require_registered(
            registry
        )  # this host's checkout is the registered one; the store's pin is read where the store is
        run_root = run_root_of(store)
        plan = _read(step_file(run_root, context.run_id, asset, "plan"))
        _write(step_file(run_root, context.run_id, asset, "results"), execute(context, store, registry, plan))

    @dg.op(
        name=f"{step}__settle",
        tags=store_step_tags(),
        ins={"executed": dg.In(dg.Nothing)},
        out=dg.Out(dg.Nothing, is_required=False),
        description="Ingests the attempts and reports each cell (store queue).",
    )
    @_guarded
    def settle_op(context: dg.OpExecutionContext, store: DuckDBResource):
        require_registered(registry, store)
        run_root = run_root_of(store)
        plan = _read(step_file(run_root, context.run_id, asset, "plan"))
        results = _read(step_file(run_root, context.run_id, asset, "results")) if plan.executes else StepResults()
        settle(context, store, wave, plan, results, key)
        yield from ()  # each cell reported its own materialization (see the module docstring)

    @dg.graph_asset(
        key=key,
        group_name=wave.name,
        partitions_def=partitions_def,
        description=description,
        ins={"upstream": dg.AssetIn(key=upstream, dagster_type=dg.Nothing)},
        backfill_policy=dg.BackfillPolicy.multi_run(max_partitions_per_run=live_chunk()),
        code_version=RUNNER_VERSION,
        kinds={"duckdb"},
        tags={COST_TAG: "llm"},
    )
    def run_asset(upstream):
        planned, to_execute = prepare_op(upstream)
        return settle_op([planned, execute_op(to_execute)])  # fan-in: settle runs if execute was skipped

    return run_asset


def build_live_run_assets(wave: WaveDef, registry: Registry, upstream: dg.AssetKey) -> list[dg.AssetsDefinition]:
    return [
        _run_asset(
            wave, registry, upstream, "baseline_runs", probe_partitions(wave), "No-fault baseline runs, executed live."
        ),
        _run_asset(
            wave,
            registry,
            upstream,
            "fault_runs",
            cell_partitions(wave),
            "Fault runs, one planted fault each, executed live; carved-out cells are recorded as such, never run.",
        ),
    ]
