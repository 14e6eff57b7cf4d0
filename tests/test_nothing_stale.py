"""`sabot wave run` with nothing stale launches nothing: every selected run reused, the verdicts and
board as the last complete run left them. Anything written since (a lost or changed row) is stale."""

import os
import subprocess
from pathlib import Path

import pytest

from sabot.store.db import connect

PROJECT = Path(__file__).resolve().parents[1]
SLICE = ["demo", "--framework", "langgraph", "--config", "default", "--task", "T1"]  # 1 baseline + 6 fault runs
NOTHING_STALE = "nothing stale"


def _sabot(var: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("SABOT_MODEL_BASE_URL", "SABOT_MODEL_API_KEY", "SABOT_DB", "DAGSTER_HOME", "SABOT_DAGSTER_STORAGE")}
    return subprocess.run([str(PROJECT / ".venv/bin/sabot"), "wave", "run", *SLICE], env={**env, "SABOT_VAR": str(var)},
                          capture_output=True, text=True, timeout=600)


def _writers(var: Path) -> set:
    """Every (table, Dagster run) that wrote a row of the demo wave: a materialization adds one."""
    with connect(var / "sabot.duckdb", read_only=True) as con:
        return {(t, r) for t in ("runs", "cell_verdicts", "scoreboard", "reports")
                for (r,) in con.execute(f"SELECT DISTINCT dagster_run_id FROM {t} WHERE wave = 'demo'").fetchall()}


def _board(stdout: str) -> str:
    return stdout[stdout.index("Instrument check"):stdout.rindex("done in")]


@pytest.fixture(scope="module")
def var(tmp_path_factory):
    var = tmp_path_factory.mktemp("settled")
    first = _sabot(var)
    assert first.returncode == 0, first.stderr[-2000:]
    assert NOTHING_STALE not in first.stdout
    return var, first


def test_a_second_run_with_nothing_stale_materializes_nothing_and_prints_the_same_board(var):
    var, first = var
    before = _writers(var)
    again = _sabot(var)
    assert again.returncode == 0, again.stderr[-2000:]
    assert NOTHING_STALE in again.stdout
    assert "0 run, 7 reused" in again.stdout
    assert _writers(var) == before
    assert _board(again.stdout) == _board(first.stdout)


def test_a_verdict_lost_from_the_store_is_stale_and_written_again(var):
    var, _ = var
    with connect(var / "sabot.duckdb") as con:
        con.execute("DELETE FROM cell_verdicts WHERE wave = 'demo' AND operator = 'O1'")
    again = _sabot(var)
    assert again.returncode == 0, again.stderr[-2000:]
    assert NOTHING_STALE not in again.stdout
    assert "0 run, 7 reused" in again.stdout  # stale verdicts, not stale runs: nothing re-run
    with connect(var / "sabot.duckdb", read_only=True) as con:
        assert con.execute("SELECT count(*) FROM cell_verdicts WHERE wave = 'demo' AND operator = 'O1'").fetchone()[0] > 0
    assert NOTHING_STALE in _sabot(var).stdout  # settled again
