"""`sabot wave run` killed with -9 mid-wave resumes without repeating a finished run; a later bad
endpoint keeps the good runs scored, stores its RUN_ERROR attempts beside them and exits non-zero."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from sabot.store.db import connect

PROJECT = Path(__file__).resolve().parents[1]
SLICE = ["demo", "--framework", "langgraph", "--config", "default", "--task", "T1"]  # 1 baseline + 6 fault runs
SLOTS = 7
DEAD_ENDPOINT = "http://127.0.0.1:3597/v1"  # nothing listens here


def _env(var: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("SABOT_MODEL_BASE_URL", "SABOT_MODEL_API_KEY", "SABOT_DB", "DAGSTER_HOME", "SABOT_DAGSTER_STORAGE")}
    return {**env, "SABOT_VAR": str(var), **extra}


def _sabot(var: Path, *args, **extra) -> subprocess.CompletedProcess:
    return subprocess.run([str(PROJECT / ".venv/bin/sabot"), "wave", "run", *args], env=_env(var, **extra), capture_output=True, text=True, timeout=600)


def _attempt_dirs(var: Path) -> dict[str, list[tuple[str, bool]]]:
    """slot -> [(attempt dir, finished)] from the run root."""
    out = {}
    for d in sorted((var / "runroot").glob("demo/*/*/*/*/*/attempt-*")):
        out.setdefault(str(d.parent.relative_to(var / "runroot")), []).append((d.name, (d / "attempt.json").exists()))
    return out


@pytest.fixture(scope="module")
def var(tmp_path_factory):
    return tmp_path_factory.mktemp("resume")


def test_a_wave_killed_mid_way_resumes_without_repeating_a_finished_run(var):
    proc = subprocess.Popen([str(PROJECT / ".venv/bin/sabot"), "wave", "run", *SLICE], env=_env(var),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if sum(done for tries in _attempt_dirs(var).values() for _, done in tries) >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the wave ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)  # the whole process group this test started
    proc.wait()
    before = _attempt_dirs(var)
    finished = {slot for slot, tries in before.items() if any(done for _, done in tries)}
    assert 2 <= len(finished) < SLOTS

    again = _sabot(var, *SLICE)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"{SLOTS - len(finished)} run, {len(finished)} reused" in again.stdout
    after = _attempt_dirs(var)
    assert len(after) == SLOTS
    for slot in finished:  # zero repeated model calls: no new attempt was even started
        assert after[slot] == before[slot] and [done for _, done in after[slot]] == [True]
    for slot, tries in after.items():
        assert [done for _, done in tries].count(True) == 1, (slot, tries)

    with connect(var / "sabot.duckdb", read_only=True) as con:
        runs = con.execute("SELECT count(*), count(DISTINCT operator || probe), count(*) FILTER (status = 'present' AND error IS NULL) FROM runs WHERE wave = 'demo'").fetchone()
        assert runs == (SLOTS, SLOTS, SLOTS)
        assert con.execute("SELECT count(*), count(*) FILTER (outcome = 'complete') FROM attempts").fetchone() == (SLOTS, SLOTS)
        records = [json.loads(r[0]) for r in con.execute("SELECT record FROM runs WHERE wave = 'demo'").fetchall()]
        events = con.execute("SELECT count(*), count(DISTINCT (operator, probe, seq)) FROM events WHERE wave = 'demo'").fetchone()
        assert events == (sum(len(r["trace"]["events"]) for r in records),) * 2  # no event lost or duplicated


def test_a_bad_endpoint_keeps_the_good_runs_and_exits_non_zero(var):
    with connect(var / "sabot.duckdb", read_only=True) as con:
        good = con.execute("SELECT operator, probe, source_sha256 FROM runs ORDER BY 1, 2").fetchall()
        valid = con.execute("SELECT count(*) FROM cell_verdicts WHERE ruleset = 'v0.2.0' AND status = 'valid'").fetchone()[0]
    bad = _sabot(var, *SLICE, SABOT_MODEL_BASE_URL=DEAD_ENDPOINT, SABOT_MODEL_API_KEY="sk-test")
    assert bad.returncode == 1
    assert f"{SLOTS} cell(s) ended in RUN_ERROR" in bad.stderr
    listed = [line for line in bad.stderr.splitlines() if line.startswith("  ") and DEAD_ENDPOINT in line]
    assert len(listed) == SLOTS
    with connect(var / "sabot.duckdb", read_only=True) as con:
        assert con.execute("SELECT operator, probe, source_sha256 FROM runs ORDER BY 1, 2").fetchall() == good  # kept
        assert con.execute("SELECT count(*) FROM cell_verdicts WHERE ruleset = 'v0.2.0' AND status = 'valid'").fetchone()[0] == valid == 6
        outcomes = con.execute("SELECT outcome, count(*) FROM attempts GROUP BY 1 ORDER BY 1").fetchall()
        assert outcomes == [("complete", SLOTS), ("run_error", SLOTS)]  # the RUN_ERROR attempts, stored beside
