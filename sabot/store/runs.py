"""Run slots and their events: what the run assets write and the scorer reads.

Live runs reach the store only by ingesting a finished attempt from the run root
(`sabot.runroot`): the attempt is appended to `attempts`, then the slot's scored run is
recomputed (its latest complete attempt, else its latest RUN_ERROR attempt). Ingesting is
idempotent, so a parent process, a later sweep or a second host can ingest the same attempt.
"""

import json
from dataclasses import dataclass

import duckdb


from sabot.matrix import Probe
from sabot.store.db import WANTED_SLOTS, column_lists, now, replace_values
from sabot.runroot import Attempt, Identity
from sabot.store.spend import write_calls
from sabot.store.wave_replace import OrphanedRuns, orphan_message
from sabot.store.scored import picked_sql, scored_column, scored_fields
from sabot.trace import RunRecord, parse_runresult, to_runresult

RUN_COLUMNS = [
    "wave",
    "operator",
    "probe",
    "status",
    "run_id",
    "framework",
    "config",
    "task",
    "seed",
    "injection_seq",
    "injection_verified",
    "task_passed",
    "error",
    "source_path",
    "source_sha256",
    "record",
    "scored",
    "dagster_run_id",
    "materialized_at",
    "attempt",
]
EVENT_COLUMNS = ["wave", "operator", "probe", "run_id", "seq", "agent", "kind"]  # payloads: in the record
SLOT_KEY = ["wave", "operator", "probe"]


def record_sql(alias: str = "runs") -> str:
    """A run's record in SQL: its own, or for an imported run the landed file it was read from
    (stored once, in `corpus_files`; NULL if the landing has since been replaced)."""
    return (
        f"COALESCE({alias}.record::VARCHAR, (SELECT f.body FROM corpus_files f WHERE f.wave = {alias}.wave "
        f"AND f.rel_path = {alias}.source_path AND f.sha256 = {alias}.source_sha256))"
    )


@dataclass(frozen=True)
class RunSlot:
    """One run a partition stands for: a fault run (operator set) or a baseline (operator None)."""

    operator: str | None
    probe: Probe
    source_path: str
    record: RunRecord | None = None  # None: the run is absent
    source_sha256: str | None = None
    attempt: int | None = None  # the live attempt this slot holds; None for imports


def write_slots(con, wave: str, slots: list[RunSlot], dagster_run_id: str) -> tuple[int, int]:
    """Replace the rows of these slots (call inside a transaction); returns (present, absent)."""
    at, runs, events = now(), [], []
    for s in slots:
        r, op = s.record, s.operator or ""
        runs.append(
            (
                wave,
                op,
                s.probe.key,
                "present" if r else "absent",
                r.run_id if r else None,
                s.probe.framework,
                s.probe.config,
                s.probe.task,
                s.probe.seed,
                r.injection_seq if r else None,
                r.injection_verified if r else None,
                r.task_passed if r else None,
                r.error if r else None,
                s.source_path,
                s.source_sha256,
                json.dumps(full := to_runresult(r)) if r else None,
                json.dumps(scored_fields(full)) if r else None,
                dagster_run_id,
                at,
                s.attempt,
            )
        )
        for e in r.events if r else ():
            events.append((wave, op, s.probe.key, r.run_id, e.seq, e.agent, e.kind))
    keys = [(wave, s.operator or "", s.probe.key) for s in slots]
    replace_values(con, "runs", SLOT_KEY, keys, RUN_COLUMNS, runs)
    replace_values(con, "events", SLOT_KEY, keys, EVENT_COLUMNS, events)
    for s in slots:  # spend follows every stored record, so no write path can drop it
        write_calls(con, wave, s.operator, s.probe.key, s.record, s.source_sha256)
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
    return _read_slots(con, wave, keys, picked=False)


def read_scored_runs(con, wave: str, keys: list[tuple[str, str]]) -> dict[tuple[str, str], StoredRun]:
    """`read_runs` as the scorer and the judge's locating read it: each record's reference-schema
    fields only (RESULT_KEYS): `runs.scored` (`sabot.store.scored`), else picked out of the record in
    the store. A live record also carries its model exchanges and usage (`extra`, most of its bytes),
    which no verdict reads: here `extra` is empty."""
    return _read_slots(con, wave, keys, picked=True)


def _read_slots(con, wave: str, keys: list[tuple[str, str]], picked: bool) -> dict[tuple[str, str], StoredRun]:
    keys = list(dict.fromkeys(keys))  # a baseline asked for once per cell of its probe is read once
    if not keys:
        return {}
    slots = f"FROM runs r JOIN ({WANTED_SLOTS}) w ON r.operator = w.operator AND r.probe = w.probe WHERE r.wave = ?"
    wanted = [*column_lists(keys), wave]
    try:
        if picked:  # the stored fields; a row without them (an import, an older row) picked from its record
            (fields, parts), scored = picked_sql("rec"), scored_column(con, "r")
            rows = con.execute(
                f"SELECT r.operator, r.probe, r.status, {scored}::VARCHAR, r.source_path, r.source_sha256 {slots} "
                f"AND {scored} IS NOT NULL UNION ALL SELECT operator, probe, status, ({fields})::VARCHAR, source_path, "
                f"source_sha256 FROM (SELECT *, {parts} AS parts FROM (SELECT r.operator, r.probe, r.status, "
                f"{record_sql('r')} AS rec, r.source_path, r.source_sha256 {slots} AND {scored} IS NULL))",
                wanted + wanted,
            ).fetchall()
        else:
            rows = con.execute(
                f"SELECT r.operator, r.probe, r.status, {record_sql('r')}, r.source_path, r.source_sha256 {slots}",
                wanted,
            ).fetchall()
    except duckdb.InvalidInputException:
        if not picked:
            raise
        rows = None  # a record that is not JSON: read whole, so the parser names the file and what is wrong
    if rows is None:
        return _read_slots(con, wave, keys, picked=False)
    out = {}
    for op, probe, status, record, path, sha in rows:
        if status == "present" and record is None:
            raise OrphanedRuns(orphan_message(None, wave, sum(1 for r in rows if r[2] == "present" and r[3] is None)))
        parsed = parse_runresult(json.loads(record), path) if record else None
        out[(op, probe)] = StoredRun(status, parsed, path, sha)
    return out


def read_baselines(con, wave: str) -> list[RunRecord]:
    """Every present baseline of a wave, in probe order, as the scorer reads it (`read_scored_runs`)."""
    probes = [
        p
        for (p,) in con.execute(
            "SELECT probe FROM runs WHERE wave = ? AND operator = '' AND status = 'present' ORDER BY probe", [wave]
        ).fetchall()
    ]
    runs = read_scored_runs(con, wave, [("", p) for p in probes])
    return [runs[("", p)].record for p in probes]


def write_intent(con, wave: str, operator: str | None, probe: str, run_id: str, intent: list) -> None:
    con.execute(
        "DELETE FROM simulator_intent WHERE wave = ? AND operator = ? AND probe = ?", [wave, operator or "", probe]
    )
    con.execute(
        "INSERT INTO simulator_intent VALUES (?, ?, ?, ?, ?)", [wave, operator or "", probe, run_id, json.dumps(intent)]
    )


def run_endpoints(con, wave: str) -> list[str | None]:
    """The model endpoint each of a wave's present runs was made against, one entry per run: as its
    record labels it, else (a run that ended in RUN_ERROR before its record said, e.g. a dead
    provider) as its attempt in the run root recorded it. A wave with no present run answers with
    the endpoints its attempts were made against (a wave a refused key stopped before any run)."""
    has_attempts = bool(con.execute("SELECT 1 FROM duckdb_tables() WHERE table_name = 'attempts'").fetchone())
    attempt = (
        (
            "(SELECT ANY_VALUE(a.endpoint) FROM attempts a WHERE a.wave = runs.wave AND a.operator = runs.operator "
            "AND a.probe = runs.probe AND a.source_sha256 = runs.source_sha256)"
        )
        if has_attempts
        else "NULL"
    )
    rows = con.execute(
        f"SELECT COALESCE(json_extract_string({record_sql()}, '$.endpoint'), {attempt}) FROM runs "
        "WHERE wave = ? AND status = 'present'",
        [wave],
    ).fetchall()
    if rows or not has_attempts:
        return [r[0] for r in rows]
    return [
        r[0]
        for r in con.execute("SELECT endpoint FROM attempts WHERE wave = ? AND endpoint IS NOT NULL", [wave]).fetchall()
    ]


# --- live attempts -------------------------------------------------------------------------------

ATTEMPT_COLUMNS = [
    "wave",
    "operator",
    "probe",
    "attempt",
    "outcome",
    "run_id",
    "error",
    "runner_version",
    "endpoint",
    "pipeline_model",
    "downgrade_model",
    "protocol",
    "source_path",
    "source_sha256",
    "record",
    "intent",
    "dagster_run_id",
    "started_at",
    "finished_at",
    "ingested_at",
]


class AttemptConflict(ValueError):
    """An attempt number already stored with different content: the run root and store disagree."""


def ingest_attempt(con, attempt: Attempt, dagster_run_id: str) -> bool:
    """Append one finished attempt and rewrite its slot's scored run, in one transaction.

    Returns False when the attempt was already ingested (same content): nothing changes.
    """
    from sabot.store.db import transaction

    key = [attempt.wave, attempt.operator or "", attempt.probe.key, attempt.number]
    # fetchall, not fetchone: DuckDB 2 refuses new work on a connection with an unfinished result
    stored = next(
        iter(
            con.execute(
                "SELECT source_sha256 FROM attempts WHERE wave = ? AND operator = ? AND probe = ? AND attempt = ?", key
            ).fetchall()
        ),
        None,
    )
    if stored is not None:
        if stored[0] != attempt.sha256:
            raise AttemptConflict(
                f"{attempt.source_path}: attempt {attempt.number} is stored with sha256 {stored[0][:12]}, the file has {attempt.sha256[:12]}"
            )
        return False
    i = attempt.identity
    with transaction(con):
        con.execute(
            f"INSERT INTO attempts ({', '.join(ATTEMPT_COLUMNS)}) VALUES ({', '.join('?' * len(ATTEMPT_COLUMNS))})",
            [
                *key,
                attempt.outcome,
                attempt.record.run_id,
                attempt.record.error,
                i.runner_version,
                i.endpoint,
                i.pipeline_model,
                i.downgrade_model,
                i.protocol,
                attempt.source_path,
                attempt.sha256,
                json.dumps(to_runresult(attempt.record)),
                json.dumps(attempt.intent),
                attempt.dagster_run_id,
                attempt.started_at,
                attempt.finished_at,
                now(),
            ],
        ).fetchall()  # finish the statement before registering frames on this connection
        if _rewrite_slot(con, attempt, dagster_run_id) != attempt.number:
            # Every paid call is stored, a RUN_ERROR attempt's too, even where the slot keeps a good run
            # (the slot's own record had its calls stored as the slot was written).
            write_calls(con, attempt.wave, attempt.operator, attempt.probe.key, attempt.record)
    return True


def _rewrite_slot(con, attempt: Attempt, dagster_run_id: str) -> int | None:
    """The slot's scored run: its latest complete attempt, else its latest RUN_ERROR attempt. Returns
    that attempt's number (None: only stopped attempts, the slot stays missing, to be run later)."""
    wave, operator, probe = attempt.wave, attempt.operator, attempt.probe
    row = next(
        iter(
            con.execute(
                "SELECT attempt, source_path, source_sha256 FROM attempts "
                "WHERE wave = ? AND operator = ? AND probe = ? AND outcome IN ('complete', 'run_error') "
                "ORDER BY outcome = 'complete' DESC, attempt DESC LIMIT 1",
                [wave, operator or "", probe.key],
            ).fetchall()
        ),
        None,
    )
    if row is None:
        return None
    number, path, sha = row
    if number == attempt.number:  # the attempt just stored (the usual case): its record is in memory
        record, intent = attempt.record, attempt.intent
    else:
        stored, intent = con.execute(
            "SELECT record, intent FROM attempts WHERE wave = ? AND operator = ? AND probe = ? AND attempt = ?",
            [wave, operator or "", probe.key, number],
        ).fetchone()
        record, intent = parse_runresult(json.loads(stored), path), json.loads(intent)
    write_slots(con, wave, [RunSlot(operator, probe, path, record, sha, number)], dagster_run_id)
    write_intent(con, wave, operator, probe.key, record.run_id, intent)
    return number


@dataclass(frozen=True)
class StoredAttempt:
    number: int
    outcome: str
    identity: Identity
    record: RunRecord
    source_path: str


def scored_attempts(con, wave: str, keys: list[tuple[str, str]]) -> dict[tuple[str, str], StoredAttempt]:
    """(operator or '', probe) -> the attempt each slot's scored run is, for live slots among `keys`."""
    if not keys:
        return {}
    rows = con.execute(
        "SELECT a.operator, a.probe, a.attempt, a.outcome, a.runner_version, a.endpoint, a.pipeline_model, a.downgrade_model, "
        f"a.protocol, a.record, a.source_path FROM runs r JOIN ({WANTED_SLOTS}) w ON r.operator = w.operator AND r.probe = w.probe "
        "JOIN attempts a ON a.wave = r.wave AND a.operator = r.operator AND a.probe = r.probe AND a.attempt = r.attempt "
        "WHERE r.wave = ?",
        [*column_lists(keys), wave],
    ).fetchall()
    return {
        (op, probe): StoredAttempt(
            n, outcome, Identity(rv, ep, pm, dm, proto), parse_runresult(json.loads(rec), path), path
        )
        for op, probe, n, outcome, rv, ep, pm, dm, proto, rec, path in rows
    }


def attempt_history(con, wave: str, operator: str, probe: str) -> list[dict]:
    """Every attempt of one slot, oldest first (for lineage)."""
    cols = (
        "attempt",
        "outcome",
        "error",
        "endpoint",
        "runner_version",
        "source_path",
        "source_sha256",
        "dagster_run_id",
        "finished_at",
    )
    rows = con.execute(
        f"SELECT {', '.join(cols)} FROM attempts WHERE wave = ? AND operator = ? AND probe = ? ORDER BY attempt",
        [wave, operator, probe],
    ).fetchall()
    return [dict(zip(cols, r)) for r in rows]


def unscored_fault_slots(con, wave: str, ruleset: str) -> list[tuple[str, str]]:
    """Fault slots (or slots whose baseline is stored) with no verdict under `ruleset`: cells whose
    verdict never ran, e.g. because their run ended in RUN_ERROR and the partition failed."""
    rows = con.execute(
        "SELECT DISTINCT r.operator, r.probe FROM runs r WHERE r.wave = ? AND r.operator <> '' AND r.status = 'present' "
        "AND NOT EXISTS (SELECT 1 FROM cell_verdicts v WHERE v.wave = r.wave AND v.ruleset = ? AND v.operator = r.operator AND v.probe = r.probe) "
        "ORDER BY 1, 2",
        [wave, ruleset],
    ).fetchall()
    return [tuple(r) for r in rows]
