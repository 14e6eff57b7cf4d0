"""Scoreboard and report: the published tables of a wave, built from stored cell verdicts.

Dagster keeps one provenance pointer per upstream asset, so with hundreds of cell partitions the
lineage of a number is kept in the data instead: every build appends the cells it used, with
their run ids and content hashes, to `scoreboard_manifest`.
"""

import json
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from judges.hard.board import build_board
from judges.hard.report import render_markdown
from judges.hard.tables import columns_for, entries_markdown, fmt_pct
from sabot.registry import Registry, WaveDef
from sabot.store.board import read_report, write_board, write_report
from sabot.store.db import transaction
from sabot.store.landing import latest_import
from sabot.store.runs import read_baselines
from sabot.store.verdicts import read_verdicts
from sabot_assets.automation import REBUILD_BOARD
from sabot_assets.constants import BOARD_VERSION, COST_TAG, REPORT_VERSION
from sabot_assets.resources import store_connection


def build_board_assets(wave: WaveDef, registry: Registry, rulesets, cell_verdicts: dg.AssetKey, scorer: str) -> list[dg.AssetsDefinition]:
    common = dict(key_prefix=wave.name, group_name=wave.name, automation_condition=REBUILD_BOARD, tags={COST_TAG: "cheap"}, kinds={"duckdb"})

    @dg.asset(name="scoreboard", deps=[cell_verdicts], code_version=f"{BOARD_VERSION}+{scorer}",
              description="Funnel tables, exclusion appendix, strict floor, base rates and band, under every ruleset the wave reads.", **common)
    def scoreboard(context: dg.AssetExecutionContext, store: DuckDBResource) -> dg.MaterializeResult:
        boards = {}
        with store_connection(store) as con:
            baselines = read_baselines(con, wave.name)
            with transaction(con):
                for ruleset in rulesets:
                    rows = read_verdicts(con, wave.name, ruleset.version)
                    boards[ruleset.version] = build_board(registry, ruleset.version, rows, baselines, wave.operators)
                    write_board(con, wave.name, ruleset.version, ruleset.hash, boards[ruleset.version], rows, context.run_id)
        head = boards[wave.headline_ruleset]
        return dg.MaterializeResult(
            metadata={
                "label": wave.label,
                "headline ruleset": wave.headline_ruleset,
                "median across frameworks": fmt_pct(head["median"]["value"]),
                "band": str(head["median"]["band"]),
                "cells": json.dumps(head["cells"], sort_keys=True),
                "cells fingerprint": head["cells_fingerprint"],
                "scoreboard": dg.MetadataValue.md(entries_markdown(head["tables"]["framework_config"], columns_for(wave.headline_ruleset))),
                "lineage": dg.MetadataValue.md(
                    f"`SELECT * FROM scoreboard_manifest WHERE dagster_run_id = '{context.run_id}'` lists every cell behind these numbers, with run ids and sha256."
                ),
            }
        )

    @dg.asset(name="report", deps=[scoreboard], code_version=f"{REPORT_VERSION}+{scorer}",
              description="The wave report in Markdown per ruleset, generated from the store.", **common)
    def report(context: dg.AssetExecutionContext, store: DuckDBResource) -> dg.MaterializeResult:
        paths = {}
        with store_connection(store) as con:
            imported = latest_import(con, wave.name)
            missing = imported["missing"] if imported else []
            for ruleset in rulesets:
                board = json.loads(read_report(con, wave.name, ruleset.version, "board.json"))
                body = render_markdown(wave.name, wave.label, board, missing, ruleset.version == wave.headline_ruleset)
                write_report(con, wave.name, ruleset.version, "md", body, context.run_id)
                path = Path(store.database).parent / "reports" / wave.name / f"{ruleset.version}.md"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(body)
                paths[ruleset.version] = path
        return dg.MaterializeResult(
            metadata={f"report {v}": dg.MetadataValue.path(str(p)) for v, p in paths.items()}
            | {"headline report": dg.MetadataValue.md(paths[wave.headline_ruleset].read_text()[:20000])}
        )

    return [scoreboard, report]
