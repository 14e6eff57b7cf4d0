"""One rate limiter per endpoint (requests and tokens per window), shared by every run on the host.

Runs may execute in separate processes, so the buckets live in a SQLite file per endpoint, guarded by
a file lock (pyrate-limiter's SQLiteBucket with use_file_lock): every process that calls the same
endpoint draws from the same bucket. The directory is SABOT_LIMITER_DIR, else the system temp dir.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from pathlib import Path

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
