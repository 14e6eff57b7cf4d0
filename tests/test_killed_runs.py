"""Every answered call is stored, a killed run's too: the gateway writes each exchange to the run root
(fsync) before the pipeline gets its answer, and the next command finishes a killed attempt from that
journal as `stopped`, so its calls count in spend and the budget and show under that attempt."""

import os
import signal
import subprocess
import time
from pathlib import Path

from sabot.exchange_journal import JOURNAL_FILE
from sabot.store.db import connect
from sabot.store.spend import stored_costs
from tests.fault_provider import FaultProvider

PROJECT = Path(__file__).resolve().parents[1]
KEY = "sk-proj-KILLED-run-5e2a"
ARGS = ["wave", "run", "demo", "--framework", "langgraph", "--config", "default", "--task", "T1", "--seed", "11", "--concurrency", "1"]
DELAY = 0.5  # each call's time at the provider: the kill lands mid-call


def _env(tmp_path: Path, provider: FaultProvider) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("SABOT_DB", "DAGSTER_HOME", "SABOT_DAGSTER_STORAGE", "SABOT_DEBUG")}
    return {**env, "SABOT_VAR": str(tmp_path / "var"), "SABOT_MODEL_BASE_URL": provider.base_url, "SABOT_MODEL_API_KEY": KEY}


def _run_mid_way(run_root: Path) -> bool:
    for journal in run_root.glob(f"demo/*/*/*/*/*/attempt-*/{JOURNAL_FILE}"):
        if not (journal.parent / "attempt.json").exists() and len(journal.read_text().splitlines()) >= 2:  # a header and an answered call
            return True
    return False


def test_a_group_killed_with_calls_in_flight_loses_no_answered_call(tmp_path):
    with FaultProvider("slow", delay=DELAY) as provider:
        command = subprocess.Popen([str(PROJECT / ".venv/bin/sabot"), *ARGS], env=_env(tmp_path, provider), start_new_session=True,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        # A run answered a call with its next one at the provider: one run at a time, so that call was sent
        # only once the last answer was journaled, and the kill lands before the provider answers it.
        while not (provider.calls > provider.answered and _run_mid_way(tmp_path / "var" / "runroot")):
            assert command.poll() is None and time.monotonic() < deadline, "the wave ended before it could be killed"
            time.sleep(0.01)
        os.killpg(command.pid, signal.SIGKILL)
        command.wait()
        answered_before_kill = provider.answered
        time.sleep(DELAY * 2)  # the call in flight is answered to a closed socket: nobody received it, nothing to store
        unreceived = provider.answered - answered_before_kill

        before_rerun = provider.answered
        rerun = subprocess.run([str(PROJECT / ".venv/bin/sabot"), *ARGS], env=_env(tmp_path, provider), capture_output=True, text=True, timeout=600)
        answered_by_rerun = provider.answered - before_rerun
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert unreceived <= 1
    with connect(tmp_path / "var" / "sabot.duckdb", read_only=True) as con:
        stored = con.execute("SELECT count(*) FROM model_calls WHERE wave = 'demo' AND status = 200").fetchone()[0]
        killed = con.execute("SELECT operator, probe, attempt, record FROM attempts WHERE outcome = 'stopped' AND error LIKE 'killed:%'").fetchall()
        ledger = stored_costs(con)
        debug = con.execute("SELECT operator, probe, attempt, outcome, error, source_sha256 FROM attempts").fetchall()
        slot = killed[0][:2] if killed else ("", "")
        records = con.execute("SELECT record_sha256, count(*), count(cost_usd) FROM model_calls WHERE wave = 'demo' AND operator = ? AND probe = ? "
                              "GROUP BY record_sha256", list(slot)).fetchall()
    assert stored == answered_before_kill + answered_by_rerun  # every call a run was answered, over the killed attempt and the rerun
    assert len(killed) == 1, killed  # the run in flight at the kill, finished from its journal
    # the slot's calls: the killed attempt's (from its journal) and the rerun's, as two records, each call priced
    assert len(records) == 2 and all(calls > 0 and priced == calls for _, calls, priced in records), (records, debug, rerun.stdout[-1500:])
    assert all(f"demo|{slot[0]}|{slot[1]}|{sha}" in ledger for sha, _, _ in records)  # what the spend ledger (the budget) counts
