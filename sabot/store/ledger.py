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
"""

import os
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS settled (record_key TEXT PRIMARY KEY, kind TEXT NOT NULL, cost REAL NOT NULL, at REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS reserved (token TEXT PRIMARY KEY, kind TEXT NOT NULL, amount REAL NOT NULL, holder TEXT NOT NULL, at REAL NOT NULL)",
)
BUSY_TIMEOUT_SECONDS = 30.0  # a reservation is a few statements; another command holds the lock for milliseconds


def ledger_path(store_path) -> Path:
    store_path = Path(store_path)
    return store_path.with_name(store_path.name + ".spend.sqlite")


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class SpendLedger:
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
            con.executemany("INSERT OR IGNORE INTO settled VALUES (?, ?, ?, ?)", [(k, kind, cost, now) for k, (kind, cost) in stored.items()])

    def drop_dead_reservations(self) -> int:
        """Reservations of processes on this host that are gone: their runs never settle here."""
        with self._transaction() as con:
            rows = con.execute("SELECT token, holder FROM reserved").fetchall()
            dead = [token for token, holder in rows if holder.rpartition(":")[0] == self.host
                    and holder.rpartition(":")[2].isdigit() and _pid_gone(int(holder.rpartition(":")[2]))]
            con.executemany("DELETE FROM reserved WHERE token = ?", [(t,) for t in dead])
        return len(dead)

    @staticmethod
    def _totals(con, kind: str) -> tuple[float, float]:
        settled = con.execute("SELECT COALESCE(SUM(cost), 0) FROM settled WHERE kind = ?", [kind]).fetchone()[0]
        reserved = con.execute("SELECT COALESCE(SUM(amount), 0) FROM reserved WHERE kind = ?", [kind]).fetchone()[0]
        return float(settled), float(reserved)

    def totals(self, kind: str) -> tuple[float, float]:
        """(settled, reserved) metered USD at one kind of endpoint, across every command."""
        with self._transaction() as con:
            return self._totals(con, kind)

    def reserve(self, token: str, kind: str, amount: float, fits) -> bool:
        """Reserve `amount` for `token` if `fits(settled, reserved, amount)` holds, atomically."""
        with self._transaction() as con:
            settled, reserved = self._totals(con, kind)
            if not fits(settled, reserved, amount):
                return False
            con.execute("INSERT OR REPLACE INTO reserved VALUES (?, ?, ?, ?, ?)", [token, kind, amount, self.holder, time.time()])
            return True

    def settle(self, token: str, kind: str, record_key: str | None, cost: float | None) -> None:
        """A launched run finished: its reservation gives way to what it cost (None: unpriced)."""
        with self._transaction() as con:
            con.execute("DELETE FROM reserved WHERE token = ?", [token])
            if record_key is not None and cost is not None:
                con.execute("INSERT OR IGNORE INTO settled VALUES (?, ?, ?, ?)", [record_key, kind, cost, time.time()])

    def release(self, token: str) -> None:
        with self._transaction() as con:
            con.execute("DELETE FROM reserved WHERE token = ?", [token])
