"""Processes that die with their parent: the fork server of `adapters.pool` and every run it forks.

Killing only the command (the OOM killer, `kill -9`) must not leave a fork server and its runs
alive, still calling a paid model. A run asks the kernel for SIGKILL when its parent, the fork
server, exits (Linux `prctl(PR_SET_PDEATHSIG)`, cleared on fork, so each run sets it itself). The
fork server watches its own parent's pid instead: a parent-death signal fires when the *thread*
that forked it ends, and a command may start the server from a worker thread that ends first.
"""

import ctypes
import os
import signal
import sys
import threading

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
WATCH_SECONDS = 0.5
STARTER_ENV = "SABOT_FORK_STARTER"  # the pid of the process that started the fork server (adapters.pool)


def die_with_parent() -> None:
    """SIGKILL this process when its parent exits (Linux); exit now if the parent is already gone."""
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if parent == 1 or os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def exit_when_parent_dies(parent: int | None = None, interval: float = WATCH_SECONDS) -> threading.Thread:
    """A daemon thread that ends this process once its parent (`parent`, default the current one) is gone."""
    parent = parent or os.getppid()

    def watch() -> None:
        stop = threading.Event()
        while os.getppid() == parent and not stop.wait(interval):
            pass
        os._exit(1)  # the runs it forked get SIGKILL from die_with_parent

    thread = threading.Thread(target=watch, name="parent-watch", daemon=True)
    thread.start()
    return thread


def exit_when_starter_dies() -> threading.Thread:
    """The fork server's watch, started before its slow imports: the starter's pid comes from the environment
    it was started with, so a starter killed during those imports (the server then has a new parent) is seen
    as gone, not taken for the parent to watch."""
    return exit_when_parent_dies(int(os.environ.get(STARTER_ENV) or os.getppid()))
