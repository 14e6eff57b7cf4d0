"""What `sabot corpus score --json` writes, read back from the store after materialization."""

import json

from judges.hard.tables import columns_for, entries_markdown, fmt_pct
from sabot.registry import WaveDef
from sabot.store.board import read_report
from sabot.store.db import connect
from sabot.store.landing import latest_import
from sabot.store.verdicts import read_verdicts

CELL_FIELDS = (
    "framework", "config", "task", "operator", "seed", "status", "excluded", "missing", "mapping", "flags",
    "flags_noticed", "flags_anchored", "detected_hard", "reacted", "recovered", "fault_run_id", "fault_sha256",
    "baseline_run_id", "baseline_sha256",
)


def score_document(store_path, wave: WaveDef, ruleset: str) -> dict:
    with connect(store_path, read_only=True) as con:
        rows = read_verdicts(con, wave.name, ruleset)
        board = json.loads(read_report(con, wave.name, ruleset, "board.json"))
        imported = latest_import(con, wave.name) or {"missing": [], "not_run": []}
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
    }


def scoreboard_text(doc: dict) -> str:
    board = doc["scoreboard"]
    med = board["median"]
    return "\n".join([
        f"{doc['wave']} under ruleset {doc['ruleset']} ({doc['label']}); cells: {json.dumps(board['cells'], sort_keys=True)}",
        entries_markdown(board["tables"]["framework_config"], columns_for(doc["ruleset"])),
        f"median across frameworks: {fmt_pct(med['value'])} (band: {med['band']}); excluded cell classes: {len(board['exclusions'])}; missing files: {len(doc['missing'])}",
    ])
