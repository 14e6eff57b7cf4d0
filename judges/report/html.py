"""The wave report as one static HTML page, rendered from the boards (never hand-edited).

The page is self-contained (inline CSS and SVG, no JavaScript, no external resources) and built
by the Jinja templates beside this module, with autoescaping on: every string from a board, the
label, the footnotes and the missing-files list is escaped. This module only shapes the boards
into rows; rates are formatted with `judges.hard.tables.fmt_rate`, as in the Markdown report.

The scoreboard table (`id="scoreboard"`) is the only element drawn with `HEADER_COLOUR` (its
header row background); the screenshot test finds the table by that colour.
"""

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, pass_context, select_autoescape

from judges.hard.report import labels_of
from judges.hard.tables import GROUPINGS, SECTION2_COLUMNS, columns_for, fmt_pct, fmt_rate, section2_cell, section2_gap
from judges.labels import INTERVALS, kappa_label

HEADER_COLOUR = "#7b2d8e"  # scoreboard header row background, rgb(123, 45, 142)
SCOREBOARD_MIN_WIDTH = 640  # px: the scoreboard table is at least this wide...
HEADER_MIN_HEIGHT = 28  # px: ...and its header row at least this tall (the screenshot test's floor)

TABLE_TITLES = {
    "framework_config": "Scoreboard — by framework x config",
    "operator": "By operator",
    "task_operator": "By task x operator",
}
FUNNEL_STAGES = (
    ("valid", None),
    ("DETECTED_HARD (headline)", "detected_hard"),
    ("reacted", "reacted"),
    ("recovered", "recovered"),
)
FUNNEL_WIDTH = 220  # px of the longest bar (the valid denominator)

_env = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
# Rates carry the page's label: a simulated page says "simulation" on every number.
_env.filters["rate"] = pass_context(lambda ctx, pair: fmt_rate(*pair, label=ctx.get("label")))
_env.filters["pct"] = fmt_pct
_env.globals.update(
    fmt_rate=pass_context(lambda ctx, n, d: fmt_rate(n, d, label=ctx.get("label"))),
    soft_rate=pass_context(lambda ctx, entry, key: section2_cell(entry, key, ctx.get("label"))),
    soft_gap=pass_context(lambda ctx, entry: section2_gap(entry, ctx.get("label"))),
    operator_of=lambda group: group.rsplit("/", 1)[-1],
)


def render_html(
    wave: str,
    label: str,
    boards: dict[str, dict],
    headline: str,
    missing: list[str],
    footnotes: list[str],
    kappa: dict | None = None,
) -> str:
    """The report page: the headline board in full, plus every ruleset's value where they diverge;
    `kappa` is the soft tier's agreement audit (None: not measured, so low-confidence)."""
    if headline not in boards:
        raise ValueError(f"headline ruleset {headline!r} has no board (have {sorted(boards)})")
    board = boards[headline]
    rulesets = [headline] + sorted(r for r in boards if r != headline)
    return _env.get_template("report.html.j2").render(
        wave=wave,
        label=label,
        headline=headline,
        rulesets=rulesets,
        board=board,
        boards=boards,
        columns=columns_for(headline, label),
        section2=SECTION2_COLUMNS,
        titles=TABLE_TITLES,
        base=base_rate_lookup(board),
        funnels=[funnel_bars(e, label) for e in board["tables"]["framework_config"]],
        floor=floor_rows(board, label),
        readings=reading_rows(boards, rulesets, label),
        labels=labels_of(board),
        reliability=kappa_label(kappa, board.get("judge_backends", ())),
        intervals=INTERVALS,
        uncertainty=uncertainty_rows(board, label),
        missing=missing,
        footnotes=footnotes,
        header_colour=HEADER_COLOUR,
        scoreboard_min_width=SCOREBOARD_MIN_WIDTH,
        header_min_height=HEADER_MIN_HEIGHT,
        bar_width=FUNNEL_WIDTH,
    )


def _interval(bounds) -> str:
    lo, hi = bounds
    return "n/a" if lo != lo or hi != hi else f"[{100 * lo:.1f}, {100 * hi:.1f}]"


def uncertainty_rows(board: dict, label: str | None = None) -> list[dict]:
    """The headline rate per framework x config with each interval, labelled by method in the page."""
    rows = []
    for e in board["tables"]["framework_config"]:
        replicate = board.get("replicate_bootstrap", {}).get(e["group"])
        task_why = board.get("cluster_bootstrap_not_estimable", {}).get(e["group"])
        rows.append(
            {
                "group": e["group"],
                "rate": fmt_rate(e["counts"].get("detected_hard", 0), e["valid"], label=label),
                "wilson": _interval(e["wilson"]["detected_hard"]),
                "task": task_why or _interval(board["cluster_bootstrap"][e["group"]][1:]),
                "replicate": (replicate.get("not_estimable") or _interval(replicate["interval"][1:]))
                if replicate
                else "n/a",
            }
        )
    return rows


def base_rate_lookup(board: dict) -> dict:
    """rule -> operator -> (fires, baselines), plus "*" for all operators pooled (the scoreboard's)."""
    out = {}
    for rule, per_op in board["base_rates"].items():
        pooled = [sum(n for n, _ in per_op.values()), sum(d for _, d in per_op.values())]
        out[rule] = {**per_op, "*": pooled}
    return out


def funnel_bars(entry: dict, label: str | None = None) -> dict:
    """One scoreboard row's funnel: bar lengths scaled to the valid denominator."""
    bars = []
    for name, column in FUNNEL_STAGES:
        count = entry["valid"] if column is None else entry["counts"].get(column, 0)
        width = FUNNEL_WIDTH * count / entry["valid"] if entry["valid"] else 0
        bars.append(
            {
                "name": name,
                "count": count,
                "width": round(width, 1),
                "rate": fmt_rate(count, entry["valid"], label=label),
            }
        )
    return {"group": entry["group"], "bars": bars}


def floor_rows(board: dict, label: str | None = None) -> list[dict]:
    """Strict floor beside the union, and the coverage-adjusted floor, per framework x config."""
    covered = {e["group"]: e for e in board["covered_floor"]}
    rows = []
    for e in board["tables"]["framework_config"]:
        c = covered.get(e["group"], {"valid": 0, "counts": {}})
        rows.append(
            {
                "group": e["group"],
                "valid": e["valid"],
                "strict": fmt_rate(e["counts"].get("strict", 0), e["valid"], label=label),
                "union": fmt_rate(e["counts"].get("detected_hard", 0), e["valid"], label=label),
                "covered": f"{c['valid']}/{e['valid']}",
                "covered_strict": fmt_rate(c["counts"].get("strict", 0), c["valid"], label=label),
            }
        )
    return rows


def reading_rows(boards: dict[str, dict], rulesets: list[str], label: str | None = None) -> list[dict]:
    """Every row whose headline value (detected_hard / valid) is not the same under every ruleset."""
    rows = []
    for table in GROUPINGS:
        values = {
            r: {e["group"]: (e["counts"].get("detected_hard", 0), e["valid"]) for e in boards[r]["tables"][table]}
            for r in rulesets
        }
        for group in sorted(set().union(*values.values())):
            pairs = [values[r].get(group) for r in rulesets]  # None: the group has no valid cell there
            if len(set(pairs)) > 1:
                rows.append(
                    {
                        "table": TABLE_TITLES[table],
                        "group": group,
                        "readings": [fmt_rate(*p, label=label) if p else "—" for p in pairs],
                    }
                )
    medians = [boards[r]["median"] for r in rulesets]
    if not any(m.get("withheld") for m in medians) and len({(m["value"], m["band"]) for m in medians}) > 1:
        readings = [f"{fmt_pct(m['value'])} ({m['band']})" for m in medians]
        rows.append({"table": "Median across frameworks", "group": "all frameworks", "readings": readings})
    return rows
