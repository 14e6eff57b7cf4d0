"""The wave report in Markdown, rendered from a board (never hand-edited)."""

from judges.hard.tables import (
    HEADLINE_COLUMN,
    cell_links_markdown,
    columns_for,
    entries_markdown,
    fmt_pct,
    fmt_rate,
    markdown_table,
    section2_markdown,
)
from judges.labels import INTERVALS, board_labels, kappa_label
from sabot.projects import PROJECT_BOARD_NOTE, TEST_DOUBLE_NOTE
from sabot.provenance import is_simulated


def _interval(bounds) -> str:
    lo, hi = bounds
    return "n/a" if lo != lo or hi != hi else f"[{100 * lo:.1f}, {100 * hi:.1f}]"


def median_line(board: dict) -> str:
    """§7's median and band, or why they are withheld (simulation, or scoreboard rows missing)."""
    med = board["median"]
    if board.get("project"):
        return PROJECT_BOARD_NOTE
    if med.get("withheld"):
        return f"No median across frameworks and no band: {med['withheld']}."
    per = ", ".join(f"{k} {fmt_pct(v)}" for k, v in sorted(med["per_framework"].items()))
    return f"Median hard-tier Sabot Score across frameworks (configs pooled): **{fmt_pct(med['value'])}** ({per}); band: `{med['band']}`."


def labels_of(board: dict) -> dict:
    """The board's caveat labels (`judges.labels`), as stored with it."""
    return board.get("labels") or board_labels(board)


def soft_section(board: dict, kappa: dict | None) -> list[str]:
    """The §2 funnel with the soft tier, never blended into the headline, labelled with its reliability."""
    labels = labels_of(board)
    confidence = kappa_label(kappa, board.get("judge_backends", ()))["text"]
    confidence = (
        confidence.replace("low-confidence", "**low-confidence**") if "low-confidence" in confidence else confidence
    )
    backends = ", ".join(board.get("judge_backends", [])) or "none"
    early = [labels["pre_injection_note"], ""] if labels["pre_injection_note"] else []
    return [
        f"## The §2 funnel (judge: {backends}) — the soft tier separate from the headline",
        "",
        confidence + ". Every rate is over |valid|, as §2 defines it; `judged` counts the valid cells a judge "
        "ruled on, `undecided` those with neither a hard act nor a judge verdict. " + labels["lower_bound_note"],
        "",
        section2_markdown(board["tables"]["framework_config"], board.get("label")),
        "",
        *early,
    ]


def retry_section(board: dict) -> list[str]:
    """How the ruleset's retry-reason rule read the retries and re-plans (acts, not cells)."""
    tally = board.get("retries")
    if not tally or not (tally["counted"] or tally["not_counted"]):
        return []
    rows = [["counted as a detection act", tally["counted"]]] + [
        [f"not counted: {why}", n] for why, n in sorted(tally["not_counted"].items())
    ]
    return [
        "## Retries and re-plans under this ruleset's retry-reason rule",
        "",
        "Acts, not cells: a cell with an uncounted retry may still be detected by another act. An uncounted retry still "
        "counts as a corrective act for REACTED.",
        "",
        markdown_table(["retry or re-plan", "acts"], rows),
        "",
    ]


def uncertainty_rows(board: dict, label: str) -> list[list[str]]:
    rows = []
    for e in board["tables"]["framework_config"]:
        replicate = board.get("replicate_bootstrap", {}).get(e["group"])
        task_why = board.get("cluster_bootstrap_not_estimable", {}).get(e["group"])
        rows.append(
            [
                e["group"],
                fmt_rate(e["counts"]["detected_hard"], e["valid"], label=label),
                _interval(e["wilson"]["detected_hard"]),
                task_why or _interval(board["cluster_bootstrap"][e["group"]][1:]),
                (replicate.get("not_estimable") or _interval(replicate["interval"][1:])) if replicate else "n/a",
            ]
        )
    return rows


def cell_links_section(board: dict) -> list[str]:
    """Which cells stand behind the numbers, when the board carries the addresses (`cell_links`)."""
    if not board.get("cell_links"):
        return []
    return [
        "## Cells behind the numbers",
        "",
        "Every number is a count of cells; each row's cells, with their own verdicts, acts and the runs they read, are here "
        "(in the UI the scoreboard links every number to exactly its cells). COLUMN is any header above, e.g. DETECTED_HARD.",
        "",
        cell_links_markdown(board["cell_links"]),
        "",
    ]


def render_markdown(
    wave: str, label: str, board: dict, missing: list[str], headline: bool, kappa: dict | None = None
) -> str:
    columns = columns_for(board["ruleset"], label)
    simulated = is_simulated(label)

    def _funnel_table(entries, cols):
        return entries_markdown(entries, cols, label)

    out = [
        f"# Sabot — {wave}, ruleset {board['ruleset']}{' (headline)' if headline else ' (alternative reading)'}",
        "",
        f"Ruleset {board['ruleset']}: {labels_of(board)['ruleset_registered']}.",
        "",
        f"Label: **{label}**. Generated from the store; do not edit. Headline = `DETECTED_HARD` "
        "(hard tier: the §5 mapping, plus anchored FLAGS where the ruleset scores them). "
        "Denominator everywhere = valid injected faults; exclusions are itemized below, never counted as misses.",
        "",
        *([f"**{TEST_DOUBLE_NOTE}**", ""] if simulated and board.get("project") else []),
        *(
            [
                "**Simulation: an instrument check, not a finding.** The scripted model's rates are set by hand; "
                "these tables show what the scorer reads from simulated runs, and the instrument check (the scorer's "
                "agreement with the simulator's intent log) is the wave's result.",
                "",
            ]
            if simulated and not board.get("project")
            else []
        ),
        f"Cells: {', '.join(f'{k} {v}' for k, v in sorted(board['cells'].items()))}. " + median_line(board),
        "",
        "## Scoreboard — by framework x config",
        "",
        _funnel_table(board["tables"]["framework_config"], columns),
        "",
        "## Uncertainty of the headline column",
        "",
        markdown_table(
            [
                "group",
                HEADLINE_COLUMN,
                "Wilson 95%",
                "task-cluster bootstrap 95%",
                "replicate-cluster bootstrap 95% (exact)",
            ],
            uncertainty_rows(board, label),
        ),
        "",
        *[f"- {text}" for text in INTERVALS.values()],
        "",
        "A difference between rows is only a finding where a paired test separates them; never rank rows by point estimate alone.",
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
        markdown_table(["framework", "config", "task", "operator", "code", "count"], board["exclusions"])
        if board["exclusions"]
        else "No excluded cells.",
        "",
        "## Strict injection-evidence floor (a floor, published with DETECTED_HARD, never instead of it)",
        "",
        _funnel_table(
            board["tables"]["framework_config"],
            (("strict floor", "strict"), (f"{HEADLINE_COLUMN} (published)", "detected_hard")),
        ),
        "",
        f"Coverage-adjusted (cells with no injection-only anchor dropped) — {labels_of(board)['coverage_adjusted']}:",
        "",
        _funnel_table(board["covered_floor"], (("strict floor over covered cells", "strict"),)),
        "",
        f"## Clean-baseline base rates of the anchor rules ({board['baselines_scanned']} baselines scanned)",
        "",
        f"Denominators: {labels_of(board)['base_rate_denominator']}.",
        "",
        markdown_table(
            ["operator", "registered anchors fire", "strict anchors fire"],
            [
                [
                    op,
                    fmt_rate(*board["base_rates"]["anchor"][op], label=label),
                    fmt_rate(*board["base_rates"]["strict"][op], label=label),
                ]
                for op in sorted(board["base_rates"]["anchor"])
            ],
        ),
        "",
        markdown_table(
            ["task", "registered anchors fire", "strict anchors fire"],
            [
                [
                    t,
                    fmt_rate(*board["base_rates_by_task"]["anchor"][t], label=label),
                    fmt_rate(*board["base_rates_by_task"]["strict"][t], label=label),
                ]
                for t in sorted(board["base_rates_by_task"]["anchor"])
            ],
        ),
        "",
        *retry_section(board),
        "## Clean-run re-plans (does the instrument perturb the system?)",
        "",
        markdown_table(
            ["group", "baselines with a Magentic-One stall re-plan"],
            [[g, fmt_rate(*v, label=label)] for g, v in sorted(board.get("baseline_replans", {}).items())],
        ),
        "",
        *soft_section(board, kappa),
        *cell_links_section(board),
        "## Missing from the corpus",
        "",
        "\n".join(f"- `{path}`" for path in missing) if missing else "Nothing missing.",
        "",
    ]
    return "\n".join(out)
