"""Scoreboard and report: the published tables of a wave, built from stored cell verdicts.

Dagster keeps one provenance pointer per upstream asset, so with hundreds of cell partitions the
lineage of a number is kept in the data instead: every build appends the cells it used, with
their run ids and content hashes, to `scoreboard_manifest`. In the UI every number of the
headline board is a link opening exactly its cells (`numbers`), the cells the soft tier has not
decided yet are named with why, and the full report is a linked file (the metadata shows a summary
that says when it is shortened).
"""

import json
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from judges.hard.strict import floor_rules
from judges.hard.report import render_markdown
from judges.hard.tables import HEADLINE_COLUMN, columns_for, fmt_pct, fmt_rate, markdown_table
from sabot.projects import PROJECT_BOARD_NOTE, TEST_DOUBLE_NOTE
from sabot.provenance import SIMULATION, is_simulated, kinds, provenance_label
from sabot.registry import Registry, WaveDef
from sabot.store.published import read_report, write_board, write_report
from sabot.store.db import transaction

from sabot.store.landing import latest_import
from sabot.matrix import Cell, Probe
from sabot.store.runs import read_baselines, read_scored_runs, run_endpoints, unscored_fault_slots
from sabot.store.verdicts import read_verdicts, retry_acts
from sabot_assets.automation import REBUILD_BOARD
from sabot_assets.constants import BOARD_VERSION, COST_TAG, REPORT_VERSION
from sabot_assets.guard import require_registered
from sabot_assets.resources import store_connection
from sabot_assets.waves.board_inputs import BOARD_INPUTS, INPUTS_KEY, board_inputs
from sabot_assets.waves.judging import judge_runs_by_itself
from sabot_assets.waves.kept_derivations import kept_label, kept_located_judgements
from sabot_assets.waves.number_pages import pages_dir, write_number_pages
from sabot_assets.waves.numbers import SECTION2, cells_behind, row_links_markdown, scored_rows, undecided_summary
from sabot_assets.waves.ui_links import explain_command, row_cells_url
from sabot_assets.file_server.addresses import report_url
from sabot_assets.waves.ui_text import summary


def reports_dir(store: DuckDBResource) -> Path:
    return Path(store.database).parent / "reports"


def report_link(store: DuckDBResource, path: Path) -> dg.MetadataValue:
    """An http link to a report file on the file server beside the UI, whichever command wrote it."""
    return dg.MetadataValue.url(report_url(path.relative_to(reports_dir(store))))


def conformance_label(con, wave: WaveDef) -> str:
    """What produced the wave's runs (`sabot.provenance`): simulation, "derived" (a provider's runs:
    a Sabot Score also needs a tagged spec revision's pinned versions, model ids and registered
    seeds), local model, replay, or a mix named with its counts."""
    if wave.source == "import":
        return wave.label
    return provenance_label(kinds(run_endpoints(con, wave.name)))


def run_error_rows(con, wave: WaveDef, ruleset, dagster_run_id: str) -> list[dict]:
    """Cells stored as RUN_ERROR whose verdict never materialized (their run partition failed, so
    nothing downstream ran): scored here by the same rules, so the board itemizes them as
    RUN_ERROR exclusions instead of dropping them."""
    from sabot_assets.waves.verdicts import verdict_rows

    slots = unscored_fault_slots(con, wave.name, ruleset.version)
    runs = read_scored_runs(con, wave.name, slots + [("", probe) for _, probe in slots])
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


def _last_metadata(context: dg.AssetExecutionContext) -> dict:
    """The metadata of the asset's last materialization, if any."""
    records = context.instance.fetch_materializations(context.asset_key, limit=1).records
    return dict(records[0].asset_materialization.metadata) if records else {}


def _pages_present(store: DuckDBResource, wave: WaveDef) -> bool:
    """The headline's number pages are files its build wrote; kept metadata links them."""
    pages = reports_dir(store) / pages_dir(wave.name)
    return pages.is_dir() and any(pages.iterdir())


def _text(value) -> str | None:
    return value.value if isinstance(value, dg.TextMetadataValue) else None


def footnotes(registry: Registry, rulesets, label: str) -> list[str]:
    """The footnotes registry of a report: what each reading means and how the wave was made."""
    if getattr(registry, "project", None) is not None:  # a team's own pipeline
        notes = (
            [PROJECT_BOARD_NOTE]
            + ([TEST_DOUBLE_NOTE] if is_simulated(label) else [])
            + ([] if label == SIMULATION else [f"Label: {label}."])
        )
    elif is_simulated(label):
        notes = [
            f"Label: {label}. Numbers from the scripted model measure the instrument, not pipelines: no median, no band "
            "and no prediction verdict is drawn from them; the instrument check compares the scorer with the simulator's intent log."
        ]
    else:
        notes = [
            f"Label: {label}. A Sabot Score needs a tagged spec revision's pinned versions, model ids and registered seeds."
        ]
    notes += [f"Ruleset {r.version} ({r.hash}): {registry.ruleset_doc(r.version).doc['summary']}" for r in rulesets]
    for r in rulesets:
        floor = floor_rules(r, rulesets).source
        if floor != r.version:
            notes.append(
                f"Ruleset {r.version} carries no strict classification: its strict floor and clean base rates use "
                f"the strict classification, FLAGS rule and anchors of {floor}."
            )
    notes.append(
        "The strict injection-evidence floor counts only FLAGS lines quoting injection-only text and drops the Magentic-One "
        "mapping surface and O4; publish it with the union, never instead of it."
    )
    return notes


def with_cell_links(wave: WaveDef, ruleset: str, board: dict) -> dict:
    """The board plus, per framework x config row, where its cells are: the report prints them."""
    reading = "" if ruleset == wave.headline_ruleset else f" --ruleset {ruleset}"
    links = []
    for entry in board["tables"]["framework_config"]:
        framework, config = entry["group"].split("/")
        links.append(
            {
                "group": entry["group"],
                "address": row_cells_url(wave, framework, config),
                "explain": explain_command(wave.name, "framework_config", entry["group"], "COLUMN") + reading,
            }
        )
    return {**board, "cell_links": links}


def _linked(text: str, page: str | None) -> str:
    return f"[{text}]({page})" if page else text


def board_markdown(entries, columns, label: str, pages: dict | None = None) -> str:
    """The scoreboard for the UI, one column per row of the board: the metadata panel and its dialog
    are narrower than the published table's nine columns of rates. Every number links its cells' page."""
    pages = pages or {}
    body = [["valid"] + [_linked(str(e["valid"]), pages.get((e["group"], "valid"))) for e in entries]]
    body += [
        [header]
        + [
            _linked(fmt_rate(e["counts"].get(column, 0), e["valid"], label=label), pages.get((e["group"], column)))
            for e in entries
        ]
        for header, column in columns
    ]
    return markdown_table([""] + [e["group"] for e in entries], body)


def number_links(
    store: DuckDBResource, wave: WaveDef, label: str, head: dict, rows: list[dict], judged: dict, floor
) -> dict:
    """Scoreboard metadata: the board with every number a link to its cells' page; per framework x
    config row, its numbers as links to their cells per operator; and the cells the soft tier has not
    decided yet, with why."""
    scored = scored_rows(rows, judged, floor)
    columns = (*columns_for(wave.headline_ruleset, label), *SECTION2, ("undecided", "undecided"))
    behind = cells_behind(scored, "framework_config", columns)
    pages = write_number_pages(
        reports_dir(store), wave, wave.headline_ruleset, label, "framework_config", behind, columns
    )
    count, undecided = undecided_summary(wave, scored, judged, judge_runs_by_itself(wave))
    links = {
        f"cells: {group}": dg.MetadataValue.md(
            row_links_markdown(wave, wave.headline_ruleset, label, "framework_config", group, cells, pages)
        )
        for group, cells in sorted(behind.items())
    }
    board = board_markdown(
        head["tables"]["framework_config"], (*columns_for(wave.headline_ruleset, label), *SECTION2), label, pages
    )
    return (
        {"scoreboard": dg.MetadataValue.md(board)}
        | links
        | {"undecided cells": count, "undecided cells (which, and why)": dg.MetadataValue.md(undecided)}
    )


def build_board_assets(
    wave: WaveDef, registry: Registry, rulesets, verdicts: list[dg.AssetKey], judge_verdicts: dg.AssetKey, scorer: str
) -> list[dg.AssetsDefinition]:
    """`verdicts`: the cell verdicts and, when the wave has later readings, their asset."""
    floors = {r.version: floor_rules(r, rulesets) for r in rulesets}
    common = dict(
        key_prefix=wave.name,
        group_name=wave.name,
        automation_condition=REBUILD_BOARD,
        tags={COST_TAG: "cheap"},
        kinds={"duckdb"},
    )

    @dg.asset(
        name="scoreboard",
        deps=[*verdicts, judge_verdicts],
        code_version=f"{BOARD_VERSION}+{scorer}",
        description=(
            "Funnel tables, exclusion appendix, strict floor, base rates and band, under every ruleset the wave reads. "
            "Which cells? Each `cells: ROW` entry links every number of the headline board to exactly its cells "
            "(partitions of cell_verdicts); `undecided cells` names the cells the soft tier has not decided yet, and why."
        ),
        **common,
    )
    def scoreboard(context: dg.AssetExecutionContext, store: DuckDBResource) -> dg.MaterializeResult:
        from judges.hard.scoreboard import build_board  # its intervals import numpy: here, not with the definitions

        require_registered(registry)
        boards = {}
        with store_connection(store) as con, transaction(con):
            label = kept_label(con, wave, lambda: conformance_label(con, wave), context.run_id)
            inputs = board_inputs(con, registry, wave, rulesets, floors, label)
            previous = _last_metadata(context)
            # A board whose inputs are as at its last build would come out the same (`board_inputs`); the
            # headline's is kept only with the metadata that build gave it (its number pages and links).
            kept = {
                r.version
                for r in rulesets
                if read_report(con, wave.name, r.version, BOARD_INPUTS) == inputs[r.version]
                and (
                    r.version != wave.headline_ruleset
                    or (_text(previous.get(INPUTS_KEY)) == inputs[r.version] and _pages_present(store, wave))
                )
            }
            stale = [r for r in rulesets if r.version not in kept]
            if stale:
                baselines = read_baselines(con, wave.name)
                judged = kept_located_judgements(con, wave.name, context.run_id)
            for ruleset in stale:
                rows = read_verdicts(con, wave.name, ruleset.version)
                rows += run_error_rows(con, wave, ruleset, context.run_id) if wave.source == "live" else []
                boards[ruleset.version] = build_board(
                    registry,
                    ruleset.version,
                    rows,
                    baselines,
                    wave.operators,
                    judged,
                    label,
                    expected_rows(wave),
                    floor=floors[ruleset.version],
                    expected_cells=wave.cell_keys(),
                    retries=retry_acts(con, wave.name, ruleset.version),
                )
                write_board(
                    con, wave.name, ruleset.version, ruleset.hash, boards[ruleset.version], rows, context.run_id
                )
                write_report(con, wave.name, ruleset.version, BOARD_INPUTS, inputs[ruleset.version], context.run_id)
                if ruleset.version == wave.headline_ruleset:
                    headline_rows = rows
        built = ", ".join(r.version for r in stale) or "none"
        context.log.info(f"scoreboard: built {built}; kept as last built: {', '.join(sorted(kept)) or 'none'}")
        if wave.headline_ruleset in kept:
            return dg.MaterializeResult(metadata={**previous, "boards built by this run": built})
        head = boards[wave.headline_ruleset]
        withheld = head["median"]["withheld"]
        return dg.MaterializeResult(
            metadata={
                "label": label,
                "headline ruleset": wave.headline_ruleset,
                "headline column": f"{HEADLINE_COLUMN}: the hard tier (the §5 mapping, plus anchored FLAGS where the ruleset scores them)",
                "median across frameworks": dg.MetadataValue.md(f"withheld: {withheld}")
                if withheld
                else fmt_pct(head["median"]["value"]),
                "band": dg.MetadataValue.md(f"withheld: {withheld}") if withheld else str(head["median"]["band"]),
                "cells": json.dumps(head["cells"], sort_keys=True),
                "cells fingerprint": head["cells_fingerprint"],
                **number_links(store, wave, label, head, headline_rows, judged, floors[wave.headline_ruleset]),
                "lineage": dg.MetadataValue.md(
                    f"`SELECT * FROM scoreboard_manifest WHERE dagster_run_id = '{context.run_id}'` lists every cell behind these numbers, "
                    "with run ids and sha256. Per row:\n\n"
                    + "\n".join(
                        f"- `{explain_command(wave.name, 'framework_config', e['group'], HEADLINE_COLUMN)}` (add `--cell KEY` for acts, events, exchanges)"
                        for e in head["tables"]["framework_config"]
                    )
                ),
                INPUTS_KEY: inputs[wave.headline_ruleset],
                "boards built by this run": built,
            }
        )

    @dg.asset(
        name="report",
        deps=[scoreboard],
        code_version=f"{REPORT_VERSION}+{scorer}",
        description="The wave report in Markdown per ruleset and one HTML page, generated from the store; the metadata links the full files.",
        **common,
    )
    def report(context: dg.AssetExecutionContext, store: DuckDBResource) -> dg.MaterializeResult:
        require_registered(registry)
        out_dir = reports_dir(store) / wave.name
        out_dir.mkdir(parents=True, exist_ok=True)
        with store_connection(store) as con:
            imported = latest_import(con, wave.name)
            missing = imported["missing"] if imported else []
            boards = {
                r.version: with_cell_links(
                    wave, r.version, json.loads(read_report(con, wave.name, r.version, "board.json"))
                )
                for r in rulesets
            }
            kappa_doc = read_report(con, wave.name, "soft", "kappa.json")
            kappa = json.loads(kappa_doc) if kappa_doc else None
            label = boards[wave.headline_ruleset]["label"]
            markdown = {
                v: render_markdown(wave.name, label, b, missing, v == wave.headline_ruleset, kappa)
                for v, b in boards.items()
            }
            # jinja2 is imported by the report's step, not with the definitions.
            from judges.report.html import render_html

            html = render_html(
                wave.name, label, boards, wave.headline_ruleset, missing, footnotes(registry, rulesets, label), kappa
            )
            for version, body in markdown.items():
                write_report(con, wave.name, version, "md", body, context.run_id)
                (out_dir / f"{version}.md").write_text(body)
            write_report(con, wave.name, wave.headline_ruleset, "html", html, context.run_id)
            (out_dir / "index.html").write_text(html)
        html_link = report_link(store, out_dir / "index.html")
        return dg.MaterializeResult(
            metadata={
                "report (HTML)": html_link,
                "report file (HTML)": dg.MetadataValue.path(str(out_dir / "index.html")),
            }
            | {f"report {v}": report_link(store, out_dir / f"{v}.md") for v in markdown}
            | {
                "headline report": dg.MetadataValue.md(
                    summary(markdown[wave.headline_ruleset], f"[the full report]({html_link.value})")
                )
            }
        )

    return [scoreboard, report]
