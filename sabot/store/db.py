"""DuckDB connections and the two write primitives every table uses.

Connections are opened only around SQL. DuckDB's Python replacement scans are switched off, so a
missing table is an error rather than a silent read of a same-named Python variable.
"""

import contextlib
import datetime as dt
import json
from pathlib import Path

import duckdb
import pandas as pd

SCHEMA = (Path(__file__).with_name("schema.sql")).read_text()


def prepare(con: duckdb.DuckDBPyConnection, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    con.execute("SET python_enable_replacements = false")
    if not read_only:
        con.execute(SCHEMA)
    return con


@contextlib.contextmanager
def connect(path: str | Path, read_only: bool = False):
    if not read_only:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(path), read_only=read_only)
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


def replace_rows(con, table: str, keys: pd.DataFrame, rows: pd.DataFrame) -> None:
    """Delete the rows whose key columns match `keys`, then insert `rows` (call inside a transaction)."""
    key_cols = list(keys.columns)
    con.register("_keys", keys)
    con.execute(f"DELETE FROM {table} WHERE ({', '.join(key_cols)}) IN (SELECT {', '.join(key_cols)} FROM _keys)")
    con.unregister("_keys")
    insert(con, table, rows)


def insert(con, table: str, rows: pd.DataFrame) -> None:
    if rows.empty:
        return
    con.register("_rows", rows)
    con.execute(f"INSERT INTO {table} ({', '.join(rows.columns)}) SELECT {', '.join(rows.columns)} FROM _rows")
    con.unregister("_rows")


def append_manifest(con, wave: str, asset: str, dagster_run_id: str, partitions: int, row_count: int, content_sha256: str, inputs) -> None:
    con.execute(
        "INSERT INTO manifest (written_at, wave, asset, dagster_run_id, partitions, row_count, content_sha256, inputs) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [now(), wave, asset, dagster_run_id, partitions, row_count, content_sha256, json.dumps(inputs)],
    )


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
