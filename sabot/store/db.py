"""DuckDB connections and the two write primitives every table uses.

Connections are opened only around SQL. DuckDB's Python replacement scans are switched off, so a
missing table is an error rather than a silent read of a same-named Python variable.

DuckDB has one writer per file. Opening waits for a held lock with exponential backoff for at most
SABOT_STORE_LOCK_WAIT seconds (default 100, about what dagster-duckdb's own loop waits), then
raises `StoreLocked`: one line naming the file and the process holding it.
"""

import collections
import contextlib
import datetime as dt
import hashlib
import json
import os
import re
from pathlib import Path

import duckdb
import tenacity

from sabot.store.scored import fill_scored

SCHEMA = (Path(__file__).with_name("schema.sql")).read_text()
LOCK_WAIT_ENV = "SABOT_STORE_LOCK_WAIT"
_HOLDER = re.compile(r"Conflicting lock is held in (?P<exe>.+?) \(PID (?P<pid>\d+)\)")


class StoreLocked(RuntimeError):
    """The store file is locked by another process past the wait; the message names the holder."""


def lock_holder(exc: BaseException) -> str | None:
    """'PID 123 (/usr/bin/python3)' from DuckDB's lock error, or None if it is not a lock error."""
    match = _HOLDER.search(str(exc))
    return f"PID {match['pid']} ({match['exe']})" if match else None


def _lock_wait() -> float:
    return float(os.environ.get(LOCK_WAIT_ENV, "100"))


def _create_whole(path: Path, config: dict) -> None:
    """Create a new store beside its path and link it into place: two commands starting on a fresh
    store at once would otherwise race, one opening the file the other has created but not yet
    written a header to ("not a valid DuckDB database file"). The link fails if the path exists, so
    the store any opener sees is always a whole database."""
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.{os.getpid()}.creating")
    try:
        prepare(duckdb.connect(str(draft), config=config)).close()  # closing checkpoints: no WAL is left beside it
        with contextlib.suppress(FileExistsError):
            os.link(draft, path)
    finally:
        draft.unlink(missing_ok=True)


# Stores this process holds open (`held`), by real path: each opening inside is a cursor on it.
_HELD: dict[str, duckdb.DuckDBPyConnection] = {}


@contextlib.contextmanager
def held(path: str | Path):
    """Hold the store open for writing in this process while a short command works on it (a rescore):
    every opening inside, read-only or not and whatever its configuration, is a new cursor on the held
    database. Opening a DuckDB file costs 11-22 ms of CPU and closing the last connection checkpoints
    it; a rescore opens the store six times, a fifth of its time (profiled). The file stays locked to
    other processes meanwhile, as it is during each write anyway; they wait (`open_store`)."""
    key = os.path.realpath(path)
    if key in _HELD:  # already held further up: nothing more to do
        yield
        return
    con = prepare(open_store(path))
    _HELD[key] = con
    try:
        yield
    finally:
        del _HELD[key]
        con.close()


def open_store(path: str | Path, read_only: bool = False, config: dict | None = None) -> duckdb.DuckDBPyConnection:
    """duckdb.connect, waiting out a held lock for a bounded time (tenacity), then StoreLocked; a
    cursor on the store when this process holds it (`held`)."""
    if _HELD and str(path) != ":memory:" and os.path.realpath(path) in _HELD:
        return _HELD[os.path.realpath(path)].cursor()
    if not read_only and str(path) != ":memory:" and not Path(path).exists():
        _create_whole(Path(path), config or {})
    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(lambda e: isinstance(e, duckdb.IOException) and lock_holder(e) is not None),
        wait=tenacity.wait_exponential(multiplier=0.1, max=10),
        stop=tenacity.stop_after_delay(_lock_wait()),
        reraise=True,
    )
    try:
        return retrying(duckdb.connect, str(path), read_only=read_only, config=config or {})
    except duckdb.IOException as exc:
        holder = lock_holder(exc)
        if holder is None:
            raise
        raise StoreLocked(
            f"store {path} is locked by {holder}; waited {_lock_wait():g} s ({LOCK_WAIT_ENV}). "
            "Finished runs stay in the run root and are ingested by the next wave run"
        ) from exc


# The schema a store was last brought to, by hash: an opening for writing that finds it current skips
# the schema's statements and the fill of older rows (about 15 ms of every asset's opening).
_SCHEMA_SHA256 = hashlib.sha256(SCHEMA.encode()).hexdigest()


def _schema_is_current(con: duckdb.DuckDBPyConnection) -> bool:
    try:
        return con.execute("SELECT sha256 FROM store_schema").fetchall() == [(_SCHEMA_SHA256,)]
    except duckdb.CatalogException:  # a new store, or one from before this table
        return False


def prepare(con: duckdb.DuckDBPyConnection, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    con.execute("SET python_enable_replacements = false")
    if not read_only and not _schema_is_current(con):
        con.execute(SCHEMA)
        fill_scored(con)
        con.execute("CREATE OR REPLACE TABLE store_schema AS SELECT ? AS sha256", [_SCHEMA_SHA256])
    return con


@contextlib.contextmanager
def connect(path: str | Path, read_only: bool = False):
    if not read_only:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    con = open_store(path, read_only=read_only)
    try:
        yield prepare(con, read_only)
    finally:
        con.close()


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection):
    """All-or-nothing: a failure anywhere inside leaves the store as it was."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


SMALL_WRITE = 64  # rows: below this a parameterised VALUES statement is several times cheaper than unnested lists


def replace_values(
    con, table: str, key_columns: list[str], keys: list[tuple], columns: list[str], rows: list[tuple]
) -> None:
    """Delete the rows whose key columns match one of `keys`, then insert `rows` (call inside a
    transaction). A few rows, as one run's ingest writes, go as VALUES statements; many, as a reading
    of a wave writes, as one list per column (`insert_rows`). Neither needs pandas."""
    if len(keys) == 1:  # equality on each column: DuckDB prunes by the columns' zone maps
        con.execute(f"DELETE FROM {table} WHERE {' AND '.join(f'{c} = ?' for c in key_columns)}", list(keys[0]))
    elif len(keys) > SMALL_WRITE:
        con.execute(
            f"DELETE FROM {table} WHERE ({', '.join(key_columns)}) IN (SELECT {_unnested(len(key_columns))})",
            column_lists(keys),
        )
    elif keys:
        con.execute(
            f"DELETE FROM {table} WHERE ({', '.join(key_columns)}) IN (VALUES {_placeholders(keys)})",
            [v for k in keys for v in k],
        )
    if len(rows) > SMALL_WRITE:
        insert_rows(con, table, columns, rows)
    elif rows:
        con.execute(
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES {_placeholders(rows)}", [v for r in rows for v in r]
        )


def insert_rows(con, table: str, columns: list[str], rows: list[tuple]) -> None:
    """Insert rows given as tuples in one statement: each column goes as one list parameter, the lists
    unnested side by side. At a thousand rows this is as fast as scanning a DataFrame (6-9 ms against
    5-10 ms for 900 rows of 8 columns), without importing pandas (about 0.3 s of CPU) into a command
    that needs nothing else of it; each value is cast to its column's type as any INSERT casts."""
    if rows:
        con.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {_unnested(len(columns))}", column_lists(rows))


# The slots a read asks for, joined as two list parameters (`column_lists(keys)`): no frame to register
# (DuckDB refuses one beside a caller's unfinished result) and no pandas import.
WANTED_SLOTS = "SELECT unnest(?::VARCHAR[]) AS operator, unnest(?::VARCHAR[]) AS probe"


def _unnested(n: int) -> str:
    return ", ".join(["unnest(?)"] * n)


def column_lists(rows: list[tuple]) -> list[list]:
    return [list(column) for column in zip(*rows)]


def _placeholders(rows: list[tuple]) -> str:
    one = f"({', '.join('?' * len(rows[0]))})"
    return ", ".join([one] * len(rows))


def rows_digest(con, table: str, columns: str, where: str, params: list) -> str:
    """`count:md5` over the rows `where` selects, each as its `columns` joined: what a fingerprint
    compares to know whether rows were written since (one small query per table)."""
    return con.execute(f"SELECT {_digest_sql(columns)} FROM {table} WHERE {where}", params).fetchone()[0]


def _digest_sql(columns: str) -> str:
    return f"count(*) || ':' || coalesce(md5(string_agg(concat_ws('|', {columns}), ',' ORDER BY concat_ws('|', {columns}))), '')"


def rows_digests(con, table: str, columns: str, by: str, where: str, params: list) -> dict:
    """`rows_digest` for each value of the column `by` among the rows `where` selects, in one scan
    (a value with no rows: "0:", as `rows_digest` gives)."""
    rows = con.execute(
        f"SELECT {by}, {_digest_sql(columns)} FROM {table} WHERE {where} GROUP BY {by}", params
    ).fetchall()
    return collections.defaultdict(lambda: "0:", rows)


def append_manifest(
    con, wave: str, asset: str, dagster_run_id: str, partitions: int, row_count: int, content_sha256: str, inputs
) -> None:
    con.execute(
        "INSERT INTO manifest (written_at, wave, asset, dagster_run_id, partitions, row_count, content_sha256, inputs) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [now(), wave, asset, dagster_run_id, partitions, row_count, content_sha256, json.dumps(inputs)],
    )


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
