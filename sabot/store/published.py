"""Scoreboards, their append-only cell manifest, and rendered reports."""

import hashlib
import json


from sabot.store.db import now, replace_rows, insert

MANIFEST_COLUMNS = [
    "dagster_run_id",
    "built_at",
    "wave",
    "ruleset",
    "ruleset_hash",
    "operator",
    "probe",
    "status",
    "excluded",
    "detected_hard",
    "fault_run_id",
    "fault_sha256",
    "baseline_run_id",
    "baseline_sha256",
]


def write_board(
    con, wave: str, ruleset: str, ruleset_hash: str, board: dict, rows: list[dict], dagster_run_id: str
) -> None:
    """Replace a ruleset's scoreboard rows and append the cells it was built from (in a transaction)."""
    import pandas as pd

    records = [
        {
            "wave": wave,
            "ruleset": ruleset,
            "ruleset_hash": ruleset_hash,
            "table_name": table,
            "group_key": e["group"],
            "valid": e["valid"],
            "counts": json.dumps(e["counts"]),
            "cells_fingerprint": board["cells_fingerprint"],
            "dagster_run_id": dagster_run_id,
        }
        for table, entries in board["tables"].items()
        for e in entries
    ]
    keys = pd.DataFrame([(wave, ruleset)], columns=["wave", "ruleset"])
    replace_rows(con, "scoreboard", keys, pd.DataFrame(records))
    at = now()
    manifest = [
        {
            **{k: r[k] for k in MANIFEST_COLUMNS if k in r},
            "dagster_run_id": dagster_run_id,
            "built_at": at,
            "ruleset_hash": ruleset_hash,
        }
        for r in rows
    ]
    insert(con, "scoreboard_manifest", pd.DataFrame(manifest, columns=MANIFEST_COLUMNS))
    write_report(con, wave, ruleset, "board.json", json.dumps(board, sort_keys=True), dagster_run_id)


def write_report(con, wave: str, ruleset: str, fmt: str, body: str, dagster_run_id: str) -> str:
    sha = hashlib.sha256(body.encode()).hexdigest()
    con.execute("DELETE FROM reports WHERE wave = ? AND ruleset = ? AND format = ?", [wave, ruleset, fmt])
    con.execute("INSERT INTO reports VALUES (?, ?, ?, ?, ?, ?)", [wave, ruleset, fmt, body, sha, dagster_run_id])
    return sha


def read_report(con, wave: str, ruleset: str, fmt: str) -> str | None:
    rows = con.execute(  # fetched whole: a result left open stops `register` on this connection
        "SELECT body FROM reports WHERE wave = ? AND ruleset = ? AND format = ?", [wave, ruleset, fmt]
    ).fetchall()
    return rows[0][0] if rows else None
