"""The import landing zone: a validated corpus scan, stored verbatim in one transaction, and the
run slots the run assets write from it."""

import contextlib
import io
import json
from pathlib import Path


from sabot.corpus import EVENTS, CorpusError, CorpusScan, digest_of
from sabot.json_stream import StreamError, stream_document
from sabot.store.db import WANTED_SLOTS, column_lists, insert_rows, now, transaction
from sabot.store.runs import EVENT_COLUMNS, RUN_COLUMNS, RunSlot, write_slots
from sabot.store.spend import write_calls
from sabot.store.wave_replace import Replaced, clear_wave, drop_unlanded_slots
from sabot.trace import TraceError, parse_event, parse_runresult

EVENT_BATCH = 2000


def write_import(con, scan: CorpusScan, registry_hash: str, replace: bool = False) -> Replaced | None:
    """Replace a wave's landed files with this scan, in one transaction: the import lands whole or
    the store stays as it was. DuckDB reads each file itself (`read_text`), so its text never passes
    through Python, and keeps it only if its hash is still the scan's. With `replace`, every row the
    wave's earlier runs produced goes in the same transaction (returned: what was replaced); without
    it, slots whose file left the corpus go, so no stored run points at a landing that is gone."""
    replaced = None
    with transaction(con), one_thread(con):
        if replace:
            previous = latest_import(con, scan.wave)
            replaced = clear_wave(con, scan.wave, previous["corpus_root"] if previous else None)
        con.execute("DELETE FROM corpus_files WHERE wave = ?", [scan.wave])
        for f in scan.files:
            con.execute(
                "INSERT INTO corpus_files SELECT ?, ?, ?, ?, ?, ?, content FROM read_text(?)",
                [scan.wave, f.kind, f.operator or "", f.probe.key, f.rel_path, f.sha256, str(f.path)],
            ).fetchall()
            # hashed once stored: hashing in the INSERT's filter costs DuckDB another copy of the text
            landed = con.execute(
                "SELECT sha256(body) FROM corpus_files WHERE wave = ? AND rel_path = ?", [scan.wave, f.rel_path]
            ).fetchall()
            if [row[0] for row in landed] != [f.sha256]:
                raise CorpusError(
                    f"{f.rel_path}: changed since the corpus was scanned (its sha256 is no longer {f.sha256[:12]}); nothing was imported"
                )
        con.execute(
            "INSERT INTO corpus_imports VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                scan.wave,
                str(scan.root),
                now(),
                len(scan.files),
                json.dumps(scan.missing),
                json.dumps(scan.not_run),
                registry_hash,
            ],
        )
        drop_unlanded_slots(con, scan.wave)
    return replaced


@contextlib.contextmanager
def one_thread(con):
    """DuckDB on one thread while large texts move: each thread buffers its own copy of a row group."""
    threads = con.execute("SELECT current_setting('threads')").fetchall()[0][0]
    con.execute("SET threads = 1")
    try:
        yield con
    finally:
        con.execute(f"SET threads = {int(threads)}")


def landed_files(con, wave: str, kind: str, keys: list[tuple[str, str]]) -> dict[tuple[str, str], tuple[str, str]]:
    """(operator, probe) -> (rel_path, sha256) for the landed run files among `keys`."""
    if not keys:
        return {}
    rows = con.execute(
        "SELECT f.operator, f.probe, f.rel_path, f.sha256 FROM corpus_files f "
        f"JOIN ({WANTED_SLOTS}) w ON f.operator = w.operator AND f.probe = w.probe WHERE f.wave = ? AND f.kind = ?",
        [*column_lists(keys), wave, kind],
    ).fetchall()
    return {(op, probe): (path, sha) for op, probe, path, sha in rows}


def write_landed_slots(con, wave: str, slots: list[RunSlot], dagster_run_id: str) -> tuple[int, int]:
    """Write run slots from the landing zone (call inside a transaction); returns (present, absent).

    A present slot's record is its landed file, not a copy (read through `record_sql`); its events are streamed a batch at
    a time, from the corpus file while it still holds the landed bytes (the hash is checked as it
    streams), else from the store's copy: no run is ever whole in Python. A record with priced calls
    is read whole for its spend, as a live run's is."""
    absent = [s for s in slots if s.source_sha256 is None]
    present = [s for s in slots if s.source_sha256 is not None]
    if absent:
        write_slots(con, wave, absent, dagster_run_id)
    imported = latest_import(con, wave)
    root = Path(imported["corpus_root"]) if imported else None
    keys = [(s.operator or "", s.probe.key) for s in present]
    for table in ("runs", "events"):
        if keys:
            con.execute(
                f"DELETE FROM {table} WHERE wave = ? AND (operator, probe) IN (SELECT operator, probe FROM ({WANTED_SLOTS}))",
                [wave, *column_lists(keys)],
            )
    at, rows, events = now(), [], _EventWriter(con, wave)
    with one_thread(con):
        for slot in present:
            doc = _stream_events(con, events, slot, root)
            events.finish(slot, doc["trace"]["run_id"])
            rows.append(_run_row(wave, slot, doc, dagster_run_id, at))
            if doc.get("usage"):
                body = con.execute(
                    "SELECT body FROM corpus_files WHERE wave = ? AND rel_path = ?", [wave, slot.source_path]
                ).fetchall()[0][0]
                write_calls(
                    con,
                    wave,
                    slot.operator,
                    slot.probe.key,
                    parse_runresult(json.loads(body), slot.source_path),
                    slot.source_sha256,
                )
        events.flush()
        insert_rows(con, "runs", RUN_COLUMNS, [tuple(row.get(c) for c in RUN_COLUMNS) for row in rows])
    return len(present), len(absent)


def _run_row(wave: str, slot: RunSlot, doc: dict, dagster_run_id: str, at) -> dict:
    """A present slot's row; `record` NULL: an imported run's record is its landed file (`record_sql`)."""
    p = slot.probe
    return {
        "wave": wave,
        "operator": slot.operator or "",
        "probe": p.key,
        "status": "present",
        "run_id": doc["trace"]["run_id"],
        "framework": p.framework,
        "config": p.config,
        "task": p.task,
        "seed": p.seed,
        "injection_seq": doc["injection_seq"],
        "injection_verified": doc["injection_verified"],
        "task_passed": doc["task_passed"],
        "error": doc["error"],
        "source_path": slot.source_path,
        "source_sha256": slot.source_sha256,
        "record": None,
        "dagster_run_id": dagster_run_id,
        "materialized_at": at,
        "attempt": None,
    }


class _EventWriter:
    """Events of many runs, inserted EVENT_BATCH rows at a time. A run's id is known only once its
    file is read through, so its rows wait with a blank id, filled in by `finish` (or, for rows
    already inserted, updated)."""

    def __init__(self, con, wave: str):
        self.con, self.wave, self.rows, self.blank = con, wave, [], set()

    def add(self, slot: RunSlot, index: int, obj) -> None:
        e = parse_event(obj, slot.source_path, index)
        self.rows.append(
            {
                "wave": self.wave,
                "operator": slot.operator or "",
                "probe": slot.probe.key,
                "run_id": "",
                "seq": e.seq,
                "agent": e.agent,
                "kind": e.kind,
            }
        )
        if len(self.rows) >= EVENT_BATCH:
            self.blank.add((slot.operator or "", slot.probe.key))
            self.flush()

    def flush(self) -> None:
        if self.rows:
            insert_rows(self.con, "events", EVENT_COLUMNS, [tuple(row[c] for c in EVENT_COLUMNS) for row in self.rows])
            self.rows.clear()

    def finish(self, slot: RunSlot, run_id: str) -> None:
        key = (slot.operator or "", slot.probe.key)
        for row in self.rows:
            if (row["operator"], row["probe"]) == key:
                row["run_id"] = run_id
        if key in self.blank:
            self.con.execute(
                "UPDATE events SET run_id = ? WHERE wave = ? AND operator = ? AND probe = ?", [run_id, self.wave, *key]
            ).fetchall()

    def discard(self, slot: RunSlot) -> None:
        key = (slot.operator or "", slot.probe.key)
        self.rows = [row for row in self.rows if (row["operator"], row["probe"]) != key]
        if key in self.blank:
            self.con.execute(
                "DELETE FROM events WHERE wave = ? AND operator = ? AND probe = ?", [self.wave, *key]
            ).fetchall()
            self.blank.discard(key)


def _stream_events(con, events: _EventWriter, slot: RunSlot, root: Path | None) -> dict:
    """Add a landed run's events to `events` and return the rest of its record: from the corpus file
    if it still holds the landed bytes, else from the store's copy."""
    source = root / slot.source_path if root else None
    if source is not None and source.is_file() and not source.is_symlink():
        with open(source, "rb") as fp:
            doc, sha256 = _read_events(events, slot, fp)
        if sha256 == slot.source_sha256:
            return doc
        events.discard(slot)
    raw = con.execute(
        "SELECT encode(body) FROM corpus_files WHERE wave = ? AND rel_path = ?", [events.wave, slot.source_path]
    ).fetchall()[0][0]
    return _read_events(events, slot, io.BytesIO(raw))[0]


def _read_events(events: _EventWriter, slot: RunSlot, fp) -> tuple[dict, str]:
    try:
        doc, sha256, _ = stream_document(fp, EVENTS, lambda index, obj: events.add(slot, index, obj))
    except (StreamError, TraceError):  # a corpus file changed on disk into something else: not the landed bytes
        return {}, ""
    return doc, sha256


def latest_import(con, wave: str) -> dict | None:
    rows = con.execute(
        "SELECT corpus_root, imported_at, files, missing, not_run, registry_hash FROM corpus_imports "
        "WHERE wave = ? ORDER BY imported_at DESC LIMIT 1",
        [wave],
    ).fetchall()
    row = rows[0] if rows else None
    if row is None:
        return None
    root, at, files, missing, not_run, registry_hash = row
    return {
        "corpus_root": root,
        "imported_at": at,
        "files": files,
        "missing": json.loads(missing),
        "not_run": json.loads(not_run),
        "registry_hash": registry_hash,
    }


def landed_digest(con, wave: str) -> str | None:
    """The digest of what is landed for a wave, comparable with `CorpusScan.digest()`."""
    rows = con.execute("SELECT rel_path, sha256 FROM corpus_files WHERE wave = ? ORDER BY rel_path", [wave]).fetchall()
    return digest_of(rows) if rows else None
