"""The published tables, generated from cell rows: structures first, Markdown last.

Rates render as the reference does, `55.1% (76/138)`, so a generated table can be compared line
for line with a published one.
"""

from judges.hard.funnel import FunnelRow, exclusion_appendix, funnel

# (header, funnel column) in the order of the wave-2 scoreboard.
WAVE2_COLUMNS = (
    ("wave1-mapping", "mapping"),
    ("flags anchored", "flags_anchored"),
    ("UNION", "detected_hard"),
    ("reacted", "reacted"),
    ("recovered", "recovered"),
    ("flags noticed (diag)", "flags_noticed"),
)
WAVE1_COLUMNS = (
    ("Sabot Score (hard)", "detected_hard"),
    ("reaction", "reacted"),
    ("recovery", "recovered"),
    ("recovery w/o detection (hard only)", "recovered_without_detection"),
)
def columns_for(ruleset: str):
    """Wave-1 rules have no FLAGS surface: their tables are the wave-1 funnel."""
    return WAVE1_COLUMNS if ruleset == "v0.1.3" else WAVE2_COLUMNS


GROUPINGS = {
    "framework_config": ("framework", "config"),
    "operator": ("framework", "operator"),
    "task_operator": ("framework", "config", "task", "operator"),
}


def fmt_rate(n: int, d: int, bold: bool = False) -> str:
    if not d:
        return "n/a (0/0)"
    pct = f"{100 * n / d:.1f}%"
    return f"**{pct}** ({n}/{d})" if bold else f"{pct} ({n}/{d})"


def fmt_pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def markdown_table(headers, rows) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]  # a pipe would end the cell
    return "\n".join(lines)


def entries_markdown(entries, columns) -> str:
    """A funnel table from stored entries ({group, valid, counts})."""
    rows = [[e["group"], e["valid"]] + [fmt_rate(e["counts"].get(c, 0), e["valid"]) for _, c in columns] for e in entries]
    return markdown_table(["group", "valid"] + [h for h, _ in columns], rows)


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
        [f.group, str(f.valid), fmt_rate(f.counts["strict"], f.valid, bold=True), fmt_rate(f.counts["detected_hard"], f.valid)]
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
