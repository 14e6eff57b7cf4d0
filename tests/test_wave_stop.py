"""`sabot wave stop WAVE` ends a running wave (its runs in flight too), keeps what finished and what was
paid, and the next `sabot wave run` resumes: no slot that finished is run again."""

import collections
import os
import subprocess
import time
from pathlib import Path

from sabot.store.db import connect

PROJECT = Path(__file__).resolve().parents[1]
ARGS = ["wave", "run", "demo", "--framework", "langgraph", "--task", "T1", "--seed", "11", "--concurrency", "1"]


def _env(tmp_path: Path) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SABOT_DB", "DAGSTER_HOME", "SABOT_DAGSTER_STORAGE", "SABOT_MODEL_BASE_URL", "SABOT_DEBUG")
    }
    return {**env, "SABOT_VAR": str(tmp_path / "var")}


def _attempts(var: Path) -> list[Path]:
    return list(var.glob("runroot/demo/*/*/*/*/*/attempt-*"))


def test_wave_stop_ends_a_wave_and_the_next_run_resumes_with_nothing_repeated(tmp_path):
    var = tmp_path / "var"
    command = subprocess.Popen(
        [str(PROJECT / ".venv/bin/sabot"), *ARGS],
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    while sum((a / "attempt.json").exists() for a in _attempts(var)) < 2:  # two runs finished, the next under way
        assert command.poll() is None and time.monotonic() < deadline, command.communicate()
        time.sleep(0.05)
    stop = subprocess.run(
        [str(PROJECT / ".venv/bin/sabot"), "wave", "stop", "demo"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert stop.returncode == 0, stop.stderr[-2000:]
    assert stop.stdout.startswith(f"demo: stopped 1 command(s) (pid {command.pid})"), stop.stdout
    command.communicate(timeout=30)
    assert command.returncode != 0  # ended by the stop, not finished
    finished_before = {a.parent for a in _attempts(var) if (a / "attempt.json").exists()}
    slots = {a.parent for a in _attempts(var)}
    assert 2 <= len(finished_before) < 14 and len(slots) < 14  # 14 slots: (baseline + six operators) x two configs

    rerun = subprocess.run(
        [str(PROJECT / ".venv/bin/sabot"), *ARGS], env=_env(tmp_path), capture_output=True, text=True, timeout=600
    )
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    with connect(var / "sabot.duckdb", read_only=True) as con:
        complete = con.execute(
            "SELECT operator, probe, count(*) FROM attempts WHERE wave = 'demo' AND outcome = 'complete' GROUP BY ALL"
        ).fetchall()
    assert len(complete) == 14 and all(
        n == 1 for _, _, n in complete
    )  # every slot run to completion once: nothing repeated
    per_slot = collections.Counter(a.parent for a in _attempts(var) if (a / "attempt.json").exists())
    assert all(per_slot[slot] == 1 for slot in finished_before)  # what finished before the stop was kept, not run again
