"""Seals checked once per command: an attempt verified against its seal is not verified again
while the same command runs.

A wave run reads every slot's attempts several times (why stored runs rerun, the spend projection,
the schedule's plan, each block's settling): each read re-hashed every file of the attempt and
re-parsed its record. Inside `once_per_command()`, the first successful read of an attempt
directory is kept and handed to every later read; what is ingested or reused is that verified
read, never the file read again. A refusal is never kept: every read of a refused attempt checks
again and gives the same message. Outside the scope (a UI run, a test calling the asset layer),
every read verifies.
"""

import contextlib
import threading
from pathlib import Path

from sabot import runroot

_lock = threading.Lock()
_verified: dict | None = None  # (run root, directory) -> Attempt, while a command holds the scope


@contextlib.contextmanager
def once_per_command():
    global _verified
    with _lock:
        outer = _verified
        _verified = {} if outer is None else outer
    try:
        yield
    finally:
        with _lock:
            _verified = outer


def read_verified(run_root: Path, directory: Path) -> runroot.Attempt:
    """`runroot.read_attempt`, at most once per attempt inside `once_per_command()`."""
    memo = _verified
    if memo is None:
        return runroot.read_attempt(run_root, directory)
    key = (str(run_root), str(directory))
    attempt = memo.get(key)
    if attempt is None:
        attempt = memo[key] = runroot.read_attempt(run_root, directory)  # raises on a refusal: never kept
    return attempt
