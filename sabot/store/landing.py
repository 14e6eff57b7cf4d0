"""The import landing zone: a validated corpus scan, stored verbatim in one transaction, and the
run slots the run assets write from it."""

import contextlib
import io
import json
from pathlib import Path

import pandas as pd

from sabot.corpus import EVENTS, CorpusError, CorpusScan, digest_of
from sabot.json_stream import StreamError, stream_document
from sabot.store.db import insert, now, transaction
from sabot.store.runs import EVENT_COLUMNS, RUN_COLUMNS, RunSlot, write_slots
from sabot.store.spend import write_calls
from sabot.trace import TraceError, parse_event, parse_runresult

EVENT_BATCH = 2000


def write_import(con, scan: CorpusScan, registry_hash: str) -> int:
    """Replace a wave's landed files with this scan, in one transaction: the import lands whole or
    the store stays as it was. DuckDB reads each file itself (`read_text`), so its text never passes
    through Python, and keeps it only if its hash is still the scan's."""
    with transaction(con), one_thread(con):
        con.execute("DELETE FROM corpus_files WHERE wave = ?", [scan.wave])
        for f in scan.files:
            con.execute("INSERT INTO corpus_files SELECT ?, ?, ?, ?, ?, ?, content FROM read_text(?)",
                        [scan.wave, f.kind, f.operator or "", f.probe.key, f.rel_path, f.sha256, str(f.path)]).fetchall()
            # hashed once stored: hashing in the INSERT's filter costs DuckDB another copy of the text
            landed = con.execute("SELECT sha256(body) FROM corpus_files WHERE wave = ? AND rel_path = ?", [scan.wave, f.rel_path]).fetchall()
            if [row[0] for row in landed] != [f.sha256]:
                raise CorpusError(f"{f.rel_path}: changed since the corpus was scanned (its sha256 is no longer {f.sha256[:12]}); nothing was imported")
        con.execute(
            "INSERT INTO corpus_imports VALUES (?, ?, ?, ?, ?, ?, ?)",
            [scan.wave, str(scan.root), now(), len(scan.files), json.dumps(scan.missing), json.dumps(scan.not_run), registry_hash],
        )
    return len(scan.files)


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
    con.register("_wanted", pd.DataFrame(keys, columns=["operator", "probe"]))
    rows = con.execute(
        "SELECT f.operator, f.probe, f.rel_path, f.sha256 FROM corpus_files f "
        "JOIN _wanted w ON f.operator = w.operator AND f.probe = w.probe WHERE f.wave = ? AND f.kind = ?",
        [wave, kind],
    ).fetchall()
    con.unregister("_wanted")
    return {(op, probe): (path, sha) for op, probe, path, sha in rows}


def write_landed_slots(con, wave: str, slots: list[RunSlot], dagster_run_id: str) -> tuple[int, int]:
    """Write run slots from the landing zone (call inside a transaction); returns (present, absent).

    A present slot's record is its landed file, not a copy (read through `record_sql`); its events are streamed a batch at
    a time, from the corpus file while it still holds the landed bytes (the hash is checked as it
    streams), else from the store's copy: no run is ever whole in Python. A record with priced calls
    is read whole for its spend, as a live run's is."""
    absent = [s for s in slots if s.source_sha256 is None]
    write_slots(con, wave, absent, dagster_run_id)
    imported = latest_import(con, wave)
    root = Path(imported["corpus_root"]) if imported else None
    at = now()
    with one_thread(con):
        for slot in slots:
            if slot.source_sha256 is not None:
                _write_landed_slot(con, wave, slot, root, dagster_run_id, at)
    return len(slots) - len(absent), len(absent)


def _write_landed_slot(con, wave: str, slot: RunSlot, root: Path | None, dagster_run_id: str, at) -> None:
    op, probe = slot.operator or "", slot.probe
    key = [wave, op, probe.key]
    for table in ("runs", "events"):
        con.execute(f"DELETE FROM {table} WHERE wave = ? AND operator = ? AND probe = ?", key).fetchall()
    doc = _stream_events(con, wave, slot, root)
    r = doc["trace"]["run_id"]
    con.execute("UPDATE events SET run_id = ? WHERE wave = ? AND operator = ? AND probe = ?", [r, *key]).fetchall()
    con.execute(
        f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({', '.join('?' * len(RUN_COLUMNS))})",
        [*key, "present", r, probe.framework, probe.config, probe.task, probe.seed, doc["injection_seq"], doc["injection_verified"],
         doc["task_passed"], doc["error"], slot.source_path, slot.source_sha256, None, dagster_run_id, at, None],
    ).fetchall()  # record NULL: an imported run's record is its landed file (runs.record_sql), not a second copy
    if doc.get("usage"):
        body = con.execute("SELECT body FROM corpus_files WHERE wave = ? AND rel_path = ?", [wave, slot.source_path]).fetchall()[0][0]
        write_calls(con, wave, slot.operator, probe.key, parse_runresult(json.loads(body), slot.source_path), slot.source_sha256)


def _stream_events(con, wave: str, slot: RunSlot, root: Path | None) -> dict:
    """Insert a landed run's events (run_id left blank) and return the rest of its record."""
    source = root / slot.source_path if root else None
    if source is not None and source.is_file() and not source.is_symlink():
        with open(source, "rb") as fp:
            doc, sha256 = _insert_events(con, wave, slot, fp)
        if sha256 == slot.source_sha256:
            return doc
        con.execute("DELETE FROM events WHERE wave = ? AND operator = ? AND probe = ?", [wave, slot.operator or "", slot.probe.key]).fetchall()
    raw = con.execute("SELECT encode(body) FROM corpus_files WHERE wave = ? AND rel_path = ?", [wave, slot.source_path]).fetchall()[0][0]
    return _insert_events(con, wave, slot, io.BytesIO(raw))[0]


def _insert_events(con, wave: str, slot: RunSlot, fp) -> tuple[dict, str]:
    batch: list[dict] = []

    def flush() -> None:
        insert(con, "events", pd.DataFrame(batch, columns=EVENT_COLUMNS))
        batch.clear()

    def add(index: int, obj) -> None:
        e = parse_event(obj, slot.source_path, index)
        batch.append({"wave": wave, "operator": slot.operator or "", "probe": slot.probe.key, "run_id": "", "seq": e.seq,
                      "agent": e.agent, "kind": e.kind, "payload": json.dumps(e.payload)})
        if len(batch) >= EVENT_BATCH:
            flush()

    try:
        doc, sha256, _ = stream_document(fp, EVENTS, add)
    except (StreamError, TraceError):  # a corpus file changed on disk into something else: not the landed bytes
        return {}, ""
    flush()
    return doc, sha256


def latest_import(con, wave: str) -> dict | None:
    row = con.execute(
        "SELECT corpus_root, imported_at, files, missing, not_run, registry_hash FROM corpus_imports "
        "WHERE wave = ? ORDER BY imported_at DESC LIMIT 1",
        [wave],
    ).fetchone()
    if row is None:
        return None
    root, at, files, missing, not_run, registry_hash = row
    return {"corpus_root": root, "imported_at": at, "files": files, "missing": json.loads(missing), "not_run": json.loads(not_run), "registry_hash": registry_hash}


def landed_digest(con, wave: str) -> str | None:
    """The digest of what is landed for a wave, comparable with `CorpusScan.digest()`."""
    rows = con.execute("SELECT rel_path, sha256 FROM corpus_files WHERE wave = ? ORDER BY rel_path", [wave]).fetchall()
    return digest_of(rows) if rows else None
