"""Cell verdicts and their acts: written per partition, read per wave."""

import json


from sabot.store.db import replace_values

VERDICT_COLUMNS = [
    "wave",
    "ruleset",
    "ruleset_hash",
    "operator",
    "probe",
    "framework",
    "config",
    "task",
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
    "dagster_run_id",
]
ACT_COLUMNS = [
    "wave",
    "ruleset",
    "operator",
    "probe",
    "run_id",
    "seq",
    "act",
    "component",
    "reason",
    "surface",
    "counted",
    "note",
]
JSON_COLUMNS = ("missing", "flags")


def write_verdicts(
    con, wave: str, cell_keys: list[tuple[str, str]], rulesets: list[str], verdicts: list[dict], acts: list[dict]
) -> None:
    """Replace these rulesets' verdicts and acts for these cells (call inside a transaction)."""
    keys = [(wave, v, op, probe) for op, probe in cell_keys for v in rulesets]
    _replace(con, ["wave", "ruleset", "operator", "probe"], keys, verdicts, acts)


def write_reading(con, wave: str, ruleset: str, verdicts: list[dict], acts: list[dict]) -> None:
    """Replace every verdict and act of one reading of a wave (call inside a transaction)."""
    _replace(con, ["wave", "ruleset"], [(wave, ruleset)], verdicts, acts)


def _replace(con, key_columns: list[str], keys: list[tuple], verdicts: list[dict], acts: list[dict]) -> None:
    rows = [tuple(json.dumps(v.get(c)) if c in JSON_COLUMNS else v.get(c) for c in VERDICT_COLUMNS) for v in verdicts]
    replace_values(con, "cell_verdicts", key_columns, keys, VERDICT_COLUMNS, rows)
    replace_values(con, "acts", key_columns, keys, ACT_COLUMNS, [tuple(a.get(c) for c in ACT_COLUMNS) for a in acts])


def read_verdicts(con, wave: str, ruleset: str | None = None) -> list[dict]:
    """Every stored cell verdict of a wave (optionally one ruleset), in cell order."""
    sql = f"SELECT {', '.join(VERDICT_COLUMNS)} FROM cell_verdicts WHERE wave = ?"
    params = [wave]
    if ruleset is not None:
        sql += " AND ruleset = ?"
        params.append(ruleset)
    cursor = con.execute(sql + " ORDER BY ruleset, framework, config, task, operator, seed", params)
    rows = [dict(zip(VERDICT_COLUMNS, values)) for values in cursor.fetchall()]
    for row in rows:
        for col in JSON_COLUMNS:
            row[col] = json.loads(row[col])
    return rows


def read_acts(con, wave: str, ruleset: str, operator: str, probe: str) -> list[dict]:
    cursor = con.execute(
        f"SELECT {', '.join(ACT_COLUMNS)} FROM acts WHERE wave = ? AND ruleset = ? AND operator = ? AND probe = ? ORDER BY seq",
        [wave, ruleset, operator, probe],
    )
    return [dict(zip(ACT_COLUMNS, values)) for values in cursor.fetchall()]


def retry_acts(con, wave: str, ruleset: str) -> list[tuple[bool, str]]:
    """(counted, note) of every retry or re-plan act the ruleset adjudicated in the wave."""
    return [
        (bool(c), n)
        for c, n in con.execute(
            "SELECT counted, note FROM acts WHERE wave = ? AND ruleset = ? AND act = 'retry_with_reason' ORDER BY operator, probe, seq",
            [wave, ruleset],
        ).fetchall()
    ]
