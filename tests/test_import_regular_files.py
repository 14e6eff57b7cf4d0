"""An import reads regular files only: a FIFO or socket where a corpus file belongs is refused in one
line naming it, before anything is read (a FIFO read waits for a writer forever), and the store is
unchanged. The store and the damaged corpus copy come from tests/test_bad_input.py's fixture."""

import os
import stat
import threading

from tests.test_bad_input import BLOCK, RUN, env, refused  # noqa: F401  (env: the fixture)

WATCHDOG_SECONDS = 60


def unblocked_after(fifo) -> threading.Timer:
    """Should the import open the FIFO after all, a writer arrives late and closes at once: the test then
    fails on what was read (an empty file) instead of hanging the suite."""

    def write_nothing():
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return  # no reader: nothing is blocked
        os.close(fd)

    timer = threading.Timer(WATCHDOG_SECONDS, write_nothing)
    timer.daemon = True
    timer.start()
    return timer


def test_a_fifo_in_place_of_a_trace_is_refused_unread(env):  # noqa: F811
    fifo = env["bad"] / RUN
    fifo.unlink()
    os.mkfifo(fifo)
    watchdog = unblocked_after(fifo)
    try:
        message = refused(env, "a FIFO")
    finally:
        watchdog.cancel()
    assert message.startswith(f"{RUN}: a FIFO; a corpus holds regular files only"), message


def test_a_socket_anywhere_in_the_corpus_is_refused(env):  # noqa: F811
    where = env["bad"] / BLOCK / "O2" / "seed11" / "notes.sock"
    os.mknod(where, stat.S_IFSOCK | 0o600)  # what binding a unix socket leaves (a bind path this deep is too long)
    message = refused(env, "a socket")
    assert message.startswith(f"{BLOCK}/O2/seed11/notes.sock: a socket"), message
