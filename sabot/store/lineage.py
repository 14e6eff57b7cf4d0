"""Lineage reads: from a published number to its cells, and from a cell to its acts, events and exchanges."""

import json

GROUP_COLUMNS = {
    "framework_config": ("framework", "config"),
    "operator": ("framework", "operator"),
    "task_operator": ("framework", "config", "task", "operator"),
}
# Published column names (the reference's) and ours.
COLUMN_ALIASES = {"union": "detected_hard", "wave1_mapping": "mapping", "wave1-mapping": "mapping", "sabot_score": "detected_hard"}
COLUMNS = ("mapping", "flags_anchored", "detected_hard", "reacted", "recovered", "flags_noticed")


def number_cells(con, wave: str, ruleset: str, table: str, group: str, column: str) -> tuple[list[dict], list[dict]]:
    """(numerator cells, denominator cells) behind one published rate, in cell order."""
    if table not in GROUP_COLUMNS:
        raise ValueError(f"unknown table {table!r}; tables: {', '.join(GROUP_COLUMNS)}")
    column = COLUMN_ALIASES.get(column, column)
    if column not in COLUMNS:
        raise ValueError(f"unknown column {column!r}; columns: {', '.join(COLUMNS)} (or union, wave1_mapping)")
    dims = GROUP_COLUMNS[table]
    values = group.split("/")
    if len(values) != len(dims):
        raise ValueError(f"a {table} row is {'/'.join(dims)}, got {group!r}")
    where = " AND ".join(f"{d} = ?" for d in dims)
    rows = con.execute(
        f"SELECT operator, probe, framework, config, task, seed, {column}, fault_run_id, fault_sha256, baseline_run_id, baseline_sha256 "
        f"FROM cell_verdicts WHERE wave = ? AND ruleset = ? AND status = 'valid' AND {where} ORDER BY task, operator, seed",
        [wave, ruleset, *values],
    ).fetchall()
    keys = ("operator", "probe", "framework", "config", "task", "seed", "value", "fault_run_id", "fault_sha256", "baseline_run_id", "baseline_sha256")
    cells = [dict(zip(keys, r)) for r in rows]
    return [c for c in cells if c["value"]], cells


def cell_detail(con, wave: str, ruleset: str, operator: str, probe: str) -> dict:
    """A cell's verdict, its acts, the events they came from, and the recorded model exchanges."""
    verdict = con.execute(
        "SELECT status, excluded, detected_hard, reacted, recovered, fault_run_id, fault_sha256 FROM cell_verdicts "
        "WHERE wave = ? AND ruleset = ? AND operator = ? AND probe = ?",
        [wave, ruleset, operator, probe],
    ).fetchone()
    if verdict is None:
        raise ValueError(f"no verdict for cell {operator}|{probe} in {wave} under {ruleset}")
    acts = con.execute(
        "SELECT seq, act, component, reason, surface, counted, note FROM acts WHERE wave = ? AND ruleset = ? AND operator = ? AND probe = ? ORDER BY seq",
        [wave, ruleset, operator, probe],
    ).fetchall()
    seqs = sorted({a[0] for a in acts})
    events = con.execute(
        "SELECT seq, agent, kind, payload FROM events WHERE wave = ? AND operator = ? AND probe = ? ORDER BY seq", [wave, operator, probe]
    ).fetchall()
    record = con.execute("SELECT record FROM runs WHERE wave = ? AND operator = ? AND probe = ?", [wave, operator, probe]).fetchone()
    exchanges = json.loads(record[0]).get("exchanges", []) if record and record[0] else []
    return {
        "verdict": dict(zip(("status", "excluded", "detected_hard", "reacted", "recovered", "fault_run_id", "fault_sha256"), verdict)),
        "acts": [dict(zip(("seq", "act", "component", "reason", "surface", "counted", "note"), a)) for a in acts],
        "events": [{"seq": s, "agent": a, "kind": k, "payload": json.loads(p)} for s, a, k, p in events if s in seqs],
        "exchanges": exchanges,
    }
