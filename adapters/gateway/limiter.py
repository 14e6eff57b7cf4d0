"""One rate limiter and one breaker per endpoint, shared by every run on the host, or on every host.

Runs may execute in separate processes, so the buckets live in a SQLite file per endpoint, guarded by
a file lock (pyrate-limiter's SQLiteBucket with use_file_lock): every process that calls the same
endpoint draws from the same bucket. The directory is SABOT_LIMITER_DIR, else the system temp dir.

The breaker (`EndpointCircuit`) is a small JSON state per endpoint under a file lock, beside the
store (SABOT_LIMITER_DIR, else SABOT_VAR/limiter): failed attempts in a row, whether the endpoint is
open and why, and until when a Retry-After asked every caller for quiet. Every process and Dagster
run of the store reads the same file, so one process learning that the key is wrong stops them all.

With worker hosts (SABOT_SHARED_STATE_URL, `sabot.shared_state`) both live in that Postgres instead:
the buckets are pyrate-limiter's PostgresBucket (its check-and-put holds an EXCLUSIVE table lock; its
clock is the server's), the breaker's state is one row per endpoint read and written under
SELECT ... FOR UPDATE, its clock also the server's, so hosts with skewed clocks agree on a pause.
`endpoint_limiter` and `endpoint_circuit` pick the backend; callers see the same methods.

How a breaker opens and closes, on every path alike (the CLI, a UI backfill, the daemon):
- it opens on an endpoint-fatal answer (401, 403, exhausted quota), on `threshold` infrastructure
  failures in a row, or on a Retry-After past the policy's ceiling;
- it belongs to the endpoint configuration that opened it (a fingerprint of base URL and key): a
  caller with another key or base URL finds a closed breaker, a new circuit; a Retry-After pause
  is the endpoint's and holds for every configuration;
- after `open_seconds` of cool-down it is half-open: launching may resume, but one process alone
  sends (the probe; the others wait behind it in `paused_for`). The probe's success closes the
  breaker; any failure of it opens the breaker again for another cool-down. A probe whose process
  died, or that has not been decided within `probe_seconds`, passes to the next caller;
- `reset()` (a user's new `sabot wave run`: they say they acted on the reason) ends the cool-down
  now: the breaker is half-open and the probe decides, as after a cool-down.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import tempfile
import threading
import time
from pathlib import Path

from filelock import FileLock
from pyrate_limiter import Limiter, Rate, SQLiteBucket

from adapters.gateway.policy import RateLimit
from sabot.runroot import holder_gone
from sabot.shared_state import connection_pool, create_once, host_label, shared_state_url

LIMITER_DIR_ENV = "SABOT_LIMITER_DIR"
# The token bucket counts in units of this many tokens: pyrate-limiter stores one row per unit of
# weight (SQLite and Postgres alike), so a 40,000-token call would write 40,000 rows.
TOKEN_UNIT = 100
PROBE_POLL_SECONDS = 0.5  # how often a caller waiting behind the half-open probe looks again
PROBE_WAIT = (
    "none: a probe call after the breaker's cool-down decides first"  # paused_for's header while waiting behind it
)


class RateLimited(TimeoutError):
    """The limiter could not admit a call within the time left for it."""


def limiter_dir(environ=os.environ) -> Path:
    return Path(environ.get(LIMITER_DIR_ENV) or Path(tempfile.gettempdir()) / "sabot-limiter")


def _sqlite_bucket(directory: Path, stem: str, kind: str, rate: Rate):
    directory.mkdir(parents=True, exist_ok=True)
    return SQLiteBucket.init_from_file(
        [rate], table=f"{kind}_bucket", db_path=str(directory / f"{stem}.{kind}.sqlite"), use_file_lock=True
    )


def _postgres_bucket(url: str, stem: str, kind: str, rate: Rate):
    from pyrate_limiter import PostgresBucket

    table = f"sabot_{stem}_{kind}"
    pool = connection_pool(url)
    # PostgresBucket 4.5.1 types the weight column SMALLINT; a token bucket's weights pass 32767, so
    # the table is made first with the library's columns and an INTEGER weight (its own CREATE is
    # IF NOT EXISTS).
    with pool.connection() as con:
        create_once(
            con,
            (
                f'CREATE TABLE IF NOT EXISTS "ratelimit___{table}" (name VARCHAR, weight INTEGER, item_timestamp TIMESTAMP)',
            ),
            f"ratelimit___{table}",
        )
    return PostgresBucket(pool, table, [rate])


class EndpointLimiter:
    """Admits a call once both the request and the token bucket of its endpoint have room."""

    def __init__(
        self, endpoint_id: str, limit: RateLimit, directory: Path | None = None, shared_url: str | None = None
    ):
        self.endpoint_id, self.limit = endpoint_id, limit
        self.shared = bool(shared_url)  # the buckets are the deployment's (Postgres), not this host's files
        stem = hashlib.sha256(f"{endpoint_id}|{limit}|{TOKEN_UNIT}".encode()).hexdigest()[:16]
        window_ms = int(limit.window_seconds * 1000)
        self._limiters = {}
        for kind, size in (
            ("requests", limit.requests),
            ("tokens", math.ceil(limit.tokens / TOKEN_UNIT) if limit.tokens else 0),
        ):
            if size:
                rate = Rate(size, window_ms)
                bucket = (
                    _postgres_bucket(shared_url, stem, kind, rate)
                    if shared_url
                    else _sqlite_bucket(Path(directory or limiter_dir()), stem, kind, rate)
                )
                self._limiters[kind] = (Limiter(bucket, buffer_ms=10), size)
        self._lock = threading.Lock()  # the file lock is per thread; one thread of ours waits at a time

    def admit(self, tokens: int, timeout: float) -> None:
        """Block until the call may go; RateLimited when that would take longer than `timeout` seconds."""
        weights = {"requests": 1, "tokens": max(1, math.ceil(tokens / TOKEN_UNIT))}
        with self._lock:
            for kind, (limiter, size) in self._limiters.items():
                weight = min(weights[kind], size)  # a call bigger than the whole window still goes, alone
                if not limiter.try_acquire(self.endpoint_id, weight=weight, blocking=True, timeout=max(0.0, timeout)):
                    asked = f"{weight} requests" if kind == "requests" else f"{weight * TOKEN_UNIT} tokens"
                    raise RateLimited(f"rate limit of {self.endpoint_id}: no room for {asked} within {timeout:.1f} s")


def endpoint_limiter(endpoint_id: str, limit: RateLimit, environ=None) -> EndpointLimiter:
    """The endpoint's limiter: its buckets in the shared Postgres with worker hosts, else files on this host."""
    return EndpointLimiter(endpoint_id, limit, shared_url=shared_state_url(environ))


def circuit_dir(environ=os.environ) -> Path:
    """Where the endpoint breakers live: SABOT_LIMITER_DIR, else the store's var dir, else the temp dir."""
    if environ.get(LIMITER_DIR_ENV):
        return Path(environ[LIMITER_DIR_ENV])
    if environ.get("SABOT_VAR"):
        return Path(environ["SABOT_VAR"]) / "limiter"
    return Path(__file__).resolve().parents[2] / "var" / "limiter"


def endpoint_config(base_url: str, api_key: str) -> str:
    """The fingerprint a breaker is keyed to: another key or base URL is another circuit (never the key itself)."""
    return hashlib.sha256(f"{base_url.rstrip('/')}\n{api_key}".encode()).hexdigest()[:16]


class CircuitState:
    """The breaker's rules over its state (the module docstring says them); where the state lives is
    a subclass's `_state()`, which yields (state dict, now in epoch seconds) under its lock. State:
    `failures` in a row, `open` (why, with kind, status and when), `half_open` (since when, after
    what), `probe` (its holder and since when), `config` (the fingerprint the rest belongs to),
    `paused_until` and `retry_after` (a Retry-After's end and its header)."""

    _CIRCUIT_KEYS = ("open", "failures", "half_open", "probe")

    def __init__(
        self,
        endpoint_id: str,
        threshold: int = 8,
        open_seconds: float = 900.0,
        config: str | None = None,
        probe_seconds: float = 180.0,
    ):
        self.endpoint_id, self.threshold, self.open_seconds = endpoint_id, threshold, open_seconds
        self.config, self.probe_seconds = config, probe_seconds

    def _state(self):
        raise NotImplementedError

    @contextlib.contextmanager
    def _current(self):
        """The state under the lock, as this caller's configuration sees it: another's is a new circuit."""
        with self._state() as (state, now):
            if self.config is not None and state.get("config") != self.config:
                for key in self._CIRCUIT_KEYS:
                    state.pop(key, None)
                state["config"] = self.config
            yield state, now

    @staticmethod
    def _holder() -> str:
        return f"{host_label()}:{os.getpid()}"

    def opened(self) -> dict | None:
        """Why the endpoint is open (a ProviderFailure as a dict), None while it may be called (closed,
        or half-open once the cool-down is over)."""
        with self._current() as (state, now):
            reason = state.get("open")
            if reason and now - reason.get("at", 0) > self.open_seconds:
                self._half_open(state, now)
                return None
            return reason

    def _half_open(self, state: dict, now: float) -> None:
        state["half_open"] = {"since": now, "after": state.pop("open", None)}
        state.pop("failures", None), state.pop("probe", None)

    def _open(self, state: dict, failure: dict, now: float) -> dict:
        state.pop("half_open", None), state.pop("probe", None)
        state["open"] = {**failure, "at": now}
        return state["open"]

    def trip(self, failure: dict) -> dict:
        """Open the endpoint for every process; the first reason stays the one reported."""
        with self._current() as (state, now):
            return state.get("open") or self._open(state, failure, now)

    def failed(self, failure: dict) -> dict | None:
        """One failed attempt (infrastructure); the open reason once `threshold` are in a row, or at
        once while half-open (the probe failed)."""
        with self._current() as (state, now):
            state["failures"] = int(state.get("failures", 0)) + 1
            where = failure.get("endpoint") or self.endpoint_id
            if state.get("half_open") and not state.get("open"):
                message = f"the probe after the breaker's cool-down failed at {where}: {failure.get('message')}"
                self._open(state, {**failure, "kind": "breaker_open", "message": message}, now)
            elif state["failures"] >= self.threshold and not state.get("open"):
                message = f"{state['failures']} failed attempts in a row at {where}; the last: {failure.get('message')}"
                self._open(state, {**failure, "kind": "breaker_open", "message": message}, now)
            return state.get("open")

    def succeeded(self) -> None:
        """An answered call: the failures in a row end, and a half-open breaker closes."""
        with self._current() as (state, _now):
            for key in ("failures", "half_open", "probe"):
                state.pop(key, None)

    def pause(self, seconds: float, header: str) -> None:
        """A Retry-After: no process sends to this endpoint before it has passed."""
        with self._current() as (state, now):
            until = now + max(0.0, seconds)
            if until > float(state.get("paused_until", 0)):
                state["paused_until"], state["retry_after"] = until, header

    def paused_for(self) -> tuple[float, str | None]:
        """(seconds to wait before sending, the Retry-After value that asked for it). While half-open,
        the first caller becomes the probe; the others wait behind it, looking again every
        PROBE_POLL_SECONDS, until it decides."""
        with self._current() as (state, now):
            wait, header = max(0.0, float(state.get("paused_until", 0)) - now), state.get("retry_after")
            if state.get("half_open") and not self._may_probe(state, now):
                return max(wait, PROBE_POLL_SECONDS), header if wait > PROBE_POLL_SECONDS else PROBE_WAIT
            return wait, header

    def _may_probe(self, state: dict, now: float) -> bool:
        probe, me = state.get("probe"), self._holder()
        if (
            probe
            and probe["holder"] != me
            and now - probe["at"] <= self.probe_seconds
            and not holder_gone(probe["holder"], host_label())
        ):
            return False
        if not probe or probe["holder"] != me:
            state["probe"] = {"holder": me, "at": now}
        return True

    def reset(self) -> None:
        """A user's word that they acted on why the endpoint opened (a new `sabot wave run`): the
        cool-down ends now and a probe decides, as after any cool-down. A Retry-After pause holds."""
        with self._current() as (state, now):
            if state.get("open"):
                self._half_open(state, now)
            state.pop("failures", None)


class EndpointCircuit(CircuitState):
    """The host-wide breaker of one endpoint: its state a JSON file under a file lock."""

    def __init__(
        self,
        endpoint_id: str,
        threshold: int = 8,
        open_seconds: float = 900.0,
        directory: Path | None = None,
        config: str | None = None,
        probe_seconds: float = 180.0,
    ):
        super().__init__(endpoint_id, threshold, open_seconds, config, probe_seconds)
        directory = Path(directory or circuit_dir())
        directory.mkdir(parents=True, exist_ok=True)
        stem = hashlib.sha256(endpoint_id.encode()).hexdigest()[:16]
        self.path = directory / f"{stem}.circuit.json"
        self._lock = FileLock(str(self.path) + ".lock", thread_local=False)
        # A lock that is not thread-local lets every thread of this process in at once: the gateway's
        # concurrent calls would race on the state file (a lost update, or a vanished temp file).
        self._threads = threading.RLock()

    @contextlib.contextmanager
    def _state(self):
        with self._threads, self._lock:
            try:
                state = json.loads(self.path.read_text())
            except (OSError, ValueError):
                state = {}
            before = dict(state)
            yield state, time.time()
            if state != before:
                tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps({**state, "endpoint": self.endpoint_id}, sort_keys=True))
                os.replace(tmp, self.path)


CIRCUIT_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS sabot_endpoint_circuit (endpoint TEXT PRIMARY KEY, state JSONB NOT NULL, "
    "updated DOUBLE PRECISION NOT NULL)",
)


class PostgresCircuit(CircuitState):
    """The breaker of one endpoint for every host: a row of the shared Postgres, read and written
    under SELECT ... FOR UPDATE, with the server's clock."""

    def __init__(
        self,
        url: str,
        endpoint_id: str,
        threshold: int = 8,
        open_seconds: float = 900.0,
        config: str | None = None,
        probe_seconds: float = 180.0,
    ):
        super().__init__(endpoint_id, threshold, open_seconds, config, probe_seconds)
        self.url = url
        with connection_pool(url).connection() as con:
            create_once(con, CIRCUIT_SCHEMA, "endpoint-circuit")
            con.execute(
                "INSERT INTO sabot_endpoint_circuit VALUES (%s, '{}'::jsonb, 0) ON CONFLICT DO NOTHING", [endpoint_id]
            )

    @contextlib.contextmanager
    def _state(self):
        from psycopg.types.json import Jsonb

        with connection_pool(self.url).connection() as con:  # one transaction: committed on leaving
            row = con.execute(
                "SELECT state, extract(epoch FROM clock_timestamp())::float8 FROM sabot_endpoint_circuit "
                "WHERE endpoint = %s FOR UPDATE",
                [self.endpoint_id],
            ).fetchone()
            state, now = (dict(row[0]), row[1]) if row else ({}, time.time())
            before = dict(state)
            yield state, now
            if state != before:
                con.execute(
                    "INSERT INTO sabot_endpoint_circuit VALUES (%s, %s, %s) ON CONFLICT (endpoint) DO UPDATE "
                    "SET state = EXCLUDED.state, updated = EXCLUDED.updated",
                    [self.endpoint_id, Jsonb(state), now],
                )


def endpoint_circuit(
    endpoint_id: str,
    threshold: int = 8,
    open_seconds: float = 900.0,
    config: str | None = None,
    probe_seconds: float = 180.0,
    environ=None,
) -> CircuitState:
    """The endpoint's breaker: a row of the shared Postgres with worker hosts, else a file on this host."""
    url = shared_state_url(environ)
    if url:
        return PostgresCircuit(url, endpoint_id, threshold, open_seconds, config, probe_seconds)
    return EndpointCircuit(endpoint_id, threshold, open_seconds, config=config, probe_seconds=probe_seconds)
