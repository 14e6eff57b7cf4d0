"""The watcher that ends what a wave command leaves behind if it is killed (`sabot.leftover_reaper`)."""

import os
import subprocess
import sys

import click


def watch_for_leftovers() -> None:
    """Start the watcher beside this command; the command's normal end (click closes its context) stops it."""
    watcher = subprocess.Popen(
        [sys.executable, "-m", "sabot.leftover_reaper", str(os.getpid())],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def stop() -> None:
        watcher.kill()
        watcher.wait()

    click.get_current_context().call_on_close(stop)
