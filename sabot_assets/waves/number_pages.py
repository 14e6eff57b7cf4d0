"""One page per number of the headline board: the cells behind it, one click from the number.

The UI's partitions view can open one rectangle of operator x probe, so a number whose cells span
operators needs one link per operator (`numbers`). A published rate is one number, so it links one
page: written beside the report, served by the file server beside the UI, listing every cell it
counts (each opening its own `cell_verdicts` partition) and, per operator, the partitions view of
exactly those cells.
"""

import html
import re
from pathlib import Path

from judges.hard.tables import fmt_rate
from sabot.matrix import Cell
from sabot.registry import WaveDef
from sabot_assets.file_server.addresses import UI, report_url
from sabot_assets.file_server.record_pages import page
from sabot_assets.waves.ui_links import cells_by_operator, explain_command, operator_cells_url, partition_url

VALID = "valid"  # the denominator's page


def pages_dir(wave: str) -> Path:
    """Where a wave's number pages live, relative to the reports directory."""
    return Path(wave) / "cells"


def page_path(wave: str, group: str, column: str) -> Path:
    """Where a number's page lives, relative to the reports directory."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", group)
    return pages_dir(wave) / slug / f"{column}.html"


def _in_ui(address: str) -> str:
    """A UI address as a page on the file server opens it: relative ones through its /ui/ redirect."""
    return address if address.startswith("http") else f"/{UI}{address}"


def number_page(
    wave: WaveDef,
    ruleset: str,
    label: str,
    table: str,
    group: str,
    header: str,
    column: str,
    cells: list[Cell],
    valid: int,
) -> str:
    what = (
        "valid cells (the denominator)" if column == VALID else f"{header}: {fmt_rate(len(cells), valid, label=label)}"
    )
    parts = [
        f"<p>{html.escape(ruleset)}, {html.escape(label)}: {len(cells)} cell(s). Each opens its own <code>cell_verdicts</code> "
        "partition in the Dagster UI (verdict, §2 outcome, judge, baseline, events, model exchanges).</p>"
    ]
    if column != VALID:
        parts.append(
            f"<p>Over <a href='{html.escape(report_url(page_path(wave.name, group, VALID)))}'>the {valid} valid cells</a>.</p>"
        )
    for operator, probes in cells_by_operator(cells).items():
        items = "".join(
            f"<li><a href='{html.escape(_in_ui(partition_url(wave.name, f'{operator}|{p}')))}'>{html.escape(operator)}|{html.escape(p)}</a></li>"
            for p in probes
        )
        view = _in_ui(operator_cells_url(wave, operator, probes))
        parts.append(
            f"<h2>{html.escape(operator)}: {len(probes)}</h2><p><a href='{html.escape(view)}'>all {len(probes)} in the partitions view</a></p><ul>{items}</ul>"
        )
    reading = "" if ruleset == wave.headline_ruleset else f" --ruleset {ruleset}"
    parts.append(
        f"<p>In a terminal: <code>{html.escape(explain_command(wave.name, table, group, column if column != VALID else 'DETECTED_HARD'))}{reading}</code></p>"
    )
    return page(f"{wave.name} · {group} · {what}", "".join(parts))


def write_number_pages(
    reports: Path,
    wave: WaveDef,
    ruleset: str,
    label: str,
    table: str,
    behind: dict[str, dict[str, list[Cell]]],
    columns,
) -> dict[tuple[str, str], str]:
    """Write every number's page of one table; (group, column) -> its http address."""
    addresses = {}
    for group, cells in behind.items():
        valid = len(cells[VALID])
        for header, column in [(VALID, VALID), *columns]:
            relative = page_path(wave.name, group, column)
            (reports / relative).parent.mkdir(parents=True, exist_ok=True)
            (reports / relative).write_text(
                number_page(wave, ruleset, label, table, group, header, column, cells.get(column, []), valid)
            )
            addresses[(group, column)] = report_url(relative)
    return addresses
