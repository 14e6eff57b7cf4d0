"""Run slots and their events: what the run assets write and the scorer reads."""

import json
from dataclasses import dataclass

import pandas as pd

from sabot.matrix import Probe
from sabot.store.db import now, replace_rows
from sabot.trace import RunRecord, parse_runresult, to_runresult

RUN_COLUMNS = [
    "wave", "operator", "probe", "status", "run_id", "framework", "config", "task", "seed", "injection_seq",
    "injection_verified", "task_passed", "error", "source_path", "source_sha256", "record", "dagster_run_id", "materialized_at",
]
EVENT_COLUMNS = ["wave", "operator", "probe", "run_id", "seq", "agent", "kind", "payload"]


@dataclass(frozen=True)
class RunSlot:
    """One run a partition stands for: a fault run (operator set) or a baseline (operator None)."""

    operator: str | None
    probe: Probe
    source_path: str
    record: RunRecord | None = None  # None: the run is absent
    source_sha256: str | None = None


def write_slots(con, wave: str, slots: list[RunSlot], dagster_run_id: str) -> tuple[int, int]:
    """Replace the rows of these slots (call inside a transaction); returns (present, absent)."""
    at, runs, events = now(), [], []
    for s in slots:
        r, op = s.record, s.operator or ""
        runs.append({
            "wave": wave, "operator": op, "probe": s.probe.key, "status": "present" if r else "absent",
            "run_id": r.run_id if r else None, "framework": s.probe.framework, "config": s.probe.config,
            "task": s.probe.task, "seed": s.probe.seed,
            "injection_seq": r.injection_seq if r else None, "injection_verified": r.injection_verified if r else None,
            "task_passed": r.task_passed if r else None, "error": r.error if r else None,
            "source_path": s.source_path, "source_sha256": s.source_sha256,
            "record": json.dumps(to_runresult(r)) if r else None, "dagster_run_id": dagster_run_id, "materialized_at": at,
        })
        for e in r.events if r else ():
            events.append({"wave": wave, "operator": op, "probe": s.probe.key, "run_id": r.run_id, "seq": e.seq, "agent": e.agent, "kind": e.kind, "payload": json.dumps(e.payload)})
    keys = pd.DataFrame([(wave, s.operator or "", s.probe.key) for s in slots], columns=["wave", "operator", "probe"])
    runs_df = pd.DataFrame(runs, columns=RUN_COLUMNS).astype({"injection_seq": "Int64", "injection_verified": "boolean", "task_passed": "boolean"})
    replace_rows(con, "runs", keys, runs_df)
    replace_rows(con, "events", keys, pd.DataFrame(events, columns=EVENT_COLUMNS))
    present = sum(1 for s in slots if s.record)
    return present, len(slots) - present


@dataclass(frozen=True)
class StoredRun:
    status: str
    record: RunRecord | None
    source_path: str
    source_sha256: str | None


def read_runs(con, wave: str, keys: list[tuple[str, str]]) -> dict[tuple[str, str], StoredRun]:
    """(operator or '', probe) -> the stored slot, for the slots among `keys` that were materialized."""
    if not keys:
        return {}
    con.register("_wanted", pd.DataFrame(keys, columns=["operator", "probe"]))
    rows = con.execute(
        "SELECT r.operator, r.probe, r.status, r.record, r.source_path, r.source_sha256 FROM runs r "
        "JOIN _wanted w ON r.operator = w.operator AND r.probe = w.probe WHERE r.wave = ?",
        [wave],
    ).fetchall()
    con.unregister("_wanted")
    out = {}
    for op, probe, status, record, path, sha in rows:
        parsed = parse_runresult(json.loads(record), path) if record else None
        out[(op, probe)] = StoredRun(status, parsed, path, sha)
    return out


def read_baselines(con, wave: str) -> list[RunRecord]:
    """Every present baseline of a wave, in probe order."""
    rows = con.execute(
        "SELECT record, source_path FROM runs WHERE wave = ? AND operator = '' AND status = 'present' ORDER BY probe", [wave]
    ).fetchall()
    return [parse_runresult(json.loads(record), path) for record, path in rows]


def write_intent(con, wave: str, operator: str | None, probe: str, run_id: str, intent: list) -> None:
    con.execute("DELETE FROM simulator_intent WHERE wave = ? AND operator = ? AND probe = ?", [wave, operator or "", probe])
    con.execute("INSERT INTO simulator_intent VALUES (?, ?, ?, ?, ?)", [wave, operator or "", probe, run_id, json.dumps(intent)])


def endpoints(con, wave: str) -> set[str]:
    """The model endpoints a wave's present runs were made against (as labelled in their records)."""
    rows = con.execute(
        "SELECT DISTINCT json_extract_string(record, '$.endpoint') FROM runs WHERE wave = ? AND status = 'present'", [wave]
    ).fetchall()
    return {r[0] for r in rows if r[0]}
