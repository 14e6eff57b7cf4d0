"""A wave's scoreboard under one ruleset, as plain data: every table the report publishes.

Everything here is computed from cell rows and clean baselines; the JSON it returns is what the
`scoreboard` asset stores and what `sabot corpus score --json` writes.
"""

import hashlib
import json

from judges.hard.funnel import (
    band,
    exclusion_appendix,
    funnel,
    group_key,
    median_across_frameworks,
    missing_rows,
    with_soft,
)
from judges.labels import INTERVALS_DOC, board_labels, not_estimable
from judges.hard.strict import FloorRules, base_rates, with_strict
from judges.hard.tables import GROUPINGS
from judges.stats import cluster_bootstrap, replicate_bootstrap, wilson
from judges.stats.coverage import coverage as cell_coverage
from sabot.project_registry import ProjectRegistry
from sabot.projects import PROJECT_BOARD_NOTE
from sabot.provenance import LOCAL_MODEL, SIMULATION, is_simulated
from sabot.trace import EventKind


def fingerprint(rows) -> str:
    """Hash of the per-cell verdicts a board was built from (order-independent)."""
    keys = (
        "operator",
        "probe",
        "status",
        "excluded",
        "mapping",
        "flags_anchored",
        "detected_hard",
        "reacted",
        "recovered",
    )
    lines = sorted(json.dumps([r[k] for k in keys]) for r in rows)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def coverage(rows) -> dict:
    by_status = {}
    for r in rows:
        by_status[r["status"]] = by_status.get(r["status"], 0) + 1
    return by_status


def median_entry(registry, scored, label: str, expected_rows: list[str] | None, expected_cells=None) -> dict:
    """§7's median and band, only where they mean something: never on simulated data (a simulated
    wave measures the instrument), only when every scoreboard row of the wave has valid cells
    (a median over one of six rows is not the median across frameworks), and only when every cell
    of the wave's matrix (`expected_cells`) is decided (`judges.stats.coverage`)."""
    missing = missing_rows(scored, expected_rows or [])
    undecided = cell_coverage(scored, expected_cells) if expected_cells is not None else None
    entry = {"value": None, "per_framework": {}, "band": None, "missing_rows": missing, "withheld": None}
    if isinstance(registry, ProjectRegistry):  # one team's pipeline: no cross-framework reading at all
        return entry | {"withheld": PROJECT_BOARD_NOTE}
    if is_simulated(label):
        return entry | {
            "withheld": f"{label}: a simulated wave measures the instrument, not pipelines; no median, no band"
        }
    if LOCAL_MODEL in (label or ""):  # whatever model it serves, it is not the pinned one
        return entry | {
            "withheld": f"{label}: a local model server's runs are not the pinned models' runs; no median, no band"
        }
    if missing:
        return entry | {
            "withheld": f"{len(missing)} of {len(expected_rows)} scoreboard rows have no valid cells: {', '.join(missing)}"
        }
    if undecided is not None and not undecided.complete:
        return entry | {"withheld": undecided.describe("undetermined")}
    med, per_framework = median_across_frameworks(scored)
    return entry | {"value": med, "per_framework": per_framework, "band": band(registry, med)}


RETRY_WHY = (  # the first matching phrase of an uncounted retry's note (judges.hard.acts.reason_rule)
    ("is on the clean baseline", "quotes only anchors its own clean baseline also wrote"),
    ("signal-free", "quotes only signal-free (O4) anchors"),
    ("ordinary task vocabulary", "quotes only ordinary task vocabulary"),
    ("(boilerplate)", "the clean baseline gave the same reason (boilerplate)"),
    ("", "quotes no registered anchor"),
)


def retry_tally(acts) -> dict:
    """Retries and re-plans under the ruleset's retry-reason rule: counted, and why the others were not."""
    tally = {"counted": 0, "not_counted": {}}
    for counted, note in acts:
        if counted:
            tally["counted"] += 1
            continue
        why = next(label for phrase, label in RETRY_WHY if phrase in note)
        tally["not_counted"][why] = tally["not_counted"].get(why, 0) + 1
    return tally


def _replicate_entry(rows, minimum: int) -> dict:
    ci = replicate_bootstrap(rows, "detected_hard")
    why = not_estimable(ci.clusters, minimum, "replicate")
    return {
        "interval": [ci.point, None, None] if why else [ci.point, ci.lo, ci.hi],
        "replicates": ci.clusters,
        "support": ci.support,
        "exact": ci.exact,
        "method": ci.label(),
        "not_estimable": why,
    }


def _task_clusters(rows) -> int:
    return len({r["task"] for r in rows if r["status"] == "valid"})


def baseline_replans(baselines) -> dict:
    """Clean runs with a Magentic-One stall re-plan, per framework/config: the instrument check of
    whether a protocol (e.g. the wave-2 FLAGS contract) itself perturbs the system."""
    out = {}
    for run in baselines:
        entry = out.setdefault(f"{run.framework}/{run.config}", [0, 0])
        entry[1] += 1
        entry[0] += any(
            e.kind == EventKind.GUARDRAIL_EVENT
            and e.payload.get("act") == "retry_with_reason"
            and e.payload.get("component") == "MagenticOneOrchestrator"
            for e in run.events
        )
    return out


def build_board(
    registry,
    ruleset: str,
    rows: list[dict],
    baselines,
    operators,
    judged: dict | None = None,
    label: str = SIMULATION,
    expected_rows: list[str] | None = None,
    *,
    floor: FloorRules,
    expected_cells=None,
    retries=None,
) -> dict:
    """`expected_rows`, `expected_cells`: the wave's framework/config rows and cell keys, for the
    median's completeness rule; `retries`: (counted, note) of the retry acts (`retry_tally`)."""
    scored = [r for r in rows if r["status"] != "carved_out"]
    scored = with_soft(with_strict(floor.strict, floor.flags, scored), judged or {})
    tables = {
        name: [
            {
                "group": f.group,
                "valid": f.valid,
                "counts": f.counts,
                "wilson": {c: list(wilson(n, f.valid)) for c, n in f.counts.items()},
            }
            for f in funnel(scored, dims)
        ]
        for name, dims in GROUPINGS.items()
    }
    covered = [r for r in scored if not r["blind"]]
    minimums = registry.doc(INTERVALS_DOC)
    rates = base_rates(floor, baselines, operators)
    board = {
        "ruleset": ruleset,
        "floor_rules": floor.source,  # the ruleset whose strict classification, FLAGS rule and anchors the floor used
        "cells": coverage(rows),
        "tables": tables,
        "covered_floor": [
            {"group": f.group, "valid": f.valid, "counts": f.counts}
            for f in funnel(covered, GROUPINGS["framework_config"])
        ],
        "exclusions": [list(e) for e in exclusion_appendix(scored)],
        "label": label,
        **({"project": registry.project.name} if isinstance(registry, ProjectRegistry) else {}),  # a team's pipeline
        "median": median_entry(registry, scored, label, expected_rows, expected_cells),
        # Pooled rates resample whole tasks: cells of one task are not independent.
        "cluster_bootstrap": {
            f.group: list(
                cluster_bootstrap(
                    [r for r in scored if group_key(r, GROUPINGS["framework_config"]) == f.group],
                    "detected_hard",
                    cluster="task",
                )
            )
            for f in funnel(scored, GROUPINGS["framework_config"])
        },
        # The reference supplement's method: whole replicates (seeds) resampled, exactly enumerated;
        # cells of one replicate share one clean baseline per (framework, config, task).
        "replicate_bootstrap": {
            f.group: _replicate_entry(
                [r for r in scored if group_key(r, GROUPINGS["framework_config"]) == f.group],
                minimums["min_replicates"],
            )
            for f in funnel(scored, GROUPINGS["framework_config"])
        },
        # Below the registered minimum of clusters an interval is "not estimable", with the count (§3).
        "cluster_bootstrap_not_estimable": {
            f.group: not_estimable(
                _task_clusters([r for r in scored if group_key(r, GROUPINGS["framework_config"]) == f.group]),
                minimums["min_task_clusters"],
                "task",
            )
            for f in funnel(scored, GROUPINGS["framework_config"])
        },
        "base_rates": {
            rule: {op: list(rates.rate(rule, "operator", op)) for op in operators} for rule in ("anchor", "strict")
        },
        "base_rates_by_task": {
            rule: {task: list(rates.rate(rule, "task", task)) for task in sorted({b.task for b in baselines})}
            for rule in ("anchor", "strict")
        },
        "baselines_scanned": len(baselines),
        "baseline_replans": baseline_replans(baselines),
        "retries": retry_tally(retries or ()),
        "judge_backends": sorted({v["backend"] for v in (judged or {}).values()}),
        "cells_fingerprint": fingerprint(scored),
    }
    return board | {"labels": board_labels(board, registry.ruleset_doc(ruleset).doc.get("registered"))}
