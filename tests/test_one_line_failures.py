"""An expected failure ends a command with one line saying what happened and what to do, never a
traceback (those only under --debug): a store lock held past the wait mid-wave, a replay with
nothing to replay, a provider's 401 from a team pipeline that logs it with a page of traceback."""

import json
import os
import subprocess
import time
from pathlib import Path

from tests.fault_provider import FaultProvider
from tests.test_provider_faults import KEY, QUICK_POLICY

PROJECT = Path(__file__).resolve().parents[1]
ONE_CELL = ["--framework", "langgraph", "--config", "default", "--task", "T1", "--operator", "O1", "--seed", "11"]


def _env(tmp_path: Path, **extra) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SABOT_DB", "DAGSTER_HOME", "SABOT_DAGSTER_STORAGE", "SABOT_DEBUG")
    }
    return {**env, "SABOT_VAR": str(tmp_path / "var"), **extra}


def _sabot(tmp_path: Path, *args, **extra) -> subprocess.Popen:
    return subprocess.Popen(
        [str(PROJECT / ".venv/bin/sabot"), *args],
        env=_env(tmp_path, **extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _one_line(done_stderr: str, starts: str) -> str:
    first = done_stderr.splitlines()[0] if done_stderr.strip() else ""
    assert first.startswith(starts), done_stderr[-3000:]
    assert "Traceback" not in done_stderr and "Stack Trace" not in done_stderr, done_stderr[-3000:]
    return first


def test_a_lock_taken_mid_wave_ends_in_one_line_naming_the_holder(tmp_path):
    command = _sabot(tmp_path, "wave", "run", "demo", *ONE_CELL, SABOT_STORE_LOCK_WAIT="1")
    deadline = time.monotonic() + 300
    while not list((tmp_path / "var" / "runroot").glob("demo/*/*/*/*/*/attempt-*")):  # runs under way: take the store
        assert command.poll() is None and time.monotonic() < deadline, command.communicate()
        time.sleep(0.1)
    holder = subprocess.Popen(
        [
            str(PROJECT / ".venv/bin/python"),
            "-c",
            # The command holds the store for moments of its own (an ingest): wait one out, then hold it.
            "import duckdb, sys, time\n"
            "for _ in range(300):\n"
            "    try:\n"
            "        c = duckdb.connect(sys.argv[1])\n"
            "        break\n"
            "    except duckdb.IOException:\n"
            "        time.sleep(0.05)\n"
            "print('held', flush=True)\n"
            "sys.stdin.read()",
            str(tmp_path / "var" / "sabot.duckdb"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        out, err = command.communicate(timeout=300)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert command.returncode == 1
    first = _one_line(err, "")
    assert f"is locked by PID {holder.pid}" in first and "SABOT_STORE_LOCK_WAIT" in first, err


def test_a_replay_with_nothing_stored_is_one_line_and_debug_shows_the_traceback(tmp_path):
    out, err = _sabot(tmp_path, "wave", "run", "demo", *ONE_CELL, "--replay").communicate(timeout=300)
    assert _one_line(err, "Error: replay of demo-langgraph-T1-default-").endswith(
        "the store holds no recorded run for this cell; nothing was sent"
    )
    out, err = _sabot(tmp_path, "--debug", "wave", "run", "demo", *ONE_CELL, "--replay").communicate(timeout=300)
    assert "Traceback" in err and "RecordingMissing" in err


def test_a_team_pipelines_401_is_one_paragraph_its_log_kept_in_the_run_root(tmp_path):
    policy = tmp_path / "quick.json"
    policy.write_text(json.dumps(QUICK_POLICY))
    with FaultProvider("401", key=KEY) as provider:
        command = _sabot(
            tmp_path,
            "wave",
            "run",
            "demo",
            "--framework",
            "autogen",
            "--config",
            "default",
            "--task",
            "T1",
            "--operator",
            "O1",
            "--seed",
            "11",
            SABOT_MODEL_BASE_URL=provider.base_url,
            SABOT_MODEL_API_KEY=KEY,
            SABOT_CALL_POLICY=str(policy),
        )
        out, err = command.communicate(timeout=600)
    assert command.returncode == 1
    first = _one_line(err, "demo: the wave stopped: ")
    assert "answered 401" in first and "resumes them" in first
    logged = "".join(p.read_text() for p in (tmp_path / "var" / "runroot").rglob("pipeline.log"))
    assert "AuthenticationError" in logged  # what AutoGen logged is kept beside the run, not lost
