"""The §8 cap on a real wave: the breaker stops launching at the budget and the cells never started
stay missing (resumed later, never RUN_ERROR); a projection over budget is refused before any call."""

import os
import subprocess
from pathlib import Path

import dagster as dg
import pytest

from sabot.store.db import connect

PROJECT = Path(__file__).resolve().parents[1]
SLICE = ["demo", "--framework", "langgraph", "--config", "default", "--task", "T1"]  # 1 baseline + 6 fault runs


def _sabot(var: Path, *args, **extra) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SABOT_MODEL_BASE_URL", "SABOT_MODEL_API_KEY", "SABOT_DB", "DAGSTER_HOME", "SABOT_DAGSTER_STORAGE")
    }
    return subprocess.run(
        [str(PROJECT / ".venv/bin/sabot"), "wave", "run", *args],
        env={**env, "SABOT_VAR": str(var), **extra},
        capture_output=True,
        text=True,
        timeout=600,
    )


def _attempts(var: Path, wave: str) -> list[Path]:
    return sorted((var / "runroot").glob(f"{wave}/*/*/*/*/*/attempt-*"))


def _calls(var: Path) -> int:
    with connect(var / "sabot.duckdb", read_only=True) as con:
        return con.execute("SELECT count(*) FROM model_calls").fetchone()[0]


def _fault_run_status(var: Path) -> dict:
    """The fault-run partitions Dagster holds a status for on the CLI's instance (missing ones have none)."""
    from sabot.registry import Registry
    from sabot_assets.partitions import cell_partitions

    wave = Registry().wave("demo")
    partitions = cell_partitions(wave)
    old = {k: os.environ.get(k) for k in ("DAGSTER_HOME", "SABOT_DAGSTER_STORAGE")}
    os.environ.update(DAGSTER_HOME=str(PROJECT), SABOT_DAGSTER_STORAGE=str(var / "dagster"))
    try:
        with dg.DagsterInstance.get() as instance:
            keys = [k for k in partitions.get_partition_keys() if k.endswith("|langgraph.default.T1.s11")]
            assert len(keys) == 6
            return {
                k: v
                for k, v in instance.get_status_by_partition(
                    dg.AssetKey(["demo", "fault_runs"]), keys, partitions
                ).items()
                if v is not None
            }
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


@pytest.fixture(scope="module")
def var(tmp_path_factory):
    return tmp_path_factory.mktemp("budget")


def test_a_pilot_whose_budget_cannot_pay_one_run_is_refused_then_runs_in_full(var):
    """--budget 0.001 is below one pilot run's registered worst case: refused before any call (the
    breaker stopping mid-wave, across two commands, is tests/test_wave_guards.py)."""
    refused = _sabot(var, *SLICE, "--budget", "0.001")
    assert refused.returncode == 1, refused.stderr[-2000:]
    assert "a pilot run of langgraph (no recorded run at this endpoint) can cost up to $" in refused.stderr
    assert "no run is launched" in refused.stderr
    assert _attempts(var, "demo") == [] and not (var / "sabot.duckdb").exists()  # not one call, nothing stored

    resumed = _sabot(var, *SLICE)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "7 run, 0 reused" in resumed.stdout
    assert "metered, $" in resumed.stdout and "margined (x2)" in resumed.stdout  # the board prints both figures
    assert len(_attempts(var, "demo")) == 7
    status = _fault_run_status(var)
    assert len(status) == 6 and set(status.values()) == {dg.AssetPartitionStatus.MATERIALIZED}


def test_a_projection_over_budget_is_refused_before_any_model_call(var):
    """The demo runs above recorded what a LangGraph run costs; wave 1's row has 5 seeds."""
    calls = _calls(var)
    refused = _sabot(
        var, "wave1", "--framework", "langgraph", "--config", "default", "--task", "T1", "--budget", "0.01"
    )
    assert refused.returncode == 1
    assert "projected spend $" in refused.stderr and "exceeds the budget of $0.0100" in refused.stderr
    assert "cut seeds 5 -> 3 (seeds 11, 12, 13) before any cell is cut: projected $" in refused.stderr
    assert "(--seed 11 --seed 12 --seed 13)" in refused.stderr  # how to make the cut
    assert _attempts(var, "wave1") == [] and _calls(var) == calls  # not one model call


def test_a_provider_wave_is_never_labelled_simulation_even_when_every_run_failed(tmp_path):
    """A dead provider: every run ends in RUN_ERROR before its record names an endpoint's replies."""
    import json

    quick = tmp_path / "quick_call_policy.json"  # a dead endpoint fails fast
    # RUN_ERROR cells are the subject here, not the endpoint breaker (tests/test_provider_faults.py): kept closed
    quick.write_text(
        json.dumps(
            {
                "retry": {"max_attempts": 2, "initial_backoff_seconds": 0.05, "jitter_seconds": 0.05},
                "breaker": {"consecutive_failures": 1000},
            }
        )
    )
    out = _sabot(
        tmp_path,
        *SLICE,
        "--operator",
        "O1",
        "--budget",
        "7",
        "--json",
        str(tmp_path / "board.json"),
        SABOT_MODEL_BASE_URL="http://127.0.0.1:3598/v1",
        SABOT_MODEL_API_KEY="sk-test",
        SABOT_CALL_POLICY=str(quick),
    )
    assert out.returncode == 1 and "2 cell(s) ended in RUN_ERROR" in out.stderr
    assert "model endpoint: provider http://127.0.0.1:3598/v1" in out.stdout
    assert "demo under ruleset v0.2.0 (derived)" in out.stdout
    assert "spend (provider usage)" in out.stdout
    assert "simulation" not in out.stdout.lower()
    assert json.loads((tmp_path / "board.json").read_text())["label"] == "derived"
