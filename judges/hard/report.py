"""The wave report in Markdown, rendered from a board (never hand-edited)."""

from judges.hard.tables import columns_for, entries_markdown as _funnel_table, fmt_pct, fmt_rate, markdown_table


def render_markdown(wave: str, label: str, board: dict, missing: list[str], headline: bool) -> str:
    columns = columns_for(board["ruleset"])
    med = board["median"]
    out = [
        f"# Sabot — {wave}, ruleset {board['ruleset']}{' (headline)' if headline else ' (alternative reading)'}",
        "",
        f"Label: **{label}**. Generated from the store; do not edit. Headline = `detected_hard` "
        "(hard tier: the §5 mapping, plus anchored FLAGS where the ruleset scores them). "
        "Denominator everywhere = valid injected faults; exclusions are itemized below, never counted as misses.",
        "",
        f"Cells: {', '.join(f'{k} {v}' for k, v in sorted(board['cells'].items()))}. "
        f"Median hard-tier score across frameworks (configs pooled): **{fmt_pct(med['value'])}** "
        f"({', '.join(f'{k} {fmt_pct(v)}' for k, v in sorted(med['per_framework'].items()))}); band: `{med['band']}`.",
        "",
        "## Scoreboard — by framework x config",
        "",
        _funnel_table(board["tables"]["framework_config"], columns),
        "",
        "## By operator",
        "",
        _funnel_table(board["tables"]["operator"], columns),
        "",
        "## By task x operator",
        "",
        _funnel_table(board["tables"]["task_operator"], columns),
        "",
        "## Exclusion appendix",
        "",
        markdown_table(["framework", "config", "task", "operator", "code", "count"], board["exclusions"]) if board["exclusions"] else "No excluded cells.",
        "",
        "## Strict injection-evidence floor (a floor, published with the union, never instead of it)",
        "",
        _funnel_table(board["tables"]["framework_config"], (("strict floor", "strict"), ("published union", "detected_hard"))),
        "",
        "Coverage-adjusted (cells with no injection-only anchor dropped):",
        "",
        _funnel_table(board["covered_floor"], (("strict floor over covered cells", "strict"),)),
        "",
        f"## Clean-baseline base rates of the anchor rules ({board['baselines_scanned']} baselines scanned)",
        "",
        markdown_table(
            ["operator", "registered anchors fire", "strict anchors fire"],
            [[op, fmt_rate(*board["base_rates"]["anchor"][op]), fmt_rate(*board["base_rates"]["strict"][op])] for op in sorted(board["base_rates"]["anchor"])],
        ),
        "",
        markdown_table(
            ["task", "registered anchors fire", "strict anchors fire"],
            [[t, fmt_rate(*board["base_rates_by_task"]["anchor"][t]), fmt_rate(*board["base_rates_by_task"]["strict"][t])] for t in sorted(board["base_rates_by_task"]["anchor"])],
        ),
        "",
        "## Missing from the corpus",
        "",
        "\n".join(f"- `{path}`" for path in missing) if missing else "Nothing missing.",
        "",
    ]
    return "\n".join(out)
