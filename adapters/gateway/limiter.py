"""One rate limiter and one breaker per endpoint, shared by every run on the host.

Runs may execute in separate processes, so the buckets live in a SQLite file per endpoint, guarded by
a file lock (pyrate-limiter's SQLiteBucket with use_file_lock): every process that calls the same
endpoint draws from the same bucket. The directory is SABOT_LIMITER_DIR, else the system temp dir.

The breaker (`EndpointCircuit`) is a small JSON state per endpoint under a file lock, beside the
store (SABOT_LIMITER_DIR, else SABOT_VAR/limiter): failed attempts in a row, whether the endpoint is
open and why, and until when a Retry-After asked every caller for quiet. Every process and Dagster
run of the store reads the same file, so one process learning that the key is wrong stops them all.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
import time
from pathlib import Path

from filelock import FileLock
from pyrate_limiter import Limiter, Rate, SQLiteBucket

from adapters.gateway.policy import RateLimit

LIMITER_DIR_ENV = "SABOT_LIMITER_DIR"


class RateLimited(TimeoutError):
    """The limiter could not admit a call within the time left for it."""


def limiter_dir(environ=os.environ) -> Path:
    return Path(environ.get(LIMITER_DIR_ENV) or Path(tempfile.gettempdir()) / "sabot-limiter")


class EndpointLimiter:
    """Admits a call once both the request and the token bucket of its endpoint have room."""

    def __init__(self, endpoint_id: str, limit: RateLimit, directory: Path | None = None):
        self.endpoint_id, self.limit = endpoint_id, limit
        directory = Path(directory or limiter_dir())
        directory.mkdir(parents=True, exist_ok=True)
        stem = hashlib.sha256(f"{endpoint_id}|{limit}".encode()).hexdigest()[:16]
        window_ms = int(limit.window_seconds * 1000)
        self._limiters = {}
        for kind, size in (("requests", limit.requests), ("tokens", limit.tokens)):
            if size:
                bucket = SQLiteBucket.init_from_file([Rate(size, window_ms)], table=f"{kind}_bucket",
                                                     db_path=str(directory / f"{stem}.{kind}.sqlite"), use_file_lock=True)
                self._limiters[kind] = (Limiter(bucket, buffer_ms=10), size)
        self._lock = threading.Lock()  # the file lock is per thread; one thread of ours waits at a time

    def admit(self, tokens: int, timeout: float) -> None:
        """Block until the call may go; RateLimited when that would take longer than `timeout` seconds."""
        weights = {"requests": 1, "tokens": max(1, tokens)}
        with self._lock:
            for kind, (limiter, size) in self._limiters.items():
                weight = min(weights[kind], size)  # a call bigger than the whole window still goes, alone
                if not limiter.try_acquire(self.endpoint_id, weight=weight, blocking=True, timeout=max(0.0, timeout)):
                    raise RateLimited(f"rate limit of {self.endpoint_id}: no room for {weight} {kind} within {timeout:.1f} s")


def circuit_dir(environ=os.environ) -> Path:
    """Where the endpoint breakers live: SABOT_LIMITER_DIR, else the store's var dir, else the temp dir."""
    if environ.get(LIMITER_DIR_ENV):
        return Path(environ[LIMITER_DIR_ENV])
    if environ.get("SABOT_VAR"):
        return Path(environ["SABOT_VAR"]) / "limiter"
    return Path(__file__).resolve().parents[2] / "var" / "limiter"


class EndpointCircuit:
    """The host-wide breaker of one endpoint. State (JSON, under a file lock):
    `failures` in a row, `open` (why, with kind, status and when) and `paused_until` (epoch seconds)."""

    def __init__(self, endpoint_id: str, threshold: int = 8, open_seconds: float = 900.0, directory: Path | None = None):
        self.endpoint_id, self.threshold, self.open_seconds = endpoint_id, threshold, open_seconds
        directory = Path(directory or circuit_dir())
        directory.mkdir(parents=True, exist_ok=True)
        stem = hashlib.sha256(endpoint_id.encode()).hexdigest()[:16]
        self.path = directory / f"{stem}.circuit.json"
        self._lock = FileLock(str(self.path) + ".lock", thread_local=False)

    @contextlib.contextmanager
    def _state(self):
        with self._lock:
            try:
                state = json.loads(self.path.read_text())
            except (OSError, ValueError):
                state = {}
            before = dict(state)
            yield state
            if state != before:
                tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps({**state, "endpoint": self.endpoint_id}, sort_keys=True))
                os.replace(tmp, self.path)

    def opened(self) -> dict | None:
        """Why the endpoint is open (a ProviderFailure as a dict), None while it may be called."""
        with self._state() as state:
            reason = state.get("open")
            if reason and time.time() - reason.get("at", 0) > self.open_seconds:
                state.pop("open"), state.pop("failures", None)  # cooled down: callers may try again
                return None
            return reason

    def trip(self, failure: dict) -> dict:
        """Open the endpoint for every process; the first reason stays the one reported."""
        with self._state() as state:
            if not state.get("open"):
                state["open"] = {**failure, "at": time.time()}
            return state["open"]

    def failed(self, failure: dict) -> dict | None:
        """One failed attempt (infrastructure); the open reason once `threshold` are in a row."""
        with self._state() as state:
            state["failures"] = int(state.get("failures", 0)) + 1
            if state["failures"] >= self.threshold and not state.get("open"):
                message = f"{state['failures']} failed attempts in a row at {failure.get('endpoint') or self.endpoint_id}; the last: {failure.get('message')}"
                state["open"] = {**failure, "kind": "breaker_open", "message": message, "at": time.time()}
            return state.get("open")

    def succeeded(self) -> None:
        with self._state() as state:
            if state.get("failures"):
                state["failures"] = 0

    def pause(self, seconds: float, header: str) -> None:
        """A Retry-After: no process sends to this endpoint before it has passed."""
        with self._state() as state:
            until = time.time() + max(0.0, seconds)
            if until > float(state.get("paused_until", 0)):
                state["paused_until"], state["retry_after"] = until, header

    def paused_for(self) -> tuple[float, str | None]:
        """(seconds left of the endpoint's pause, the Retry-After value that asked for it)."""
        with self._state() as state:
            return max(0.0, float(state.get("paused_until", 0)) - time.time()), state.get("retry_after")

    def reset(self) -> None:
        """Close the endpoint (a user's new `wave run`: they have acted on the reason it opened)."""
        with self._state() as state:
            for key in ("open", "failures"):
                state.pop(key, None)
