"""Later readings: a wave's cells under each ruleset added after the wave was registered.

A new rule is a new ruleset file naming the wave in `rescores` (a registered wave is never edited).
Its verdicts are one partition of this asset, keyed by the ruleset, not a new row in each of the
wave's cell partitions: adding such a ruleset re-scores one partition and the board,
and every cell partition, with its two checks, stays as it was (`docs/figures.md`: a cell
partition costs Dagster far more than scoring it). The partition scores exactly the cells the wave
has settled under its headline ruleset, from the same stored runs; its metadata names the cells it
reads differently from the headline, each with its `sabot explain` command.
"""

import hashlib
from collections import Counter

import dagster as dg
from dagster_duckdb import DuckDBResource

from judges.hard.tables import HEADLINE_COLUMN
from sabot.matrix import Cell, Probe
from sabot.registry import Registry, WaveDef
from sabot.store.db import append_manifest, transaction
from sabot.store.runs import read_scored_runs
from sabot.store.verdicts import read_verdicts, write_reading
from sabot_assets.automation import RESCORE_READINGS
from sabot_assets.constants import COST_TAG
from sabot_assets.guard import require_registered
from sabot_assets.resources import store_connection
from sabot_assets.waves.cell_metadata import add_partition_metadata, verdict_word
from sabot_assets.waves.ui_links import LATER_READINGS, explain_cell_command, partition_url
from sabot_assets.waves.verdicts import verdict_rows

SHOWN = 50  # cells listed in a partition's metadata; the rest are counted and in the store


def later_partitions(wave: WaveDef) -> dg.StaticPartitionsDefinition:
    return dg.StaticPartitionsDefinition(list(wave.later_readings))


def build_later_readings(
    wave: WaveDef, registry: Registry, rulesets, cell_verdicts: dg.AssetKey, code_version: str
) -> dg.AssetsDefinition:
    """One partition per later ruleset (`rulesets`, loaded in the order of `wave.later_readings`)."""
    by_version = {r.version: r for r in rulesets}

    @dg.asset(
        name=LATER_READINGS,
        key_prefix=wave.name,
        group_name=wave.name,
        partitions_def=later_partitions(wave),
        backfill_policy=dg.BackfillPolicy.single_run(),
        code_version=code_version,
        deps=[dg.AssetDep(cell_verdicts, partition_mapping=dg.AllPartitionMapping())],
        automation_condition=RESCORE_READINGS,
        kinds={"duckdb"},
        tags={COST_TAG: "cheap"},
        description=(
            f"Hard-tier verdicts of every settled cell of {wave.name} under each ruleset added after its registration "
            f"({', '.join(wave.later_readings)}), one partition per ruleset: a new rule re-scores its partition and the "
            "board, not the cell partitions. Open a partition for the cells it reads differently from the headline."
        ),
    )
    def later_readings(context: dg.AssetExecutionContext, store: DuckDBResource) -> dg.MaterializeResult:
        require_registered(registry)
        metadata = {}
        for version in context.partition_keys:
            ruleset = by_version[version]
            with store_connection(store) as con:
                # The cells the wave has settled under its headline, whose verdicts this reading sits beside.
                headline = {
                    (r["operator"], r["probe"]): r for r in read_verdicts(con, wave.name, wave.headline_ruleset)
                }
                cells = [Cell(op, Probe.parse(probe)) for op, probe in headline]
                slots = [(c.operator, c.probe.key) for c in cells]
                runs = read_scored_runs(con, wave.name, slots + [("", c.probe.key) for c in cells])
                rows, acts = [], []
                for cell in cells:
                    fault, baseline = runs.get((cell.operator, cell.probe.key)), runs.get(("", cell.probe.key))
                    row, cell_acts = verdict_rows(wave, ruleset, cell, fault, baseline, context.run_id)
                    rows.append(row)
                    acts += cell_acts
                digest = hashlib.sha256(
                    repr([(r["operator"], r["probe"], r["status"], r["detected_hard"]) for r in rows]).encode()
                ).hexdigest()
                with transaction(con):
                    write_reading(con, wave.name, version, rows, acts)
                    append_manifest(
                        con, wave.name, LATER_READINGS, context.run_id, 1, len(rows), digest, {version: ruleset.hash}
                    )
            context.log.info(f"{LATER_READINGS} {version}: {len(rows)} cell(s), {len(acts)} act(s) recorded")
            metadata[version] = reading_metadata(wave, version, ruleset.hash, rows, headline)
        add_partition_metadata(context, metadata)
        return dg.MaterializeResult()  # each partition's entries are its own (`add_partition_metadata`)

    return later_readings


def reading_metadata(wave: WaveDef, version: str, ruleset_hash: str, rows: list[dict], headline: dict) -> dict:
    """A later reading's partition: its counts, and every cell it reads differently from the headline."""
    status = Counter(r["status"] for r in rows)
    valid = [r for r in rows if r["status"] == "valid"]
    differs = [
        (r, head)
        for r in rows
        if (head := headline.get((r["operator"], r["probe"])))
        and (r["status"], r["excluded"], bool(r["detected_hard"]))
        != (head["status"], head["excluded"], bool(head["detected_hard"]))
    ]
    records = [
        dg.TableRecord(
            {
                "cell": f"[{r['operator']}|{r['probe']}]({partition_url(wave.name, r['operator'] + '|' + r['probe'])})",
                f"{wave.headline_ruleset} (headline)": _reading(head),
                version: _reading(r),
                "explain": explain_cell_command(wave.name, f"{r['operator']}|{r['probe']}") + f" --ruleset {version}",
            }
        )
        for r, head in differs[:SHOWN]
    ]
    schema = dg.TableSchema(
        columns=[
            dg.TableColumn("cell", "string"),
            dg.TableColumn(f"{wave.headline_ruleset} (headline)", "string"),
            dg.TableColumn(version, "string"),
            dg.TableColumn("explain", "string"),
        ]
    )
    return {
        "ruleset": f"{version} ({ruleset_hash})",
        "dagster/row_count": len(rows),
        "cells": ", ".join(f"{k} {v}" for k, v in sorted(status.items())),
        f"{HEADLINE_COLUMN} (valid cells)": f"{sum(bool(r['detected_hard']) for r in valid)} of {len(valid)}",
        "read differently from the headline": len(differs),
        "cells read differently": dg.MetadataValue.table(records, schema)
        if records
        else dg.MetadataValue.md("none: every cell has the headline's verdict"),
        **(
            {
                "not listed": f"{len(differs) - SHOWN} more cell(s): `SELECT * FROM cell_verdicts WHERE ruleset = '{version}'`"
            }
            if len(differs) > SHOWN
            else {}
        ),
    }


def _reading(row: dict) -> str:
    word = verdict_word(row)
    return f"{word}, {HEADLINE_COLUMN} {'yes' if row['detected_hard'] else 'no'}" if word == "valid" else word
