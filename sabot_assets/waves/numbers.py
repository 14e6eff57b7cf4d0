"""Which cells stand behind each number of a scoreboard, as links the Dagster UI opens.

A number is a count of cells over the row's valid cells. Membership is read with the funnel's own
per-cell indicators (`judges.hard.funnel.derived_counts`), over the same rows the board counted
(`with_strict`, `with_soft`, carved-out cells left out, as `build_board` does), so a link lists
exactly the cells its number counts. Each link opens the cells of one operator (see `ui_links`).
"""

from judges.hard.funnel import derived_counts, group_key, is_valid, with_soft
from judges.hard.strict import with_strict
from judges.hard.tables import GROUPINGS, columns_for, markdown_table
from sabot.matrix import Cell, Probe
from sabot.registry import WaveDef
from sabot_assets.waves.ui_links import cells_by_operator, explain_command, operator_cells_url, partition_url

UNDECIDED = ("undecided", "undecided")  # valid cells with no hard act and no judge verdict
SECTION2 = (("DETECTED_SOFT (judge only)", "detected_soft"), ("MISSED", "missed"))  # §2's soft-tier outcomes
LISTED_KEYS = 40  # undecided cells named in the UI summary; the rest are counted, with a marker


def scored_rows(rows: list[dict], judged: dict, floor) -> list[dict]:
    """The rows a board counts: carved-out cells out, strict floor and soft tier read in."""
    scored = [r for r in rows if r["status"] != "carved_out"]
    return with_soft(with_strict(floor.strict, floor.flags, scored), judged)


def cell_of(row: dict) -> Cell:
    return Cell(row["operator"], Probe.parse(row["probe"]))


def cells_behind(scored: list[dict], table: str, columns) -> dict[str, dict[str, list[Cell]]]:
    """group -> {"valid": its denominator cells, column: its numerator cells} for one table."""
    out: dict[str, dict[str, list[Cell]]] = {}
    for row in scored:
        if not is_valid(row):
            continue
        entry = out.setdefault(group_key(row, GROUPINGS[table]), {"valid": []})
        entry["valid"].append(cell_of(row))
        counts = derived_counts(row)
        for _, column in columns:
            if counts.get(column):
                entry.setdefault(column, []).append(cell_of(row))
    return out


def _linked(wave: WaveDef, operator: str, cells: list[Cell]) -> str:
    probes = [c.probe.key for c in cells if c.operator == operator]
    return f"[{len(probes)}]({operator_cells_url(wave, operator, probes)})" if probes else "0"


def row_links_markdown(
    wave: WaveDef,
    ruleset: str,
    label: str,
    table: str,
    group: str,
    cells: dict[str, list[Cell]],
    pages: dict | None = None,
) -> str:
    """One scoreboard row: per operator, each number a link opening exactly its cells; each total a
    link to its number's page (`number_pages`: every cell it counts, across operators)."""
    pages = pages or {}
    columns = [("valid", "valid"), *columns_for(ruleset, label), *SECTION2, UNDECIDED]
    operators = sorted({c.operator for c in cells["valid"]})
    body = [[op] + [_linked(wave, op, cells.get(column, [])) for _, column in columns] for op in operators]
    totals = [(len(cells.get(column, [])), pages.get((group, column))) for _, column in columns]
    body.append(["all"] + [f"[{n}]({page})" if page else str(n) for n, page in totals])
    return "\n\n".join(
        [
            f"**{group}** ({ruleset}, {label}): every count is a link opening exactly its cells on `cell_verdicts`, one operator "
            f"at a time; a total opens the page of all its cells; a rate is its column's count over `valid`. The rest of the chain, per number: "
            f"`{explain_command(wave.name, table, group, 'COLUMN')}`, then `--cell KEY` for acts, events and model exchanges.",
            markdown_table(["operator"] + [h for h, _ in columns], body),
        ]
    )


def undecided_summary(wave: WaveDef, scored: list[dict], judged: dict, judge_automatic: bool) -> tuple[int, str]:
    """How many valid cells the soft tier has not decided yet, and why, each cell a link."""
    undecided = [r for r in scored if is_valid(r) and derived_counts(r)["undecided"]]
    if not undecided:
        return 0, "none: every valid cell has a hard act or a judge verdict"
    reasons: dict[str, list[Cell]] = {}
    for row in undecided:
        verdict = judged.get((row["operator"], row["probe"]))
        if row.get("soft_pre_injection"):
            why = "the judge's notice quotes text written before the fault was planted: no notice of the planted fault"
        elif verdict is not None:
            why = f"judge exclusion ({verdict['reason'] or verdict['status']})"
        elif wave.source == "import":
            why = "the corpus carries no judge verdict for it (the reference judged only the cells its union missed)"
        elif judge_automatic:
            why = "not judged yet: the rescore sensor judges it once its fault run is stored"
        else:
            why = "not judged yet: a paid judge runs only when launched (materialize judge_verdicts for these cells)"
        reasons.setdefault(why, []).append(cell_of(row))
    lines = [
        f"{len(undecided)} valid cell(s) have neither a hard act nor a judge verdict, so soft notice, MISSED and "
        "recovery-without-detection are lower bounds until they are judged:"
    ]
    for why, cells in sorted(reasons.items()):
        shown = [f"[{c.key}]({partition_url(wave.name, c.key, 'judge_verdicts')})" for c in cells[:LISTED_KEYS]]
        more = (
            f" … [shortened: {LISTED_KEYS} of {len(cells)} cells named; per operator: the `undecided` links of each row]"
            if len(cells) > LISTED_KEYS
            else ""
        )
        lines.append(f"- {why}: {len(cells)} — " + ", ".join(shown) + more)
        by_op = cells_by_operator(cells)
        lines.append(
            "  - open them: "
            + ", ".join(
                f"[{op} ({len(p)})]({operator_cells_url(wave, op, p, 'judge_verdicts')})" for op, p in by_op.items()
            )
        )
    return len(undecided), "\n".join(lines)
