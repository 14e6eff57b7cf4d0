"""A watcher beside a wave command that ends what the command left behind when it died without cleaning
up (kill -9 of its pid alone, the OOM killer).

Each process a wave starts is meant to die with it (the fork server and its runs watch for it), but a
library's helper started in the instant before the kill may not: Dagster mirrors a step's compute log
with `tail -F` and then starts a second process to kill that tail if the command dies; a command
killed between the two leaves the tail running forever. So the command starts this watcher first
(`python -m sabot.leftover_reaper <pid>`), and stops it when it ends normally. Once the command is gone,
the watcher, orphaned like every process the command left, kills the processes that are orphaned as it
is (the same new parent), in the command's process group, and started after the command: the command's
own leftovers, never the shell or a pipeline partner (their parent is the shell), nor an older orphan.
Linux /proc only; elsewhere it does nothing.
"""

import os
import signal
import sys
import time

WATCH_SECONDS = 0.2
SWEEP_SECONDS = 2.0  # a helper forked in the instant of the kill shows up within it


def _stat(pid: int | str) -> tuple[str, int, int, int] | None:
    """(state, parent, process group, start time in clock ticks) of a live process, else None."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[2]), int(fields[19])


def leftovers(group: int, reaper: int, since: int, me: int) -> list[int]:
    """Live processes of `group`, reparented to `reaper`, started at or after `since` (clock ticks), but `me`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        stat = _stat(entry)
        if stat and stat[0] not in ("Z", "X") and stat[1] == reaper and stat[2] == group and stat[3] >= since:
            found.append(int(entry))
    return found


def watch(command: int) -> None:
    command_stat = _stat(command)
    if command_stat is None:
        return
    _, _, group, since = command_stat
    while os.getppid() == command:
        time.sleep(WATCH_SECONDS)
    reaper, me = os.getppid(), os.getpid()  # the new parent of every orphan of the command, this watcher included
    deadline = time.monotonic() + SWEEP_SECONDS
    while time.monotonic() < deadline:
        for pid in leftovers(group, reaper, since, me):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(WATCH_SECONDS)


if __name__ == "__main__":
    if sys.platform.startswith("linux") and len(sys.argv) == 2:
        watch(int(sys.argv[1]))
