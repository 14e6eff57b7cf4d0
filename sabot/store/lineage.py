"""Lineage reads: from a published number to its cells, and from a cell to its acts, events and exchanges.

A live cell's verdict read one attempt of its fault run: the stored attempt whose content hash is
the verdict's `fault_sha256` (the latest such, should two attempts be byte-identical).
"""

import json

from sabot.store.runs import attempt_history, record_sql
from sabot.store.attempt_exchanges import kept_exchanges

GROUP_COLUMNS = {
    "framework_config": ("framework", "config"),
    "operator": ("framework", "operator"),
    "task_operator": ("framework", "config", "task", "operator"),
}
# Published column names (the reference's) and ours; DETECTED_HARD is the headline's one name.
COLUMN_ALIASES = {
    "union": "detected_hard",
    "wave1_mapping": "mapping",
    "wave1-mapping": "mapping",
    "sabot_score": "detected_hard",
}
COLUMNS = ("mapping", "flags_anchored", "detected_hard", "reacted", "recovered", "flags_noticed")
READ_ATTEMPT = (
    "SELECT max(a.attempt) FROM attempts a WHERE a.wave = v.wave AND a.operator = v.operator AND a.probe = v.probe "
    "AND a.source_sha256 = v.fault_sha256"
)


def _has_attempts(con) -> bool:
    """A store made before attempts existed has no such table (read-only connections never migrate)."""
    return (
        con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'attempts'").fetchall()[0][0] > 0
    )


def _read_attempt(con) -> str:
    return READ_ATTEMPT if _has_attempts(con) else "SELECT NULL::INTEGER"


def attempts_read(con, wave: str, shas: dict[tuple[str, str], str | None]) -> dict[tuple[str, str], int]:
    """(operator, probe) -> the attempt whose record has the given content hash (the latest such)."""
    wanted = {k: sha for k, sha in shas.items() if sha}
    if not wanted or not _has_attempts(con):
        return {}
    rows = con.execute(
        "SELECT operator, probe, source_sha256, max(attempt) FROM attempts WHERE wave = ? GROUP BY operator, probe, source_sha256",
        [wave],
    ).fetchall()
    return {(op, probe): n for op, probe, sha, n in rows if wanted.get((op, probe)) == sha}


def number_cells(con, wave: str, ruleset: str, table: str, group: str, column: str) -> tuple[list[dict], list[dict]]:
    """(numerator cells, denominator cells) behind one published rate, in cell order."""
    if table not in GROUP_COLUMNS:
        raise ValueError(f"unknown table {table!r}; tables: {', '.join(GROUP_COLUMNS)}")
    column = COLUMN_ALIASES.get(column.lower(), column.lower())
    if column not in COLUMNS:
        raise ValueError(
            f"unknown column {column!r}; columns: {', '.join(COLUMNS)} (DETECTED_HARD is detected_hard; also union, wave1_mapping)"
        )
    dims = GROUP_COLUMNS[table]
    values = group.split("/")
    if len(values) != len(dims):
        raise ValueError(f"a {table} row is {'/'.join(dims)}, got {group!r}")
    where = " AND ".join(f"{d} = ?" for d in dims)
    rows = con.execute(
        f"SELECT operator, probe, framework, config, task, seed, {column}, fault_run_id, fault_sha256, baseline_run_id, baseline_sha256, "
        f"({_read_attempt(con)}) AS fault_attempt "
        f"FROM cell_verdicts v WHERE wave = ? AND ruleset = ? AND status = 'valid' AND {where} ORDER BY task, operator, seed",
        [wave, ruleset, *values],
    ).fetchall()
    keys = (
        "operator",
        "probe",
        "framework",
        "config",
        "task",
        "seed",
        "value",
        "fault_run_id",
        "fault_sha256",
        "baseline_run_id",
        "baseline_sha256",
        "fault_attempt",
    )
    cells = [dict(zip(keys, r)) for r in rows]
    return [c for c in cells if c["value"]], cells


def cell_detail(con, wave: str, ruleset: str, operator: str, probe: str) -> dict:
    """A cell's verdict, its acts, the events they came from, and the recorded model exchanges."""
    verdict = next(
        iter(
            con.execute(
                f"SELECT status, excluded, detected_hard, reacted, recovered, fault_run_id, fault_sha256, ({_read_attempt(con)}) "
                "FROM cell_verdicts v WHERE wave = ? AND ruleset = ? AND operator = ? AND probe = ?",
                [wave, ruleset, operator, probe],
            ).fetchall()
        ),
        None,
    )
    if verdict is None:
        raise ValueError(f"no verdict for cell {operator}|{probe} in {wave} under {ruleset}")
    acts = con.execute(
        "SELECT seq, act, component, reason, surface, counted, note FROM acts WHERE wave = ? AND ruleset = ? AND operator = ? AND probe = ? ORDER BY seq",
        [wave, ruleset, operator, probe],
    ).fetchall()
    seqs = sorted({a[0] for a in acts})
    events = con.execute(
        "SELECT seq, agent, kind FROM events WHERE wave = ? AND operator = ? AND probe = ? ORDER BY seq",
        [wave, operator, probe],
    ).fetchall()
    record = next(
        iter(
            con.execute(
                f"SELECT {record_sql()} FROM runs WHERE wave = ? AND operator = ? AND probe = ?",
                [wave, operator, probe],
            ).fetchall()
        ),
        None,
    )
    doc = json.loads(record[0]) if record and record[0] else {}
    exchanges = doc.get("exchanges", [])
    payloads = {
        e["seq"]: e["payload"] for e in doc.get("trace", {}).get("events", []) if e["seq"] in seqs
    }  # stored once: in the record
    return {
        "verdict": dict(
            zip(
                (
                    "status",
                    "excluded",
                    "detected_hard",
                    "reacted",
                    "recovered",
                    "fault_run_id",
                    "fault_sha256",
                    "fault_attempt",
                ),
                verdict,
            )
        ),
        "attempts": _with_kept_exchanges(con, wave, operator, probe) if _has_attempts(con) else [],
        "acts": [dict(zip(("seq", "act", "component", "reason", "surface", "counted", "note"), a)) for a in acts],
        "events": [{"seq": s, "agent": a, "kind": k, "payload": payloads[s]} for s, a, k in events if s in seqs],
        "exchanges": exchanges,
    }


def _with_kept_exchanges(con, wave: str, operator: str, probe: str) -> list[dict]:
    """The slot's attempts, each that did not complete (killed, cut off, failed) with the exchanges it kept."""
    kept = kept_exchanges(con, wave, operator, probe)
    return [{**a, "exchanges": kept.get(a["attempt"], [])} for a in attempt_history(con, wave, operator, probe)]
