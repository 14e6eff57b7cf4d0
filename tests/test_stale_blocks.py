"""`sabot wave run` with something stale settles only the stale blocks and what lies downstream of
them (the kappa audit, the board): a block whose runs, rules and stored rows are as its last
settling left them is not materialized again."""

import os
import subprocess
from pathlib import Path

from sabot.store.db import connect

PROJECT = Path(__file__).resolve().parents[1]
SLICE = [
    "demo",
    "--framework",
    "langgraph",
    "--config",
    "default",
    "--task",
    "T1",
    "--task",
    "T2",
]  # two blocks: 2 baselines + 12 fault runs


def _sabot(var: Path) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SABOT_MODEL_BASE_URL", "SABOT_MODEL_API_KEY", "SABOT_DB", "DAGSTER_HOME", "SABOT_DAGSTER_STORAGE")
    }
    return subprocess.run(
        [str(PROJECT / ".venv/bin/sabot"), "wave", "run", *SLICE],
        env={**env, "SABOT_VAR": str(var)},
        capture_output=True,
        text=True,
        timeout=900,
    )


def _writers(var: Path, table: str, task: str) -> set:
    """The Dagster runs that wrote the demo wave's rows of `table` for one task's block."""
    with connect(var / "sabot.duckdb", read_only=True) as con:
        return {
            r
            for (r,) in con.execute(
                f"SELECT DISTINCT dagster_run_id FROM {table} WHERE wave = 'demo' AND probe LIKE ?",
                [f"langgraph.default.{task}.%"],
            ).fetchall()
        }


def _board_writers(var: Path) -> set:
    with connect(var / "sabot.duckdb", read_only=True) as con:
        return {
            r for (r,) in con.execute("SELECT DISTINCT dagster_run_id FROM scoreboard WHERE wave = 'demo'").fetchall()
        }


def test_a_stale_block_is_settled_again_and_a_fresh_one_is_left_alone(tmp_path):
    first = _sabot(tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    fresh_block = {t: _writers(tmp_path, t, "T1") for t in ("runs", "cell_verdicts", "judge_verdicts")}
    board = _board_writers(tmp_path)
    with connect(tmp_path / "sabot.duckdb") as con:  # T2's verdicts lost: its block is stale, T1's is not
        con.execute("DELETE FROM cell_verdicts WHERE wave = 'demo' AND probe LIKE 'langgraph.default.T2.%'")

    again = _sabot(tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "nothing stale" not in again.stdout
    assert {t: _writers(tmp_path, t, "T1") for t in fresh_block} == fresh_block  # T1: not one row written again
    assert "0 run, 14 reused" in again.stdout  # the fresh block's reused runs are counted as before
    restored = _writers(tmp_path, "cell_verdicts", "T2")
    assert restored and not restored & fresh_block["cell_verdicts"]  # T2: settled again, by this command's runs
    assert _board_writers(tmp_path) != board  # downstream of the stale block: the board is made again
    assert "nothing stale" in _sabot(tmp_path).stdout  # and the slice is settled again
