"""The instance storage named in dagster.yaml: Dagster's SQLite storage, with batched event writes.

Profiling a rescore showed Dagster's time going to its SQLite event log, not to scoring: every
event opened a new engine and connection for the run shard and again for the cross-run index,
committed (an fsync each) and closed (a WAL checkpoint each), at 15-25 ms CPU and more wall time
per event. A single-run backfill of N cells writes about 2N such events (a planned and a
materialized event per partition). This storage keeps Dagster's schema, files and layout
(`history/runs.db`, `history/runs/<run>.db`, `history/runs/index.db`, `schedules/`) and changes
only how rows reach them:

- `store_event_batch`, which the instance calls when `DAGSTER_EVENT_BATCH_SIZE` is set (this
  storage sets it, unless the environment already does), writes a batch in one transaction per
  shard instead of two transactions per event;
- engines are kept per shard, and one for the run storage (`history/runs.db`): a connection stays
  open, so closing does not checkpoint each time (the stock run storage opened and closed one per
  query, 2-3 ms each, a few hundred times per command);
- connections use `PRAGMA synchronous=NORMAL`, SQLite's documented setting for WAL mode: a commit
  is not fsynced, the database stays consistent, and a power loss may drop the last commits of the
  event log (never the DuckDB store, which holds the results);
- a new run's shard is a copy of an empty shard made once per Dagster version
  (`history/runs/shard-template-<version>.sqlite`): creating each shard's tables and stamping its
  Alembic revision (loading every migration script) cost about 0.3 s per run, more than the run;
- while the storage is built, Dagster's Alembic checks and stamps share one parsed migration
  directory (Dagster parses all ~180 scripts anew for each of the seven it makes on a new instance);
  the cross-run index's own check, which Dagster makes at its first use, is made then too (16 ms
  of CPU on its own, in the first run of every command).
"""

import os
import sqlite3
import tempfile
from collections import OrderedDict, defaultdict
from contextlib import contextmanager

import sqlalchemy as db
from dagster.version import __version__ as DAGSTER_VERSION
from dagster._core.events import ASSET_EVENTS
from dagster._core.storage.event_log.schema import SqlEventLogStorageTable
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME, SqliteEventLogStorage
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.sql import create_engine
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from dagster._core.storage.sqlite_storage import DagsterSqliteStorage, _event_logs_directory

BATCH_SIZE = "1000"  # events per batched write: a single-run backfill of a whole wave is one batch
OPEN_RUN_SHARDS = 8  # engines kept for the most recent runs' event shards; older ones are disposed


def _wal_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _kept_engine(conn_string: str):
    """An engine that keeps its SQLite connection open between uses (Dagster's use NullPool)."""
    engine = create_engine(
        conn_string,
        poolclass=db.pool.QueuePool,
        pool_size=1,
        max_overflow=2,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False},
    )
    db.event.listen(engine, "connect", _wal_pragmas)
    return engine


class KeptSqliteRunStorage(SqliteRunStorage):
    """Dagster's SQLite run storage (created and migrated by Dagster), with its connection kept."""

    def __init__(self, conn_string: str, inst_data=None):
        super().__init__(conn_string, inst_data)
        self._engine = _kept_engine(conn_string)

    @contextmanager
    def connect(self):
        with self._engine.connect() as conn, conn.begin():
            yield conn

    def dispose(self) -> None:
        super().dispose()
        self._engine.dispose()


class BatchedSqliteEventLogStorage(SqliteEventLogStorage):
    """Dagster's SQLite event log, writing a batch of events in one transaction per shard."""

    def __init__(self, base_dir: str, inst_data=None):
        self._engines: OrderedDict = OrderedDict()  # before super(): its set-up already connects
        self._known_tables: set[str] = set()
        super().__init__(base_dir, inst_data)

    @classmethod
    def from_config_value(cls, inst_data, config_value) -> "BatchedSqliteEventLogStorage":
        return cls(inst_data=inst_data, **config_value)

    def _engine(self, shard: str):
        engine = self._engines.get(shard)
        if engine is None:
            engine = self._engines[shard] = _kept_engine(self.conn_string_for_shard(shard))
            runs = [s for s in self._engines if s != INDEX_SHARD_NAME]
            for old in runs[:-OPEN_RUN_SHARDS]:
                self._engines.pop(old).dispose()
        else:
            self._engines.move_to_end(shard)
        return engine

    @contextmanager
    def _connect(self, shard: str):
        with self._db_lock:  # the parent's lock: the event watcher thread shares this storage
            if shard not in self._initialized_dbs:
                if shard == INDEX_SHARD_NAME or not self._copy_template(shard):
                    self._initdb(self._engine(shard))
                self._initialized_dbs.add(shard)
            engine = self._engine(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    def _template(self) -> str:
        """An empty, stamped run shard in WAL mode, made by Dagster's own `_initdb` once per version."""
        path = os.path.join(
            self._base_dir, f"shard-template-{DAGSTER_VERSION}.sqlite"
        )  # not *.db: never listed as a run
        if not os.path.exists(path):
            fd, tmp = tempfile.mkstemp(dir=self._base_dir, suffix=".tmp")  # an empty file is an empty database
            os.close(fd)
            engine = create_engine(f"sqlite:///{tmp}", poolclass=db.pool.NullPool)
            with _one_migration_directory():
                self._initdb(engine)
            engine.dispose()
            with sqlite3.connect(tmp) as con:  # fold the WAL into the file, so the file alone is the shard
                con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            con.close()
            for leftover in (tmp + "-wal", tmp + "-shm"):
                if os.path.exists(leftover):
                    os.unlink(leftover)
            os.replace(tmp, path)  # atomic: a concurrent process sees no file or a whole one
        return path

    def _copy_template(self, shard: str) -> bool:
        """Create a new run shard as a copy of the template; False when the shard already exists."""
        target = self.path_for_shard(shard)
        if os.path.exists(target):
            return False
        fd, tmp = tempfile.mkstemp(dir=self._base_dir, suffix=".tmp")
        try:
            with open(self._template(), "rb") as src, os.fdopen(fd, "wb") as dst:
                dst.write(src.read())
            os.link(tmp, target)  # fails if another process created the shard meanwhile
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)
        return True

    def has_table(self, table_name: str) -> bool:
        if table_name not in self._known_tables and super().has_table(table_name):
            self._known_tables.add(table_name)  # tables are never dropped under a live instance
        return table_name in self._known_tables

    def store_event_batch(self, events) -> None:
        """Asset events (planned, materialized, observed) in one transaction per shard; any other
        event the instance batches goes through `store_event` unchanged."""
        asset_events = [e for e in events if e.is_dagster_event and e.dagster_event_type in ASSET_EVENTS]
        others = [e for e in events if not (e.is_dagster_event and e.dagster_event_type in ASSET_EVENTS)]
        rows = [self._event_to_row(e) for e in asset_events]  # serialized once, for both shards
        by_run = defaultdict(list)
        for event, row in zip(asset_events, rows):
            by_run[event.run_id].append(row)
        for run_id, run_rows in by_run.items():
            with self.run_connection(run_id) as conn:
                conn.execute(SqlEventLogStorageTable.insert(), run_rows)
        if asset_events:
            with self.index_transaction() as conn:
                ids = [conn.execute(SqlEventLogStorageTable.insert(), row).inserted_primary_key[0] for row in rows]
                self._store_asset_event_tags(conn, asset_events, ids)
                # The asset-key row keeps the latest event of each kind: applying only the last of
                # each (in order) leaves it exactly as applying all of them would.
                last = {(e.dagster_event.asset_key, e.dagster_event_type): i for i, e in enumerate(asset_events)}
                for i in sorted(last.values()):
                    self._store_asset_event(conn, asset_events[i], ids[i])
        for event in others:
            self.store_event(event)

    def dispose(self) -> None:
        super().dispose()
        for engine in self._engines.values():
            engine.dispose()
        self._engines.clear()


@contextmanager
def _creation_lock(base_dir: str):
    """One process at a time creates or migrates the storage: two commands starting on a fresh
    instance would otherwise both create its tables ("table runs already exists"). The second waits
    here (an flock on a file beside the storage, released if its holder dies), then finds them made."""
    import fcntl

    os.makedirs(base_dir, exist_ok=True)
    with open(os.path.join(base_dir, ".storage-create.lock"), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextmanager
def _one_migration_directory():
    """Alembic's `ScriptDirectory.from_config`, memoized per script location while the block runs.
    The directory is read-only once parsed, so sharing it changes no check or stamp."""
    from alembic.script import ScriptDirectory

    original = ScriptDirectory.__dict__["from_config"]
    parsed = {}

    def from_config(cls, config):
        location = config.get_alembic_option("script_location")
        if location not in parsed:
            parsed[location] = original.__func__(cls, config)
        return parsed[location]

    ScriptDirectory.from_config = classmethod(from_config)
    try:
        yield
    finally:
        ScriptDirectory.from_config = original


class SabotSqliteStorage(DagsterSqliteStorage):
    """`storage: sqlite` with the batched event log and kept connections; same directories, same files."""

    def __init__(self, base_dir: str, inst_data=None):
        # The instance hands batches to `store_event_batch` only while this is set (it reads it per
        # event); every process that loads this instance (CLI, UI, daemon, run workers) gets it.
        os.environ.setdefault("DAGSTER_EVENT_BATCH_SIZE", BATCH_SIZE)
        with _creation_lock(base_dir), _one_migration_directory():
            super().__init__(base_dir, inst_data)
            self._event_log_storage.dispose()
            self._event_log_storage = BatchedSqliteEventLogStorage(_event_logs_directory(base_dir))
            with self._event_log_storage.index_connection():  # its revision check, while the scripts are parsed
                pass
        self._run_storage = KeptSqliteRunStorage(self._run_storage._conn_string)  # created and migrated above

    @classmethod
    def from_config_value(cls, inst_data, config_value) -> "SabotSqliteStorage":
        return cls.from_local(inst_data=inst_data, **config_value)
