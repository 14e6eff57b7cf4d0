"""The published tables, generated from cell rows: structures first, Markdown last.

Rates render as the reference does, `55.1% (76/138)`, so a generated table can be compared line
for line with a published one. A simulated wave's rates carry the word on every number,
`55.1% (76/138, simulation)`, and its headers never use the standard's name for a finding.
"""

from judges.hard.funnel import FunnelRow, exclusion_appendix, funnel
from judges.labels import marked
from sabot.provenance import is_simulated

# The headline column's one name, in every table, the UI and `sabot explain` (SPEC §2's
# DETECTED_HARD; under wave-2 rules it is §10.5's union of the mapping and anchored FLAGS).
HEADLINE_COLUMN = "DETECTED_HARD"
# (header, funnel column) in the order of the wave-2 scoreboard.
WAVE2_COLUMNS = (
    ("wave1-mapping", "mapping"),
    ("flags anchored", "flags_anchored"),
    (HEADLINE_COLUMN, "detected_hard"),
    ("reacted", "reacted"),
    ("recovered", "recovered"),
    ("flags noticed (diag)", "flags_noticed"),
)
WAVE1_COLUMNS = (
    (HEADLINE_COLUMN, "detected_hard"),
    ("reaction", "reacted"),
    ("recovery", "recovered"),
    ("recovery w/o hard detection (hard-only reading)", "recovered_without_hard"),
)
# §2 as the spec defines it: hard and soft never blended, MISSED, the companions over |valid|.
SECTION2_COLUMNS = (
    (HEADLINE_COLUMN, "detected_hard"),
    ("DETECTED_SOFT (not hard)", "detected_soft"),
    ("MISSED", "missed"),
    ("soft notice (hard ∪ soft)", "soft_notice"),
    ("reacted", "reacted"),
    ("recovered", "recovered"),
    ("recovery w/o detection (neither hard nor soft)", "recovered_without_detection"),
    ("judged (soft tier ruled)", "judged"),
    ("undecided (no hard act, not judged)", "undecided"),
)


def columns_for(ruleset: str, label: str | None = None):
    """Wave-1 rules have no FLAGS surface: their tables are the wave-1 funnel. The headline is
    DETECTED_HARD under every label, never a "Sabot Score" on a table (`label` kept for callers)."""
    return WAVE1_COLUMNS if ruleset == "v0.1.3" else WAVE2_COLUMNS


GROUPINGS = {
    "framework_config": ("framework", "config"),
    "operator": ("framework", "operator"),
    "task_operator": ("framework", "config", "task", "operator"),
}


def fmt_rate(n: int, d: int, bold: bool = False, label: str | None = None) -> str:
    tag = ", simulation" if is_simulated(label) else ""
    if not d:
        return f"n/a (0/0{tag})"
    pct = f"{100 * n / d:.1f}%"
    return f"**{pct}** ({n}/{d}{tag})" if bold else f"{pct} ({n}/{d}{tag})"


def fmt_gap(n: int, d: int, label: str | None = None) -> str:
    """The override gap: soft notice rate - hard rate, in points, over the same |valid|."""
    tag = " (simulation)" if is_simulated(label) else ""
    return f"n/a{tag}" if not d else f"{100 * n / d:+.1f} pp{tag}"


def fmt_pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def markdown_table(headers, rows) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += [
        "| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows
    ]  # a pipe would end the cell
    return "\n".join(lines)


def entries_markdown(entries, columns, label: str | None = None) -> str:
    """A funnel table from stored entries ({group, valid, counts})."""
    rows = [
        [e["group"], e["valid"]] + [fmt_rate(e["counts"].get(c, 0), e["valid"], label=label) for _, c in columns]
        for e in entries
    ]
    return markdown_table(["group", "valid"] + [h for h, _ in columns], rows)


def section2_markdown(entries, label: str | None = None) -> str:
    """The §2 funnel: every companion over |valid|, the override gap in points, judged beside."""
    headers = (
        ["group", "valid"]
        + [h for h, _ in SECTION2_COLUMNS[:4]]
        + ["override gap (soft notice − hard)"]
        + [h for h, _ in SECTION2_COLUMNS[4:]]
    )
    rows = []
    for e in entries:
        cells = [section2_cell(e, c, label) for _, c in SECTION2_COLUMNS]
        rows.append([e["group"], e["valid"], *cells[:4], section2_gap(e, label), *cells[4:]])
    return markdown_table(headers, rows)


def section2_cell(entry: dict, column: str, label: str | None = None) -> str:
    """One §2 rate, marked as a lower bound while the row has undecided cells (`judges.labels`)."""
    text = fmt_rate(entry["counts"].get(column, 0), entry["valid"], label=label)
    return marked(text, column, entry["counts"].get("undecided", 0))


def section2_gap(entry: dict, label: str | None = None) -> str:
    """The override gap (= DETECTED_SOFT over |valid|), a lower bound as DETECTED_SOFT is."""
    return marked(
        fmt_gap(entry["counts"].get("detected_soft", 0), entry["valid"], label),
        "detected_soft",
        entry["counts"].get("undecided", 0),
    )


def funnel_lines(funnel_rows: list[FunnelRow], columns) -> list[list[str]]:
    return [[f.group, str(f.valid)] + [fmt_rate(f.counts.get(c, 0), f.valid) for _, c in columns] for f in funnel_rows]


def funnel_markdown(rows, grouping: str, columns=WAVE2_COLUMNS) -> str:
    body = funnel_lines(funnel(rows, GROUPINGS[grouping]), columns)
    return markdown_table(["group", "valid"] + [h for h, _ in columns], body)


def exclusion_markdown(rows) -> str:
    return markdown_table(["framework", "config", "task", "operator", "code", "count"], exclusion_appendix(rows))


def strict_lines(rows) -> list[list[str]]:
    """Floor by framework x config: valid, strict floor, union."""
    return [
        [
            f.group,
            str(f.valid),
            fmt_rate(f.counts["strict"], f.valid, bold=True),
            fmt_rate(f.counts["detected_hard"], f.valid),
        ]
        for f in funnel(rows, GROUPINGS["framework_config"])
    ]


def coverage_lines(rows) -> list[list[str]]:
    """Coverage-adjusted floor: blind cells (no injection-only anchor) dropped from the denominator."""
    covered = {f.group: f for f in funnel([r for r in rows if not r["blind"]], GROUPINGS["framework_config"])}
    lines = []
    for f in funnel(rows, GROUPINGS["framework_config"]):
        c = covered.get(f.group)
        n = c.valid if c else 0
        floor = fmt_rate(c.counts["strict"], n, bold=True) if c else "n/a (0/0)"
        lines.append([f.group, f"{n}/{f.valid}", f"{100 * n / f.valid:.1f}%", floor, fmt_pct(f.rate("strict"))])
    return lines


def cell_links_markdown(links: list[dict]) -> str:
    """Where each scoreboard row's cells are, for a reader of the report: the Dagster UI view of the
    row's cells (a link when the UI's address is known) and the command that lists a number's cells."""

    def where(address: str) -> str:
        return f"[open in the UI]({address})" if address.startswith("http") else f"`{address}` (after the UI's address)"

    return markdown_table(
        ["group", "its cells in the Dagster UI", "a number's cells"],
        [[link["group"], where(link["address"]), f"`{link['explain']}`"] for link in links],
    )
