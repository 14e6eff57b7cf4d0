"""Cell verdicts: the hard tier under every ruleset the wave registered, per cell partition.

Cheap and deterministic, so it is the layer automation may re-run: its code version is the hash
of every ruleset it applies (data and scorer code), and a change marks only it, and what lies
downstream, stale. A ruleset added later (a new rule: a new file naming the wave in `rescores`)
is a partition of `later_readings` instead, so adding one re-scores no cell partition. No scoring
logic lives here; it calls `judges.hard`.
"""

import hashlib
from collections import Counter
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from judges.hard.cell import score_cell
from sabot.matrix import Cell
from sabot.registry import Registry, WaveDef
from sabot.store.db import append_manifest, transaction
from sabot.store.lineage import attempts_read
from sabot.store.runs import read_scored_runs
from sabot.store.verdicts import write_verdicts
from sabot_assets.automation import RESCORE_CELLS
from sabot_assets.constants import COST_TAG
from sabot_assets.guard import require_registered
from sabot_assets.partitions import CELL_TO_BASELINE, cell_partitions
from sabot_assets.resources import store_connection
from sabot.store.judging import read_judgements
from sabot_assets.waves.cell_checks import (
    SEAL_CHECK,
    VERDICT_CHECK,
    check_outputs,
    check_specs,
    seal_evaluation,
    verdict_evaluation,
)
from sabot_assets.waves.cell_metadata import add_partition_metadata, verdict_metadata
from sabot_assets.waves.cell_record import cell_record, unfinished_attempt_links
from sabot_assets.waves.judging import located_from_runs
from sabot_assets.waves.attempts import run_root_beside


def verdict_rows(wave: WaveDef, ruleset, cell: Cell, fault, baseline, dagster_run_id: str) -> tuple[dict, list[dict]]:
    verdict = score_cell(
        ruleset, cell, fault.record if fault else None, baseline.record if baseline else None, wave.is_carved_out(cell)
    )
    stored = {"fault run": fault, "baseline": baseline}
    # Name the absent file where a run slot recorded it; otherwise the slot was never materialized.
    missing = [stored[name].source_path if stored[name] else f"{name} (not materialized)" for name in verdict.missing]
    p = cell.probe
    row = {
        "wave": wave.name,
        "ruleset": ruleset.version,
        "ruleset_hash": ruleset.hash,
        "operator": cell.operator,
        "probe": p.key,
        "framework": p.framework,
        "config": p.config,
        "task": p.task,
        "seed": p.seed,
        "status": verdict.status,
        "excluded": verdict.excluded,
        "missing": missing,
        "mapping": verdict.mapping,
        "flags": list(verdict.flags),
        "flags_noticed": verdict.flags_noticed,
        "flags_anchored": verdict.flags_anchored,
        "detected_hard": verdict.detected_hard,
        "reacted": verdict.reacted,
        "recovered": verdict.recovered,
        "fault_run_id": fault.record.run_id if fault and fault.record else None,
        "fault_sha256": fault.source_sha256 if fault else None,
        "baseline_run_id": baseline.record.run_id if baseline and baseline.record else None,
        "baseline_sha256": baseline.source_sha256 if baseline else None,
        "dagster_run_id": dagster_run_id,
    }
    acts = [
        {
            "wave": wave.name,
            "ruleset": ruleset.version,
            "operator": cell.operator,
            "probe": p.key,
            "run_id": row["fault_run_id"],
            "seq": a.seq,
            "act": a.act,
            "component": a.component,
            "reason": a.reason,
            "surface": a.surface,
            "counted": a.counted,
            "note": a.note,
        }
        for a in verdict.acts
    ]
    return row, acts


def scorer_version(rulesets) -> str:
    return "verdicts-" + hashlib.sha256("|".join(r.hash for r in rulesets).encode()).hexdigest()[:12]


def build_cell_verdicts(
    wave: WaveDef, registry: Registry, rulesets, fault_runs: dg.AssetKey, baseline_runs: dg.AssetKey, code_version: str
) -> dg.AssetsDefinition:
    @dg.asset(
        name="cell_verdicts",
        key_prefix=wave.name,
        group_name=wave.name,
        partitions_def=cell_partitions(wave),
        backfill_policy=dg.BackfillPolicy.single_run(),
        code_version=code_version,
        deps=[fault_runs, dg.AssetDep(baseline_runs, partition_mapping=CELL_TO_BASELINE)],
        automation_condition=RESCORE_CELLS,
        check_specs=check_specs(wave, dg.AssetKey([wave.name, "cell_verdicts"]), cell_partitions(wave)),
        kinds={"duckdb"},
        tags={COST_TAG: "cheap"},
        description=(
            f"Hard-tier verdict of each cell under rulesets {', '.join(r.version for r in rulesets)}: exclusion, acts, "
            "DETECTED_HARD, reacted, recovered. Open a partition for that cell's own verdict: one row per ruleset, the acts "
            "that decided it (surface, seq, quote), the fault-run attempt and record hash it read, and the `sabot explain` "
            "command for the events and model exchanges behind them. Checks, per partition: its verdict and its evidence seal."
        ),
    )
    def cell_verdicts(context: dg.AssetExecutionContext, store: DuckDBResource):
        require_registered(registry)  # before anything is read or written: the rules must be the registered ones
        cells = [Cell.parse(k) for k in context.partition_keys]
        keys = [(c.operator, c.probe.key) for c in cells] + [("", c.probe.key) for c in cells]
        rows, acts = [], []
        with store_connection(store) as con:
            runs = read_scored_runs(con, wave.name, keys)
            for cell in cells:
                for ruleset in rulesets:
                    fault, baseline = runs.get((cell.operator, cell.probe.key)), runs.get(("", cell.probe.key))
                    row, cell_acts = verdict_rows(wave, ruleset, cell, fault, baseline, context.run_id)
                    rows.append(row)
                    acts += cell_acts
            read = attempts_read(
                con,
                wave.name,
                {(r["operator"], r["probe"]): r["fault_sha256"] for r in rows if r["ruleset"] == wave.headline_ruleset},
            )
            judged = judgements_of(con, wave.name, set(runs) & {(c.operator, c.probe.key) for c in cells}, runs)
            digest = hashlib.sha256(
                repr(
                    sorted((r["ruleset"], r["operator"], r["probe"], r["status"], r["detected_hard"]) for r in rows)
                ).encode()
            ).hexdigest()
            with transaction(con):
                write_verdicts(
                    con,
                    wave.name,
                    [(c.operator, c.probe.key) for c in cells],
                    [r.version for r in rulesets],
                    rows,
                    acts,
                )
                append_manifest(
                    con,
                    wave.name,
                    "cell_verdicts",
                    context.run_id,
                    len(cells),
                    len(rows),
                    digest,
                    {r.version: r.hash for r in rulesets},
                )
        sources = {slot: run.source_path for slot, run in runs.items()}
        _per_cell_metadata(
            context,
            wave,
            cells,
            rows,
            acts,
            read,
            judged,
            sources,
            ", ".join(f"{r.version} ({r.hash})" for r in rulesets),
            run_root_beside(store.database),
        )
        status = Counter(r["status"] for r in rows if r["ruleset"] == wave.headline_ruleset)
        context.log.info(
            f"cell_verdicts: {len(cells)} cell(s) under {len(rulesets)} ruleset(s); {wave.headline_ruleset}: "
            + ", ".join(f"{k} {v}" for k, v in sorted(status.items()))
            + f"; {len(acts)} act(s) recorded"
        )
        yield dg.MaterializeResult()  # every entry is the cell's own (`_per_cell_metadata`), its verdict first
        yield from check_outputs(context)

    return cell_verdicts


def judgements_of(con, wave: str, slots: set, runs: dict) -> dict:
    """The judge's first verdict (variant 0) of these cells, if it has ruled, located against their
    fault runs as the scoreboard locates them (a notice quoting pre-fault text is no notice)."""
    judged = {
        (op, probe): v for (op, probe, _), v in read_judgements(con, wave, variant=0).items() if (op, probe) in slots
    }
    return located_from_runs(judged, runs)


def _per_cell_metadata(
    context,
    wave: WaveDef,
    cells: list[Cell],
    rows: list[dict],
    acts: list[dict],
    read: dict,
    judged: dict,
    sources: dict,
    rulesets: str,
    run_root: Path,
) -> None:
    """Each partition's materialization carries its own cell's verdict, not the batch's totals; and
    each partition's checks (`cell_checks`) are evaluated on it."""
    selected = {k.name for k in context.selected_asset_check_keys}
    by_cell, acts_by_cell = {}, {}
    for r in rows:
        by_cell.setdefault((r["operator"], r["probe"]), []).append(r)
    for a in acts:
        acts_by_cell.setdefault((a["operator"], a["probe"]), []).append(a)
    metadata = {}
    for cell in cells:
        slot = (cell.operator, cell.probe.key)
        verdict = verdict_metadata(wave, cell.key, by_cell[slot], acts_by_cell.get(slot, []), read.get(slot))
        head = next(r for r in by_cell[slot] if r["ruleset"] == wave.headline_ruleset)
        record = cell_record(wave, cell.key, head, judged.get(slot), sources.get(slot))
        record |= unfinished_attempt_links(run_root, sources.get(slot)) if wave.source == "live" else {}
        word = verdict.pop("verdict")
        metadata[cell.key] = {
            "verdict": word,
            **record,
            "dagster/row_count": len(by_cell[slot]),
            **verdict,
            "rulesets": rulesets,
        }
        if VERDICT_CHECK in selected:
            context.log_event(
                verdict_evaluation(
                    context.asset_key, cell.key, head, word, record[f"§2 outcome ({wave.headline_ruleset})"]
                )
            )
        if SEAL_CHECK in selected:
            context.log_event(seal_evaluation(context.asset_key, cell.key, run_root, head, sources.get(slot)))
    add_partition_metadata(context, metadata)
