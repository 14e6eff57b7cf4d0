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
from judges.hard.strict import floor_rules
from judges.hard.report import render_markdown
from judges.report.html import render_html
from judges.hard.tables import columns_for, entries_markdown, fmt_pct
from sabot.projects import PROJECT_BOARD_NOTE, TEST_DOUBLE_NOTE
from sabot.registry import Registry, WaveDef
from sabot.store.board import read_report, write_board, write_report
from sabot.store.db import transaction
from sabot.store.judging import read_judgements
from sabot.store.landing import latest_import
from sabot.matrix import Cell, Probe
from sabot.store.runs import endpoints, read_baselines, read_runs, unscored_fault_slots
from sabot.store.verdicts import read_verdicts
from sabot_assets.automation import REBUILD_BOARD
from sabot_assets.constants import BOARD_VERSION, COST_TAG, REPORT_VERSION
from sabot_assets.guard import require_registered
from sabot_assets.resources import store_connection


def conformance_label(con, wave: WaveDef) -> str:
    """"simulation" if any run used the scripted model; a real provider's runs are "derived": a Sabot
    Score also needs a tagged spec revision's pinned versions, model ids and registered seeds."""
    if wave.source == "import":
        return wave.label
    used = endpoints(con, wave.name)
    return "simulation" if not used or any(e.startswith("simulation") for e in used) else "derived"


def run_error_rows(con, wave: WaveDef, ruleset, dagster_run_id: str) -> list[dict]:
    """Cells stored as RUN_ERROR whose verdict never materialized (their run partition failed, so
    nothing downstream ran): scored here by the same rules, so the board itemizes them as
    RUN_ERROR exclusions instead of dropping them."""
    from sabot_assets.waves.verdicts import verdict_rows

    slots = unscored_fault_slots(con, wave.name, ruleset.version)
    runs = read_runs(con, wave.name, slots + [("", probe) for _, probe in slots])
    rows = []
    for operator, probe in slots:
        cell = Cell(operator, Probe.parse(probe))
        row, _ = verdict_rows(wave, ruleset, cell, runs.get((operator, probe)), runs.get(("", probe)), dagster_run_id)
        if row["excluded"] == "RUN_ERROR":
            rows.append(row)
    return rows


def expected_rows(wave: WaveDef) -> list[str]:
    """Every scoreboard row the wave registers (framework x config): the median needs them all."""
    return [f"{fw}/{cfg}" for fw in wave.frameworks for cfg in wave.configs]


def footnotes(registry: Registry, rulesets, label: str) -> list[str]:
    """The footnotes registry of a report: what each reading means and how the wave was made."""
    if getattr(registry, "project", None) is not None:  # a team's own pipeline
        notes = [PROJECT_BOARD_NOTE] + ([TEST_DOUBLE_NOTE] if label == "simulation" else [f"Label: {label}."])
    elif label == "simulation":
        notes = ["Label: simulation. Numbers from the scripted model measure the instrument, not pipelines: no median, no band and no prediction verdict is drawn from them; the instrument check compares the scorer with the simulator's intent log."]
    else:
        notes = [f"Label: {label}. A Sabot Score needs a tagged spec revision's pinned versions, model ids and registered seeds."]
    notes += [f"Ruleset {r.version} ({r.hash}): {registry.ruleset_doc(r.version).doc['summary']}" for r in rulesets]
    for r in rulesets:
        floor = floor_rules(r, rulesets).source
        if floor != r.version:
            notes.append(f"Ruleset {r.version} carries no strict classification: its strict floor and clean base rates use the strict classification, FLAGS rule and anchors of {floor}.")
    notes.append("The strict injection-evidence floor counts only FLAGS lines quoting injection-only text and drops the Magentic-One mapping surface and O4; publish it with the union, never instead of it.")
    return notes


def build_board_assets(wave: WaveDef, registry: Registry, rulesets, cell_verdicts: dg.AssetKey, judge_verdicts: dg.AssetKey, scorer: str) -> list[dg.AssetsDefinition]:
    floors = {r.version: floor_rules(r, rulesets) for r in rulesets}
    common = dict(key_prefix=wave.name, group_name=wave.name, automation_condition=REBUILD_BOARD, tags={COST_TAG: "cheap"}, kinds={"duckdb"})

    @dg.asset(name="scoreboard", deps=[cell_verdicts, judge_verdicts], code_version=f"{BOARD_VERSION}+{scorer}",
              description="Funnel tables, exclusion appendix, strict floor, base rates and band, under every ruleset the wave reads.", **common)
    def scoreboard(context: dg.AssetExecutionContext, store: DuckDBResource) -> dg.MaterializeResult:
        require_registered(registry)
        boards = {}
        with store_connection(store) as con:
            baselines = read_baselines(con, wave.name)
            label = conformance_label(con, wave)
            judged = {(op, probe): v for (op, probe, variant), v in read_judgements(con, wave.name, variant=0).items()}
            with transaction(con):
                for ruleset in rulesets:
                    rows = read_verdicts(con, wave.name, ruleset.version)
                    rows += run_error_rows(con, wave, ruleset, context.run_id) if wave.source == "live" else []
                    boards[ruleset.version] = build_board(registry, ruleset.version, rows, baselines, wave.operators, judged, label, expected_rows(wave), floor=floors[ruleset.version])
                    write_board(con, wave.name, ruleset.version, ruleset.hash, boards[ruleset.version], rows, context.run_id)
        head = boards[wave.headline_ruleset]
        return dg.MaterializeResult(
            metadata={
                "label": label,
                "headline ruleset": wave.headline_ruleset,
                "median across frameworks": head["median"]["withheld"] or fmt_pct(head["median"]["value"]),
                "band": head["median"]["withheld"] or str(head["median"]["band"]),
                "cells": json.dumps(head["cells"], sort_keys=True),
                "cells fingerprint": head["cells_fingerprint"],
                "scoreboard": dg.MetadataValue.md(entries_markdown(head["tables"]["framework_config"], columns_for(wave.headline_ruleset, label), label)),
                "lineage": dg.MetadataValue.md(
                    f"`SELECT * FROM scoreboard_manifest WHERE dagster_run_id = '{context.run_id}'` lists every cell behind these numbers, with run ids and sha256. Per row:\n\n"
                    + "\n".join(f"- `sabot explain {wave.name} framework_config {e['group']} detected_hard` (add `--cell KEY` for acts, events, exchanges)" for e in head["tables"]["framework_config"])
                ),
            }
        )

    @dg.asset(name="report", deps=[scoreboard], code_version=f"{REPORT_VERSION}+{scorer}",
              description="The wave report in Markdown per ruleset, generated from the store.", **common)
    def report(context: dg.AssetExecutionContext, store: DuckDBResource) -> dg.MaterializeResult:
        require_registered(registry)
        out_dir = Path(store.database).parent / "reports" / wave.name
        out_dir.mkdir(parents=True, exist_ok=True)
        with store_connection(store) as con:
            imported = latest_import(con, wave.name)
            missing = imported["missing"] if imported else []
            boards = {r.version: json.loads(read_report(con, wave.name, r.version, "board.json")) for r in rulesets}
            kappa_doc = read_report(con, wave.name, "soft", "kappa.json")
            kappa = json.loads(kappa_doc) if kappa_doc else None
            label = boards[wave.headline_ruleset]["label"]
            markdown = {v: render_markdown(wave.name, label, b, missing, v == wave.headline_ruleset, kappa) for v, b in boards.items()}
            html = render_html(wave.name, label, boards, wave.headline_ruleset, missing, footnotes(registry, rulesets, label))
            for version, body in markdown.items():
                write_report(con, wave.name, version, "md", body, context.run_id)
                (out_dir / f"{version}.md").write_text(body)
            write_report(con, wave.name, wave.headline_ruleset, "html", html, context.run_id)
            (out_dir / "index.html").write_text(html)
        return dg.MaterializeResult(
            metadata={"report (HTML)": dg.MetadataValue.path(str(out_dir / "index.html"))}
            | {f"report {v}": dg.MetadataValue.path(str(out_dir / f"{v}.md")) for v in markdown}
            | {"headline report": dg.MetadataValue.md(markdown[wave.headline_ruleset][:20000])}
        )

    return [scoreboard, report]
