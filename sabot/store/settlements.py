"""Which Dagster board run settled which state of a wave (the `settlements` table).

A command that finishes settling a wave records the fingerprint of what its board was made from
(sabot_assets.settled) beside the board run's id; the next command looks it up here before it
creates the Dagster instance, so a command with nothing to do never pays for Dagster's storage.
"""

import duckdb

from sabot.store.db import now


def record_settlement(con, wave: str, fingerprint: str, dagster_run_id: str) -> None:
    con.execute(
        "INSERT OR REPLACE INTO settlements (wave, fingerprint, dagster_run_id, settled_at) VALUES (?, ?, ?, ?)",
        [wave, fingerprint, dagster_run_id, now()],
    )


def settling_run(con, wave: str, fingerprint: str) -> str | None:
    """The board run that settled exactly this state, or None (also for a store from before the
    table, opened read-only: it has settled nothing yet)."""
    try:
        row = con.execute(
            "SELECT dagster_run_id FROM settlements WHERE wave = ? AND fingerprint = ?", [wave, fingerprint]
        ).fetchone()
    except duckdb.CatalogException:
        return None
    return row[0] if row else None
