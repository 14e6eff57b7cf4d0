"""`sabot wave stop WAVE`: end the wave's running commands, keeping everything paid.

Each `sabot wave run` registers itself (host and pid) under the project's var directory while it runs.
Stopping sends it SIGTERM (SIGKILL if it has not ended within the grace period). Its fork server
and the runs in flight die with it (`adapters.parent_watch`); each run's answered calls are already
in its attempt's journal (`sabot.exchange_journal`), and finished runs wait in the run root, so the
next `sabot wave run` ingests them, counts every paid call, and resumes with only the missing runs.
Ctrl-C in the command's terminal does the same.
"""

import json
import os
import signal
import time
from pathlib import Path

import click

GRACE_SECONDS = 10.0


def commands_dir(wave: str) -> Path:
    from sabot_assets.constants import VAR_DIR

    return Path(VAR_DIR) / "commands" / wave


def register_command(wave: str) -> None:
    """Record this command as running the wave until the command ends (click closes its context)."""
    from sabot.shared_state import host_label

    path = commands_dir(wave) / f"{host_label()}:{os.getpid()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"host": host_label(), "pid": os.getpid(), "started": time.time()}))
    click.get_current_context().call_on_close(lambda: path.unlink(missing_ok=True))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (ended, not yet reaped by its parent) is not running anything
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


@click.command("stop")
@click.argument("name")
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=GRACE_SECONDS,
    show_default=True,
    help="Seconds to wait for a command to end after SIGTERM before SIGKILL.",
)
def wave_stop(name, grace):
    """End the running `sabot wave run` commands of wave NAME on this host: their runs in flight end too;
    every call they paid for is kept, and the next `sabot wave run NAME` resumes with the missing runs."""
    from sabot.shared_state import host_label

    here, stopped, elsewhere = host_label(), [], []
    for path in sorted(commands_dir(name).glob("*.json")):
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if entry.get("host") != here:
            elsewhere.append(f"{entry.get('host')}:{entry.get('pid')}")
            continue
        pid = int(entry["pid"])
        if pid == os.getpid() or not _alive(pid):
            path.unlink(missing_ok=True)  # left by a command that died
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
        path.unlink(missing_ok=True)
        stopped.append(pid)
    if stopped:
        click.echo(
            f"{name}: stopped {len(stopped)} command(s) (pid {', '.join(map(str, stopped))}); their runs in flight ended, "
            f"every paid call is kept; `sabot wave run {name}` resumes the missing runs"
        )
    else:
        click.echo(f"{name}: no running command on this host ({here})")
    for holder in elsewhere:
        click.echo(f"  still running on another host: {holder} (stop it there)")
