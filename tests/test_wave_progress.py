"""A wave run on a terminal shows its live progress (runs done / in flight / failed, calls, spend, the
slowest run in flight, an ETA); when the output is not a terminal, nothing but the command's own lines."""

import os
import pty
import select
import subprocess
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
ARGS = [
    "wave",
    "run",
    "demo",
    "--framework",
    "langgraph",
    "--config",
    "default",
    "--task",
    "T1",
    "--seed",
    "11",
    "--operator",
    "O1",
]


def _env(tmp_path: Path) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SABOT_DB", "DAGSTER_HOME", "SABOT_DAGSTER_STORAGE", "SABOT_MODEL_BASE_URL", "SABOT_DEBUG")
    }
    return {**env, "SABOT_VAR": str(tmp_path / "var"), "COLUMNS": "250", "TERM": "xterm"}


def _on_a_terminal(args: list[str], env: dict) -> tuple[int, str]:
    primary, secondary = pty.openpty()
    command = subprocess.Popen(args, env=env, stdin=secondary, stdout=secondary, stderr=secondary, close_fds=True)
    os.close(secondary)
    shown = bytearray()
    while True:
        ready, _, _ = select.select([primary], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the terminal closed: the command ended
                break
            if not chunk:
                break
            shown += chunk
        elif command.poll() is not None:
            break
    os.close(primary)
    return command.wait(timeout=60), shown.decode(errors="replace")


def test_the_progress_line_shows_on_a_terminal_and_stays_out_of_a_pipe(tmp_path):
    piped = subprocess.run(
        [str(PROJECT / ".venv/bin/sabot"), *ARGS], env=_env(tmp_path), capture_output=True, text=True, timeout=600
    )
    assert piped.returncode == 0, piped.stderr[-3000:]
    assert " done, " not in piped.stdout + piped.stderr and "\x1b[" not in piped.stdout  # runs happened, nothing drawn

    code, shown = _on_a_terminal([str(PROJECT / ".venv/bin/sabot"), *ARGS, "--rerun"], _env(tmp_path))
    assert code == 0, shown[-3000:]
    assert "demo: runs: " in shown and " in flight, " in shown and "calls " in shown, shown[-3000:]
    assert "runs: 2 done, 0 in flight, 0 failed of 2 | calls " in shown  # the last redraw: both runs of the slice done
    assert "simulated, no money spent" in shown
