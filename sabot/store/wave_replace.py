"""What an import wave holds, and replacing it whole: importing another corpus under a wave's name
either replaces every row the earlier corpus produced, in the landing's own transaction, or is
refused. Never a store whose runs point at a landing that is gone."""

from dataclasses import dataclass

# Every table with rows derived from a wave's runs; `manifest`, `scoreboard_manifest` and
# `corpus_imports` are append-only history and keep what was once built.
DERIVED_TABLES = (
    "runs",
    "events",
    "cell_verdicts",
    "acts",
    "judge_verdicts",
    "simulator_intent",
    "model_calls",
    "scoreboard",
    "reports",
)
SLOT_TABLES = ("events", "cell_verdicts", "acts", "judge_verdicts", "simulator_intent", "model_calls")


_UNLANDED = (
    "SELECT r.operator, r.probe FROM runs r WHERE r.wave = ? AND r.status = 'present' AND r.record IS NULL AND NOT EXISTS "
    "(SELECT 1 FROM corpus_files f WHERE f.wave = r.wave AND f.rel_path = r.source_path)"
)


class OrphanedRuns(ValueError):
    """Stored imported runs whose landed file is gone (a store written before re-imports replaced cleanly)."""


@dataclass(frozen=True)
class Replaced:
    """What a replacing import removed."""

    corpus_root: str | None
    runs: int
    verdicts: int

    def text(self, wave: str) -> str:
        origin = f" imported from {self.corpus_root}" if self.corpus_root else ""
        return f"{wave}: replaced {self.runs} run(s) and {self.verdicts} cell verdict(s){origin}"


def held_runs(con, wave: str) -> int:
    return con.execute("SELECT count(*) FROM runs WHERE wave = ?", [wave]).fetchall()[0][0]


def orphaned_runs(con, wave: str) -> int:
    """Present imported runs (no record of their own) whose file is no longer landed at all. (A file
    landed anew with other bytes is not one: its block is materialized again by the import.)"""
    return con.execute(f"SELECT count(*) FROM ({_UNLANDED})", [wave]).fetchall()[0][0]


def orphan_message(store, wave: str, count: int, directory="DIR") -> str:
    where = f"store {store}: " if store else ""
    return (
        f"{where}wave {wave} holds {count} imported run(s) whose files a later import replaced (written by an earlier "
        f"version of sabot); repair: sabot corpus import {directory} --wave {wave} --replace"
    )


def clear_wave(con, wave: str, corpus_root: str | None) -> Replaced:
    """Delete every row the wave's runs produced (call inside the landing's transaction)."""
    runs = held_runs(con, wave)
    verdicts = con.execute("SELECT count(*) FROM cell_verdicts WHERE wave = ?", [wave]).fetchall()[0][0]
    for table in DERIVED_TABLES:
        con.execute(f"DELETE FROM {table} WHERE wave = ?", [wave]).fetchall()
    return Replaced(corpus_root, runs, verdicts)


def drop_unlanded_slots(con, wave: str) -> int:
    """Delete imported slots whose file left the landing, with every row derived from them, and the
    wave's board (rebuilt from what remains). Call inside the landing's transaction."""
    slots = con.execute(_UNLANDED, [wave]).fetchall()
    if not slots:
        return 0
    for table in (*SLOT_TABLES, "runs"):
        con.execute(
            f"DELETE FROM {table} WHERE wave = ? AND (operator, probe) IN ({_UNLANDED})", [wave, wave]
        ).fetchall()
    for table in ("scoreboard", "reports"):
        con.execute(f"DELETE FROM {table} WHERE wave = ?", [wave]).fetchall()
    return len(slots)
