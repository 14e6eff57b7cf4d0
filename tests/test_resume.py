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
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SABOT_MODEL_BASE_URL", "SABOT_MODEL_API_KEY", "SABOT_DB", "DAGSTER_HOME", "SABOT_DAGSTER_STORAGE")
    }
    return {**env, "SABOT_VAR": str(var), **extra}


def _sabot(var: Path, *args, **extra) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(PROJECT / ".venv/bin/sabot"), "wave", "run", *args],
        env=_env(var, **extra),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _attempt_dirs(var: Path) -> dict[str, list[tuple[str, bool]]]:
    """slot -> [(attempt dir, finished)] from the run root."""
    out = {}
    for d in sorted((var / "runroot").glob("demo/*/*/*/*/*/attempt-*")):
        out.setdefault(str(d.parent.relative_to(var / "runroot")), []).append((d.name, (d / "attempt.json").exists()))
    return out


def _began(var: Path, slot: str, attempt: str) -> bool:
    return (var / "runroot" / slot / attempt / "exchanges.jsonl").exists()


@pytest.fixture(scope="module")
def var(tmp_path_factory):
    return tmp_path_factory.mktemp("resume")


def test_a_wave_killed_mid_way_resumes_without_repeating_a_finished_run(var):
    proc = subprocess.Popen(
        [str(PROJECT / ".venv/bin/sabot"), "wave", "run", *SLICE],
        env=_env(var),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
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
    killed = {  # in flight at the kill, and begun: their journal has its first line
        slot: [name for name, done in tries if not done and _began(var, slot, name)] for slot, tries in before.items()
    }
    for slot, tries in after.items():
        # A killed attempt that began is finished from its journal as 'stopped' (one killed in the instant
        # before its journal's first line held nothing and is gone); one more run completes the slot.
        assert [name for name, done in tries if not done] == [], (slot, tries)
        assert len(tries) - len(killed.get(slot, [])) == 1, (slot, tries)
        assert all(name in dict(tries) for name in killed.get(slot, [])), (slot, tries)

    with connect(var / "sabot.duckdb", read_only=True) as con:
        runs = con.execute(
            "SELECT count(*), count(DISTINCT operator || probe), count(*) FILTER (status = 'present' AND error IS NULL) FROM runs WHERE wave = 'demo'"
        ).fetchone()
        assert runs == (SLOTS, SLOTS, SLOTS)
        in_flight = sum(len(names) for names in killed.values())
        assert con.execute(
            "SELECT count(*) FILTER (outcome = 'complete'), count(*) FILTER (outcome = 'stopped' AND error LIKE 'killed:%'), "
            "count(*) FROM attempts"
        ).fetchone() == (SLOTS, in_flight, SLOTS + in_flight)
        records = [json.loads(r[0]) for r in con.execute("SELECT record FROM runs WHERE wave = 'demo'").fetchall()]
        events = con.execute(
            "SELECT count(*), count(DISTINCT (operator, probe, seq)) FROM events WHERE wave = 'demo'"
        ).fetchone()
        assert events == (sum(len(r["trace"]["events"]) for r in records),) * 2  # no event lost or duplicated


def test_a_bad_endpoint_keeps_the_good_runs_and_exits_non_zero(var):
    with connect(var / "sabot.duckdb", read_only=True) as con:
        good = con.execute("SELECT operator, probe, source_sha256 FROM runs ORDER BY 1, 2").fetchall()
        valid = con.execute(
            "SELECT count(*) FROM cell_verdicts WHERE ruleset = 'v0.2.0' AND status = 'valid'"
        ).fetchone()[0]
    quick = var.parent / "quick_call_policy.json"  # the gateway's call budget made short: a dead endpoint fails fast
    # RUN_ERROR cells are the subject here, not the endpoint breaker (tests/test_provider_faults.py): kept closed
    quick.write_text(
        json.dumps(
            {
                "retry": {"max_attempts": 2, "initial_backoff_seconds": 0.05, "jitter_seconds": 0.05},
                "breaker": {"consecutive_failures": 1000},
            }
        )
    )
    bad = _sabot(
        var, *SLICE, SABOT_MODEL_BASE_URL=DEAD_ENDPOINT, SABOT_MODEL_API_KEY="sk-test", SABOT_CALL_POLICY=str(quick)
    )
    assert bad.returncode == 1
    assert f"{SLOTS} cell(s) ended in RUN_ERROR" in bad.stderr
    listed = [line for line in bad.stderr.splitlines() if line.startswith("  ") and DEAD_ENDPOINT in line]
    assert len(listed) == SLOTS
    with connect(var / "sabot.duckdb", read_only=True) as con:
        assert con.execute("SELECT operator, probe, source_sha256 FROM runs ORDER BY 1, 2").fetchall() == good  # kept
        assert (
            con.execute("SELECT count(*) FROM cell_verdicts WHERE ruleset = 'v0.2.0' AND status = 'valid'").fetchone()[
                0
            ]
            == valid
            == 6
        )
        outcomes = dict(
            con.execute(
                "SELECT outcome, count(*) FROM attempts WHERE error IS NULL OR error NOT LIKE 'killed:%' GROUP BY 1"
            ).fetchall()
        )
        assert outcomes == {
            "complete": SLOTS,
            "run_error": SLOTS,
        }  # the RUN_ERROR attempts, stored beside (the killed ones aside)


GRAPHQL_STATUSES = """query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { ... on AssetNode { assetPartitionStatuses {
  ... on MultiPartitionStatuses { primaryDimensionName ranges { primaryDimStartKey primaryDimEndKey
      secondaryDim { ... on DefaultPartitionStatuses { materializedPartitions failedPartitions } } } }
  ... on DefaultPartitionStatuses { materializedPartitions failedPartitions } } } } }"""
UI_PORT = 3596


def _group_alive(pgid: int) -> list[str]:
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(stat.parent.name)
    return alive


def _graphql(query: str, variables: dict) -> dict:
    import urllib.request

    req = urllib.request.Request(
        f"http://127.0.0.1:{UI_PORT}/graphql",
        data=json.dumps({"query": query, "variables": variables}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=60) as reply:
        return json.load(reply)["data"]


def test_the_ui_reports_run_error_cells_failed_and_stops_on_sigterm_from_the_background(var):
    """scripts/ui.sh started as a background job (SIGINT inherited as ignored): the Dagster GraphQL
    API the partitions view reads reports the RUN_ERROR cells failed; SIGTERM stops every process."""
    import urllib.request

    wrapper = subprocess.run(
        ["bash", "-c", f"PORT={UI_PORT} bash scripts/ui.sh > {var}/ui.log 2>&1 & echo $!"],
        cwd=PROJECT,
        env=_env(var),
        capture_output=True,
        text=True,
        start_new_session=True,
        timeout=30,
    )
    ui = int(wrapper.stdout.strip())
    pgid = os.getpgid(ui)
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{UI_PORT}/server_info", timeout=5)
                break
            except OSError:
                assert time.monotonic() < deadline, (var / "ui.log").read_text()[-2000:]
                time.sleep(1)
        faults = _graphql(GRAPHQL_STATUSES, {"key": {"path": ["demo", "fault_runs"]}})["assetNodeOrError"][
            "assetPartitionStatuses"
        ]
        assert faults["primaryDimensionName"] == "operator"
        failed = {
            (op, probe)
            for r in faults["ranges"]
            for op in ("O1", "O2", "O3", "O4", "O5", "O6")
            if r["primaryDimStartKey"] <= op <= r["primaryDimEndKey"]
            for probe in r["secondaryDim"]["failedPartitions"]
        }
        assert failed == {
            (op, "langgraph.default.T1.s11") for op in ("O1", "O2", "O3", "O4", "O5", "O6")
        }  # the last wave's RUN_ERROR cells
        baselines = _graphql(GRAPHQL_STATUSES, {"key": {"path": ["demo", "baseline_runs"]}})["assetNodeOrError"][
            "assetPartitionStatuses"
        ]
        assert baselines["failedPartitions"] == ["langgraph.default.T1.s11"]

        os.kill(ui, signal.SIGTERM)
        deadline = time.monotonic() + 120
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _group_alive(pgid) == [], "scripts/ui.sh left processes running after SIGTERM"
    finally:
        if _group_alive(pgid):
            os.killpg(pgid, signal.SIGKILL)  # only the group this test started
