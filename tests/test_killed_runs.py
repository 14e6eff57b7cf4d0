"""Every answered call is stored, a killed run's too: the gateway writes each exchange to the run root
(fsync) before the pipeline gets its answer, and the next command finishes a killed attempt from that
journal as `stopped`, so its calls count in spend and the budget, and `explain` and the record pages
beside the UI show them under that attempt."""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from sabot.exchange_journal import JOURNAL_FILE
from sabot.store.db import connect
from sabot.store.spend import stored_costs
from sabot_assets.file_server.addresses import FILES_URL_ENV, record_url
from sabot_assets.file_server.server import serve
from sabot_assets.waves.cell_record import unfinished_attempt_links
from tests.fault_provider import FaultProvider

PROJECT = Path(__file__).resolve().parents[1]
KEY = "sk-proj-KILLED-run-5e2a"
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
    "--concurrency",
    "1",
]
DELAY = 0.5  # each call's time at the provider: the kill lands mid-call


def _env(tmp_path: Path, provider: FaultProvider) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SABOT_DB", "DAGSTER_HOME", "SABOT_DAGSTER_STORAGE", "SABOT_DEBUG")
    }
    return {
        **env,
        "SABOT_VAR": str(tmp_path / "var"),
        "SABOT_MODEL_BASE_URL": provider.base_url,
        "SABOT_MODEL_API_KEY": KEY,
    }


def _run_mid_way(run_root: Path) -> bool:
    """A fault run (its cell is what `explain` and the UI show) has a call answered and is not finished."""
    for journal in run_root.glob(f"demo/*/*/*/O*/*/attempt-*/{JOURNAL_FILE}"):
        if (
            not (journal.parent / "attempt.json").exists() and len(journal.read_text().splitlines()) >= 2
        ):  # a header and an answered call
            return True
    return False


@dataclass
class Killed:
    var: Path
    env: dict
    answered_before_kill: int
    unreceived: int
    answered_by_rerun: int
    rerun: subprocess.CompletedProcess


@pytest.fixture(scope="module")
def killed(tmp_path_factory) -> Killed:
    """A wave's process group killed with a fault run's call in flight, then the same command again."""
    tmp_path = tmp_path_factory.mktemp("killed")
    with FaultProvider("slow", delay=DELAY) as provider:
        command = subprocess.Popen(
            [str(PROJECT / ".venv/bin/sabot"), *ARGS],
            env=_env(tmp_path, provider),
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
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
        rerun = subprocess.run(
            [str(PROJECT / ".venv/bin/sabot"), *ARGS],
            env=_env(tmp_path, provider),
            capture_output=True,
            text=True,
            timeout=600,
        )
        answered_by_rerun = provider.answered - before_rerun
    return Killed(
        tmp_path / "var", _env(tmp_path, provider), answered_before_kill, unreceived, answered_by_rerun, rerun
    )


def _killed_attempt(var: Path) -> tuple[str, str, int, dict]:
    with connect(var / "sabot.duckdb", read_only=True) as con:
        [(operator, probe, attempt, record)] = con.execute(
            "SELECT operator, probe, attempt, record FROM attempts WHERE outcome = 'stopped' AND error LIKE 'killed:%'"
        ).fetchall()
    return operator, probe, attempt, json.loads(record)


def test_a_group_killed_with_calls_in_flight_loses_no_answered_call(killed):
    tmp_path, rerun, unreceived = killed.var.parent, killed.rerun, killed.unreceived
    answered_before_kill, answered_by_rerun = killed.answered_before_kill, killed.answered_by_rerun
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert unreceived <= 1
    with connect(tmp_path / "var" / "sabot.duckdb", read_only=True) as con:
        stored = con.execute("SELECT count(*) FROM model_calls WHERE wave = 'demo' AND status = 200").fetchone()[0]
        killed = con.execute(
            "SELECT operator, probe, attempt, record FROM attempts WHERE outcome = 'stopped' AND error LIKE 'killed:%'"
        ).fetchall()
        ledger = stored_costs(con)
        debug = con.execute("SELECT operator, probe, attempt, outcome, error, source_sha256 FROM attempts").fetchall()
        slot = killed[0][:2] if killed else ("", "")
        records = con.execute(
            "SELECT record_sha256, count(*), count(cost_usd) FROM model_calls WHERE wave = 'demo' AND operator = ? AND probe = ? "
            "GROUP BY record_sha256",
            list(slot),
        ).fetchall()
    assert (
        stored == answered_before_kill + answered_by_rerun
    )  # every call a run was answered, over the killed attempt and the rerun
    assert len(killed) == 1, killed  # the run in flight at the kill, finished from its journal
    # the slot's calls: the killed attempt's (from its journal) and the rerun's, as two records, each call priced
    assert len(records) == 2 and all(calls > 0 and priced == calls for _, calls, priced in records), (
        records,
        debug,
        rerun.stdout[-1500:],
    )
    assert all(
        f"demo|{slot[0]}|{slot[1]}|{sha}" in ledger for sha, _, _ in records
    )  # what the spend ledger (the budget) counts


def test_explain_lists_the_killed_attempts_exchanges_under_it(killed):
    operator, probe, attempt, record = _killed_attempt(killed.var)
    out = subprocess.run(
        [str(PROJECT / ".venv/bin/sabot"), "explain", "demo", "--cell", f"{operator}|{probe}"],
        env=killed.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"  attempt {attempt}: stopped"))
    kept = record["exchanges"]
    assert kept and lines[at + 1] == f"    model exchanges kept by attempt {attempt}: {len(kept)}", lines[at : at + 3]
    listed = lines[at + 2 : at + 2 + len(kept)]
    assert [line.split()[0] for line in listed] == [f"#{x['n']}" for x in kept], (
        listed
    )  # each call, under the killed attempt


def test_the_record_pages_show_the_killed_attempts_exchanges(killed, monkeypatch):
    operator, probe, attempt, record = _killed_attempt(killed.var)
    with connect(killed.var / "sabot.duckdb", read_only=True) as con:
        [(current, killed_source)] = con.execute(
            "SELECT (SELECT source_path FROM runs r WHERE r.wave = a.wave AND r.operator = a.operator "
            "AND r.probe = a.probe), a.source_path FROM attempts a WHERE a.operator = ? AND a.probe = ? "
            "AND a.attempt = ?",
            [operator, probe, attempt],
        ).fetchall()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv(FILES_URL_ENV, f"http://127.0.0.1:{port}")
    server = serve(killed.var, port, "http://127.0.0.1:3000")
    try:
        overview = urllib.request.urlopen(record_url(current), timeout=10).read().decode()
        # the cell's record in the UI (its cell_verdicts partition) links the killed attempt's exchanges
        [(label, url)] = unfinished_attempt_links(killed.var / "runroot", current).items()
        kept = urllib.request.urlopen(url.value, timeout=10).read().decode()
    finally:
        server.shutdown()
    assert label == f"attempt {attempt} (stopped) model exchanges" and url.value == record_url(
        killed_source, "exchanges"
    )
    assert current != killed_source and "Other attempts of this cell" in overview
    link = f"{record_url(killed_source, 'exchanges').split(str(port), 1)[1]}"
    assert f"href='{link}'>model exchanges ({len(record['exchanges'])})</a>" in overview, overview[-2000:]
    assert "killed: the run&#x27;s process died" in overview or "killed: the run's process died" in overview
    assert "Model exchanges" in kept and all(f"exchange {x['n']}</a>" in kept for x in record["exchanges"]), kept[
        -2000:
    ]
