"""The store-wide spend ledger: what every breaker of every command on one store reserves from.

DuckDB takes one writer at a time, and a command holds no store connection across a model call,
so the ledger is a SQLite file beside the store (`<store>.spend.sqlite`). A reservation is one
`BEGIN IMMEDIATE` transaction (SQLite's file lock: one writer across processes): it reads what is
settled and reserved, and inserts the reservation only if the margined total stays within the
ceiling. Two `wave run` commands on one store therefore never launch past the cap between them.

- **settled**: the metered cost of every stored run record (any outcome, RUN_ERROR included),
  keyed as the store keys its calls (wave, operator, probe, record content hash), so a record
  counted at settle and again when synced from the store counts once.
- **reserved**: a launched run's expected cost (a pilot's worst case) until it settles. A
  reservation held by a process that is gone (killed) is dropped by the next command on its host.

Amounts are metered USD (priced from reported usage); the margin multiplies them where they meet a
ceiling (`sabot.budget.Margin`). Kinds: "provider" and "simulated" (the scripted model's usage,
capped only when a budget is given).

With worker hosts the store's volume is not every process's, so with SABOT_SHARED_STATE_URL set
(`sabot.shared_state`) the ledger lives in that Postgres instead (`PostgresSpendLedger`, the same
methods): the ledger of one store is its rows under the store's ledger path, which every host names
alike (the store and its run root are on the shared volume). A reservation there is one transaction
holding the ledger's advisory lock (`pg_advisory_xact_lock`), so reservations from every host are
serialized exactly as `BEGIN IMMEDIATE` serializes them on one. A holder is "host label:pid"
(SABOT_HOST_LABEL): a dead holder's reservation is dropped only by a command on its own host, since
hosts can share a host name and a PID means nothing elsewhere. `spend_ledger` picks the backend.
"""

import os
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path

from sabot.runroot import holder_gone
from sabot.shared_state import connection_pool, create_once, shared_state_url

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS settled (record_key TEXT PRIMARY KEY, kind TEXT NOT NULL, cost REAL NOT NULL, at REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS reserved (token TEXT PRIMARY KEY, kind TEXT NOT NULL, amount REAL NOT NULL, holder TEXT NOT NULL, at REAL NOT NULL)",
)
BUSY_TIMEOUT_SECONDS = 30.0  # a reservation is a few statements; another command holds the lock for milliseconds


def ledger_path(store_path) -> Path:
    store_path = Path(store_path)
    return store_path.with_name(store_path.name + ".spend.sqlite")


def spend_ledger(path, host: str, environ=None):
    """The ledger of the store whose ledger path is `path`: in the shared Postgres when
    SABOT_SHARED_STATE_URL is set (worker hosts), else the SQLite file at `path`."""
    url = shared_state_url(environ)
    return PostgresSpendLedger(url, path, host) if url else SpendLedger(path, host)


class _Reservations:
    """What both backends do the same way, over their own `_transaction`, `_totals` and `_put_reservation`:
    the totals, and a reservation that reads them and writes itself in one transaction (the backend's lock)."""

    def totals(self, kind: str) -> tuple[float, float]:
        """(settled, reserved) metered USD at one kind of endpoint, across every command (every host, in Postgres)."""
        with self._transaction() as con:
            return self._totals(con, kind)

    def reserve(self, token: str, kind: str, amount: float, fits) -> bool:
        """Reserve `amount` for `token` if `fits(settled, reserved, amount)` holds, atomically."""
        with self._transaction() as con:
            settled, reserved = self._totals(con, kind)
            if not fits(settled, reserved, amount):
                return False
            self._put_reservation(con, token, kind, amount)
            return True


class SpendLedger(_Reservations):
    """One store's ledger; every method is one short transaction, safe across processes."""

    def __init__(self, path, host: str):
        self.path, self.host = Path(path), host
        self.holder = f"{host}:{os.getpid()}"
        with self._transaction() as con:
            for statement in SCHEMA:  # not executescript: it commits the open transaction first
                con.execute(statement)

    @contextmanager
    def _transaction(self):
        con = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
        try:
            con.execute("BEGIN IMMEDIATE")  # the file lock: one writer across every process
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
        finally:
            con.close()

    def sync(self, stored: dict) -> None:
        """Count every stored record's cost once: {record_key: (kind, cost)} read from the store."""
        now = time.time()
        with self._transaction() as con:
            con.executemany(
                "INSERT OR IGNORE INTO settled VALUES (?, ?, ?, ?)",
                [(k, kind, cost, now) for k, (kind, cost) in stored.items()],
            )

    def drop_dead_reservations(self) -> int:
        """Reservations of processes on this host that are gone: their runs never settle here."""
        with self._transaction() as con:
            rows = con.execute("SELECT token, holder FROM reserved").fetchall()
            dead = [token for token, holder in rows if holder_gone(holder, self.host)]
            con.executemany("DELETE FROM reserved WHERE token = ?", [(t,) for t in dead])
        return len(dead)

    @staticmethod
    def _totals(con, kind: str) -> tuple[float, float]:
        settled = con.execute("SELECT COALESCE(SUM(cost), 0) FROM settled WHERE kind = ?", [kind]).fetchone()[0]
        reserved = con.execute("SELECT COALESCE(SUM(amount), 0) FROM reserved WHERE kind = ?", [kind]).fetchone()[0]
        return float(settled), float(reserved)

    def _put_reservation(self, con, token: str, kind: str, amount: float) -> None:
        con.execute(
            "INSERT OR REPLACE INTO reserved VALUES (?, ?, ?, ?, ?)", [token, kind, amount, self.holder, time.time()]
        )

    def settle(self, token: str, kind: str, record_key: str | None, cost: float | None) -> None:
        """A launched run finished: its reservation gives way to what it cost (None: unpriced)."""
        with self._transaction() as con:
            con.execute("DELETE FROM reserved WHERE token = ?", [token])
            if record_key is not None and cost is not None:
                con.execute("INSERT OR IGNORE INTO settled VALUES (?, ?, ?, ?)", [record_key, kind, cost, time.time()])

    def release(self, token: str) -> None:
        with self._transaction() as con:
            con.execute("DELETE FROM reserved WHERE token = ?", [token])


POSTGRES_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS sabot_spend_settled (ledger TEXT NOT NULL, record_key TEXT NOT NULL, kind TEXT NOT NULL, "
    "cost DOUBLE PRECISION NOT NULL, at DOUBLE PRECISION NOT NULL, PRIMARY KEY (ledger, record_key))",
    "CREATE TABLE IF NOT EXISTS sabot_spend_reserved (ledger TEXT NOT NULL, token TEXT NOT NULL, kind TEXT NOT NULL, "
    "amount DOUBLE PRECISION NOT NULL, holder TEXT NOT NULL, at DOUBLE PRECISION NOT NULL, PRIMARY KEY (ledger, token))",
)


class PostgresSpendLedger(_Reservations):
    """One store's ledger in the shared Postgres: `SpendLedger`'s methods, each one transaction that
    holds the ledger's advisory lock, so every host's reservations are serialized."""

    def __init__(self, url: str, path, host: str):
        self.url, self.path, self.host = url, Path(path), host
        self.ledger = os.path.abspath(self.path)  # every host mounts the store at one path
        self.holder = f"{host}:{os.getpid()}"
        with connection_pool(url).connection() as con:
            create_once(con, POSTGRES_SCHEMA, "spend-ledger")

    @contextmanager
    def _transaction(self):
        with connection_pool(self.url).connection() as con:  # commits on leaving, rolls back on an error
            con.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"sabot-ledger:{self.ledger}"])
            yield con

    def sync(self, stored: dict) -> None:
        """Count every stored record's cost once: {record_key: (kind, cost)} read from the store."""
        now = time.time()
        with self._transaction() as con, con.cursor() as cur:
            cur.executemany(
                "INSERT INTO sabot_spend_settled VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                [(self.ledger, k, kind, cost, now) for k, (kind, cost) in stored.items()],
            )

    def drop_dead_reservations(self) -> int:
        """Reservations of processes on this host (by label) that are gone: their runs never settle."""
        with self._transaction() as con:
            rows = con.execute(
                "SELECT token, holder FROM sabot_spend_reserved WHERE ledger = %s", [self.ledger]
            ).fetchall()
            dead = [token for token, holder in rows if holder_gone(holder, self.host)]
            if dead:
                con.execute(
                    "DELETE FROM sabot_spend_reserved WHERE ledger = %s AND token = ANY(%s)", [self.ledger, dead]
                )
        return len(dead)

    def _totals(self, con, kind: str) -> tuple[float, float]:
        settled = con.execute(
            "SELECT COALESCE(SUM(cost), 0) FROM sabot_spend_settled WHERE ledger = %s AND kind = %s",
            [self.ledger, kind],
        ).fetchone()[0]
        reserved = con.execute(
            "SELECT COALESCE(SUM(amount), 0) FROM sabot_spend_reserved WHERE ledger = %s AND kind = %s",
            [self.ledger, kind],
        ).fetchone()[0]
        return float(settled), float(reserved)

    def _put_reservation(self, con, token: str, kind: str, amount: float) -> None:
        con.execute(
            "INSERT INTO sabot_spend_reserved VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (ledger, token) DO UPDATE "
            "SET kind = EXCLUDED.kind, amount = EXCLUDED.amount, holder = EXCLUDED.holder, at = EXCLUDED.at",
            [self.ledger, token, kind, amount, self.holder, time.time()],
        )

    def settle(self, token: str, kind: str, record_key: str | None, cost: float | None) -> None:
        """A launched run finished: its reservation gives way to what it cost (None: unpriced)."""
        with self._transaction() as con:
            con.execute("DELETE FROM sabot_spend_reserved WHERE ledger = %s AND token = %s", [self.ledger, token])
            if record_key is not None and cost is not None:
                con.execute(
                    "INSERT INTO sabot_spend_settled VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    [self.ledger, record_key, kind, cost, time.time()],
                )

    def release(self, token: str) -> None:
        with self._transaction() as con:
            con.execute("DELETE FROM sabot_spend_reserved WHERE ledger = %s AND token = %s", [self.ledger, token])


Ledger = SpendLedger | PostgresSpendLedger  # what `spend_ledger` returns: the same methods either way
