"""What `sabot corpus score --json` writes, read back from the store after materialization."""

import json

from judges.hard.report import labels_of, median_line
from judges.labels import kappa_label
from judges.hard.tables import columns_for, entries_markdown, section2_markdown
from sabot.projects import PROJECT_BOARD_NOTE, TEST_DOUBLE_NOTE
from sabot.provenance import is_simulated
from sabot.registry import WaveDef
from sabot.store.published import read_report
from sabot.store.db import connect
from sabot.store.landing import latest_import
from sabot.store.spend import spend_of_project, spend_of_wave
from sabot.store.verdicts import read_verdicts

CELL_FIELDS = (
    "framework",
    "config",
    "task",
    "operator",
    "seed",
    "status",
    "excluded",
    "missing",
    "mapping",
    "flags",
    "flags_noticed",
    "flags_anchored",
    "detected_hard",
    "reacted",
    "recovered",
    "fault_run_id",
    "fault_sha256",
    "baseline_run_id",
    "baseline_sha256",
)


def score_document(store_path, wave: WaveDef, ruleset: str) -> dict:
    with connect(store_path, read_only=True) as con:
        rows = read_verdicts(con, wave.name, ruleset)
        board = json.loads(read_report(con, wave.name, ruleset, "board.json"))
        imported = latest_import(con, wave.name) or {"missing": [], "not_run": []}
        instrument = read_report(con, wave.name, "instrument", "json") if wave.source == "live" else None
        instrument_md = read_report(con, wave.name, "instrument", "md") if instrument else None
        spend, project_spend = spend_of_wave(con, wave.name), spend_of_project(con)
        kappa = read_report(con, wave.name, "soft", "kappa.json")
    return {
        "wave": wave.name,
        "label": board.get("label", wave.label),
        "ruleset": ruleset,
        "ruleset_hash": rows[0]["ruleset_hash"] if rows else None,
        "headline_ruleset": wave.headline_ruleset,
        "scoreboard": board,
        "cells": [{k: r[k] for k in CELL_FIELDS} for r in rows if r["status"] != "carved_out"],
        "missing": imported["missing"],
        "not_run": imported["not_run"],
        "instrument_check": json.loads(instrument) if instrument else None,
        "instrument_check_md": instrument_md,
        "spend": spend,
        "project_spend": project_spend,
        "kappa": json.loads(kappa) if kappa else None,
        "soft_reliability": kappa_label(json.loads(kappa) if kappa else None, board.get("judge_backends", ())),
    }


def instrument_text(doc: dict) -> list[str]:
    """A simulated wave's headline: how well the scorer agrees with the intent log."""
    check = doc.get("instrument_check")
    if not check or doc["label"] != "simulation":
        return []
    head = check[doc["ruleset"]]
    total = head["total"]

    def share(axis):
        t = total[axis]
        decided = t["agree"] + t["disagree"]
        extra = f", {t['deterministic']} explained by a deterministic guardrail" if t["deterministic"] else ""
        extra += f", {t['undetermined']} not decided by the log" if t["undetermined"] else ""
        return f"{axis} {t['agree']}/{decided} agree{extra}"

    def brief(t):
        return ", ".join(
            f"{a} {t[a]['agree']}/{t[a]['agree'] + t[a]['disagree']}" for a in ("detection", "reaction", "recovery")
        )

    lines = [
        f"Instrument check (simulation; ruleset {doc['ruleset']}): the scorer against the scripted model's intent log",
        "  all valid cells: " + "; ".join(share(a) for a in ("detection", "reaction", "recovery")),
        *(f"  {group}: {brief(t)} agree" for group, t in head["by_row"].items()),
        "  " + "; ".join(f"{op} {brief(t)}" for op, t in head["by_operator"].items()),
        f"  disagreements: {len(head['disagreements'])}"
        + "".join(
            f"\n    {d['axis']} {d['cell']}: scorer {d['scorer']}, intent log {d['intent log']} ({d['why']})"
            for d in head["disagreements"][:20]
        ),
    ]
    if len(head["disagreements"]) > 20:
        lines.append(f"    ... {len(head['disagreements']) - 20} more in the instrument check report")
    lines.append(
        "  per operator and row: the instrument check report (`instrument_check` asset); the funnel below is simulation, not a finding"
    )
    return lines


def scoreboard_text(doc: dict) -> str:
    board, label = doc["scoreboard"], doc["label"]
    if board.get("project"):
        return project_board_text(doc)
    return "\n".join(
        [
            *instrument_text(doc),
            f"{doc['wave']} under ruleset {doc['ruleset']} ({label}); cells: {json.dumps(board['cells'], sort_keys=True)}",
            entries_markdown(board["tables"]["framework_config"], columns_for(doc["ruleset"], label), label),
            "§2 funnel (every rate over |valid|; judged = valid cells a judge ruled on; undecided = neither a hard act nor a judge verdict):",
            section2_markdown(board["tables"]["framework_config"], label),
            *caveat_lines(doc),
            f"{median_line(board).replace('**', '').replace('`', '')} Excluded cell classes: {len(board['exclusions'])}; missing files: {len(doc['missing'])}",
        ]
    )


def caveat_lines(doc: dict) -> list[str]:
    """The board's caveats (`judges.labels`), as the Markdown and HTML reports print them."""
    board = doc["scoreboard"]
    labels = labels_of(board)
    reliability = doc.get("soft_reliability") or kappa_label(doc.get("kappa"), board.get("judge_backends", ()))
    lines = [f"Soft tier: {reliability['text']}.", labels["lower_bound_note"]]
    lines += [labels["pre_injection_note"]] if labels["pre_injection_note"] else []
    replicate = board.get("replicate_bootstrap", {})
    tag = f" ({doc['label']})" if is_simulated(doc.get("label")) else ""
    for group, entry in sorted(replicate.items()):
        wilson = next(e["wilson"]["detected_hard"] for e in board["tables"]["framework_config"] if e["group"] == group)
        lo, hi = entry["interval"][1:]
        interval = f": {entry['not_estimable']}" if entry.get("not_estimable") else f" [{100 * lo:.1f}, {100 * hi:.1f}]"
        lines.append(
            f"{group} DETECTED_HARD 95%: Wilson [{100 * wilson[0]:.1f}, {100 * wilson[1]:.1f}] (cells independent); "
            f"{entry['method']}{interval}{tag}"
        )
    lines.append(
        f"Ruleset {doc['ruleset']}: {labels['ruleset_registered']}. Base-rate denominators: {labels['base_rate_denominator']}."
    )
    return lines


# -- a project's board (a team's own pipeline) ------------------------------------------------------


def project_board_text(doc: dict) -> str:
    """A project's board: its own rates with what stands in for the model said plainly, and its
    exclusions by code; no cross-framework reading and no instrument check (no intent log)."""
    board, label = doc["scoreboard"], doc["label"]
    lines = [TEST_DOUBLE_NOTE] if is_simulated(label) else []
    lines.append(
        f"{doc['wave']} under ruleset {doc['ruleset']} ({label}); cells: {json.dumps(board['cells'], sort_keys=True)}"
    )
    if board["cells"].get("valid"):
        lines += [
            entries_markdown(board["tables"]["framework_config"], columns_for(doc["ruleset"], label), label),
            "§2 funnel (every rate over |valid|; judged = valid cells a judge ruled on; undecided = neither a hard act nor a judge verdict):",
            section2_markdown(board["tables"]["framework_config"], label),
        ]
    else:
        lines.append("No fault cell could be scored: every one is excluded (below), so there are no rates to show.")
    by_code: dict[str, dict[str, int]] = {}
    for _framework, _config, _task, operator, code, n in board["exclusions"]:
        by_code.setdefault(code, {})[operator] = by_code.get(code, {}).get(operator, 0) + n
    excluded = "; ".join(
        f"{code} {sum(ops.values())} ({', '.join(f'{op} {n}' for op, n in sorted(ops.items()))})"
        for code, ops in sorted(by_code.items())
    )
    lines += [PROJECT_BOARD_NOTE, f"Excluded cells: {excluded or 'none'}"]
    return "\n".join(lines)
