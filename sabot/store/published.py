"""Scoreboards, their append-only cell manifest, and rendered reports."""

import hashlib
import json


from sabot.store.db import insert_rows, now, replace_values

SCOREBOARD_COLUMNS = [
    "wave",
    "ruleset",
    "ruleset_hash",
    "table_name",
    "group_key",
    "valid",
    "counts",
    "cells_fingerprint",
    "dagster_run_id",
]
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
    records = [
        (
            wave,
            ruleset,
            ruleset_hash,
            table,
            e["group"],
            e["valid"],
            json.dumps(e["counts"]),
            board["cells_fingerprint"],
            dagster_run_id,
        )
        for table, entries in board["tables"].items()
        for e in entries
    ]
    replace_values(con, "scoreboard", ["wave", "ruleset"], [(wave, ruleset)], SCOREBOARD_COLUMNS, records)
    at = now()
    fixed = {"dagster_run_id": dagster_run_id, "built_at": at, "ruleset_hash": ruleset_hash}
    manifest = [tuple(fixed[k] if k in fixed else r.get(k) for k in MANIFEST_COLUMNS) for r in rows]
    insert_rows(con, "scoreboard_manifest", MANIFEST_COLUMNS, manifest)
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
