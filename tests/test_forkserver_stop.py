"""CPython's private fork-server stop, the one the harness uses (adapters/forkserver_stop.py): a Python
release that renames or changes it fails here by name, not as a fork server left running."""

import multiprocessing
import os
import time
from multiprocessing import forkserver

from adapters.forkserver_stop import stop_forkserver


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"  # a zombie has ended; only its parent's reaping is left
    except FileNotFoundError:
        return False


def _server_pid() -> int | None:
    return forkserver._forkserver._forkserver_pid  # read only here, to see which process the stop ended


def test_stop_ends_the_running_fork_server_and_it_starts_again():
    context = multiprocessing.get_context("forkserver")
    with context.Pool(1) as pool:
        assert pool.apply(os.getpid) > 0
    first = _server_pid()
    assert first is not None and _alive(first)
    stop_forkserver()
    deadline = time.monotonic() + 10
    while _alive(first) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(first)
    with context.Pool(1) as pool:  # the next pool starts a new server
        assert pool.apply(os.getpid) > 0
    assert _server_pid() not in (None, first)
    stop_forkserver()
