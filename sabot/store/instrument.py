"""Reads for the instrument check of a simulated wave: the intent log and the stored acts.

Only the instrument check reads `simulator_intent`; the scorer never does.
"""

import json
from collections import defaultdict


def read_intents(con, wave: str) -> dict[tuple[str, str], list[dict]]:
    """(operator, probe) -> the scripted model's intent entries for that fault run."""
    rows = con.execute(
        "SELECT operator, probe, intent FROM simulator_intent WHERE wave = ? AND operator <> ''", [wave]
    ).fetchall()
    return {(op, probe): json.loads(intent) for op, probe, intent in rows}


def read_wave_acts(con, wave: str, ruleset: str) -> dict[tuple[str, str], list[dict]]:
    """(operator, probe) -> the acts the scorer recorded for that cell under one ruleset."""
    cursor = con.execute(
        "SELECT operator, probe, component, act, counted FROM acts WHERE wave = ? AND ruleset = ?", [wave, ruleset]
    )
    out = defaultdict(list)
    for op, probe, component, act, counted in cursor.fetchall():
        out[(op, probe)].append({"component": component, "act": act, "counted": bool(counted)})
    return dict(out)
