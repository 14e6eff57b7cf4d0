"""Where the bounds every host must share live: one Postgres named by SABOT_SHARED_STATE_URL.

On one host the endpoint limiter, the endpoint breaker and the spend ledger are files (SQLite and
JSON under file locks), shared by every process of that host. A deployment with worker hosts sets
SABOT_SHARED_STATE_URL on every host to one Postgres database (the Dagster instance's own is
fine: the tables are prefixed `sabot_` and `ratelimit___`); the same three then live there, with the
same interfaces for their callers. Unset, the file backends are used, as before.

The variable is explicit rather than read from the Dagster instance's storage config: the ledger
sits below Dagster, the gateway runs in a run's child process where loading the instance is costly,
and an instance config can spell its database several ways (`postgres_url`, `postgres_db` with env
references); one variable is what an operator sets and checks.

Connections come from one small psycopg pool per URL and per process (a forked run process makes
its own: a pool's connections and threads do not survive a fork).
"""

from __future__ import annotations

import os
import socket
import threading
from urllib.parse import urlsplit

SHARED_STATE_URL_ENV = "SABOT_SHARED_STATE_URL"
HOST_LABEL_ENV = "SABOT_HOST_LABEL"
POOL_MAX_CONNECTIONS = 2  # per process: a run holds the limiter's and the breaker's turn in sequence
CONNECT_TIMEOUT_SECONDS = 10
POOL_IDLE_SECONDS = 30.0  # a run idle between calls gives its connections back to the server soon

_pools: dict[tuple[str, int], object] = {}
_pools_lock = threading.Lock()


class SharedStateError(RuntimeError):
    """SABOT_SHARED_STATE_URL names no usable Postgres."""


def shared_state_url(environ=None) -> str | None:
    """The libpq URL of the shared state, or None on one host (the file backends). SQLAlchemy's
    spelling (`postgresql+psycopg2://`, as the Dagster instance config takes it) is accepted."""
    environ = os.environ if environ is None else environ
    url = (environ.get(SHARED_STATE_URL_ENV) or "").strip()
    if not url:
        return None
    scheme, _, rest = url.partition("://")
    if (
        scheme.split("+", 1)[0] not in ("postgresql", "postgres") or not rest
    ):  # the value may hold a password: name the scheme only
        raise SharedStateError(
            f"{SHARED_STATE_URL_ENV} is not a Postgres URL (scheme {scheme or 'missing'!r}; "
            f"expected postgresql://USER@HOST:PORT/DB)"
        )
    return "postgresql://" + rest


def host_label(environ=None) -> str:
    """This host's name in launcher tags and holders ("label:pid"): SABOT_HOST_LABEL, else the host
    name. Hosts can share a host name (containers, network namespaces, cloned machines) and a PID is
    only meaningful on its own host, so every worker host of a deployment sets a label of its own
    (deploy/hosts/), and a dead holder is judged only on its own host."""
    environ = os.environ if environ is None else environ
    return environ.get(HOST_LABEL_ENV) or socket.gethostname()


def connection_pool(url: str):
    """This process's pool for `url` (psycopg_pool.ConnectionPool, opened on first use, after one
    connection has shown the server answers: an unreachable one is a clear error at once, not a
    pool timeout at the first model call)."""
    from psycopg_pool import ConnectionPool

    key = (url, os.getpid())
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            _reach(url)
            pool = ConnectionPool(
                url,
                min_size=0,
                max_size=POOL_MAX_CONNECTIONS,
                max_idle=POOL_IDLE_SECONDS,
                name=f"sabot-shared-state-{os.getpid()}",
                open=True,
            )
            _pools[key] = pool
        return pool


def _reach(url: str) -> None:
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_SECONDS).close()
    except psycopg.Error as exc:
        where = urlsplit(url)
        name = f"{where.hostname}:{where.port or 5432}{where.path}"  # never the password
        raise SharedStateError(
            f"the shared state {SHARED_STATE_URL_ENV} names Postgres at {name}, which cannot be reached "
            f"from host {host_label()}: {str(exc).strip().splitlines()[0]}"
        ) from exc


def create_once(conn, statements: tuple[str, ...], name: str) -> None:
    """CREATE ... IF NOT EXISTS from many processes at once: concurrent creates of one table race in
    Postgres (a unique violation on its type), so they take one advisory lock first."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"sabot-schema:{name}"])
    for statement in statements:
        conn.execute(statement)
