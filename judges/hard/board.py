"""A wave's scoreboard under one ruleset, as plain data: every table the report publishes.

Everything here is computed from cell rows and clean baselines; the JSON it returns is what the
`scoreboard` asset stores and what `sabot corpus score --json` writes.
"""

import hashlib
import json

from judges.hard.funnel import exclusion_appendix, funnel, median_across_frameworks, band
from sabot.protocols import Protocols
from judges.hard.strict import StrictRule, base_rates, with_strict
from judges.hard.tables import GROUPINGS


def fingerprint(rows) -> str:
    """Hash of the per-cell verdicts a board was built from (order-independent)."""
    keys = ("operator", "probe", "status", "excluded", "mapping", "flags_anchored", "detected_hard", "reacted", "recovered")
    lines = sorted(json.dumps([r[k] for k in keys]) for r in rows)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def coverage(rows) -> dict:
    by_status = {}
    for r in rows:
        by_status[r["status"]] = by_status.get(r["status"], 0) + 1
    return by_status


def build_board(registry, ruleset: str, rows: list[dict], baselines, operators) -> dict:
    protocols, strict = Protocols.from_registry(registry), StrictRule.from_registry(registry)
    scored = [r for r in rows if r["status"] != "carved_out"]
    scored = with_strict(strict, protocols, scored)
    tables = {
        name: [{"group": f.group, "valid": f.valid, "counts": f.counts} for f in funnel(scored, dims)]
        for name, dims in GROUPINGS.items()
    }
    med, per_framework = median_across_frameworks(scored)
    covered = [r for r in scored if not r["blind"]]
    rates = base_rates(registry, protocols, strict, baselines, operators)
    return {
        "ruleset": ruleset,
        "cells": coverage(rows),
        "tables": tables,
        "covered_floor": [{"group": f.group, "valid": f.valid, "counts": f.counts} for f in funnel(covered, GROUPINGS["framework_config"])],
        "exclusions": [list(e) for e in exclusion_appendix(scored)],
        "median": {"value": med, "per_framework": per_framework, "band": band(registry, med)},
        "base_rates": {
            rule: {op: list(rates.rate(rule, "operator", op)) for op in operators}
            for rule in ("anchor", "strict")
        },
        "base_rates_by_task": {
            rule: {task: list(rates.rate(rule, "task", task)) for task in sorted({b.task for b in baselines})}
            for rule in ("anchor", "strict")
        },
        "baselines_scanned": len(baselines),
        "cells_fingerprint": fingerprint(scored),
    }
