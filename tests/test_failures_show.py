"""RUN_ERROR cells are failed partitions in Dagster, good runs survive a bad endpoint, and a store
lock held past the wait loses no finished run (issue: no lost work)."""

import json
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from click.testing import CliRunner
from dagster_duckdb import DuckDBResource

from sabot.store.db import connect
from sabot_assets.definitions import build_definitions
from sabot_assets.guard import require_registered
from sabot_assets.materialize import RunTally
from sabot_assets.waves.cell_metadata import RUN_ERROR_KEY

DEAD_ENDPOINT = "http://127.0.0.1:3598/v1"  # nothing listens here
SLICE = ["O1|langgraph.default.T1.s11", "O2|langgraph.default.T1.s11", "O3|langgraph.default.T1.s11"]
CARVED = "O2|autogen.guardrail.T1.s11"  # Magentic-One carve-out: never run


class Slice:
    def __init__(self, registry, tmp: Path, instance):
        self.store = tmp / "sabot.duckdb"
        self.run_root = tmp / "runroot"
        self.registry = registry
        self.defs = build_definitions(registry, DuckDBResource(database=str(self.store)))
        self.instance = instance
        self.fault_runs = dg.AssetKey(["demo", "fault_runs"])

    def materialize(self, keys: list[str]) -> dg.ExecuteInProcessResult:
        tally = RunTally()
        results = []
        for key in keys:  # one run per partition, as the UI's multi_run backfill would for a scattered selection
            result = dg.materialize(
                self.defs.assets,
                selection=[self.fault_runs],
                partition_key=key,
                instance=self.instance,
                resources=self.defs.resources,
                raise_on_error=False,
            )
            tally.add(result)
            results.append(result)
        return tally, results

    def status(self, keys):
        partitions = self.defs.get_assets_def(self.fault_runs).partitions_def
        return {k: v for k, v in self.instance.get_status_by_partition(self.fault_runs, keys, partitions).items()}

    def attempts(self):
        with connect(self.store, read_only=True) as con:
            return con.execute(
                "SELECT operator || '|' || probe, attempt, outcome FROM attempts ORDER BY 1, 2"
            ).fetchall()

    def scored(self):
        with connect(self.store, read_only=True) as con:
            return dict(
                (r[0], r[1:])
                for r in con.execute(
                    "SELECT operator || '|' || probe, attempt, error IS NULL FROM runs WHERE operator <> ''"
                ).fetchall()
            )


@pytest.fixture
def live_slice(registry, tmp_path, monkeypatch):
    monkeypatch.delenv("SABOT_MODEL_BASE_URL", raising=False)
    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        yield Slice(registry, tmp_path, instance)


def test_run_error_partitions_are_failed_and_good_runs_survive(live_slice, monkeypatch):
    s = live_slice
    tally, _ = s.materialize(SLICE[:2] + [CARVED])
    assert (tally.ran, tally.reused, tally.carved_out, tally.run_errors) == (2, 0, 1, {})
    status = s.status(SLICE + [CARVED])
    assert status[SLICE[0]] == status[SLICE[1]] == dg.AssetPartitionStatus.MATERIALIZED
    assert status[CARVED] == dg.AssetPartitionStatus.MATERIALIZED  # carved out: recorded as such, not missing work
    assert status.get(SLICE[2]) is None  # never run: missing

    monkeypatch.setenv("SABOT_MODEL_BASE_URL", DEAD_ENDPOINT)
    monkeypatch.setenv("SABOT_MODEL_API_KEY", "sk-test")
    quick = s.store.parent / "quick_call_policy.json"  # the registered policy spends ~68 s a run on a dead endpoint
    # RUN_ERROR cells are the subject here, not the endpoint breaker (tests/test_provider_faults.py): kept closed
    quick.write_text(
        '{"retry": {"max_attempts": 2, "initial_backoff_seconds": 0.05, "jitter_seconds": 0.05}, "breaker": {"consecutive_failures": 1000}}'
    )
    monkeypatch.setenv("SABOT_CALL_POLICY", str(quick))
    tally, results = s.materialize(SLICE)
    assert set(tally.run_errors) == set(SLICE) and tally.reused == 0  # another endpoint: nothing to reuse
    assert all(DEAD_ENDPOINT in e for e in tally.run_errors.values())
    status = s.status(SLICE)
    assert all(status[k] == dg.AssetPartitionStatus.FAILED for k in SLICE)
    # The run log names the error and the endpoint, per cell.
    logs = [e.message for r in results for e in s.instance.all_logs(r.run_id) if e.user_message]
    assert any("RUN_ERROR" in m and DEAD_ENDPOINT in m and SLICE[0] in m for m in logs)
    # Failures as sentences: the step failure and the partition's observation both lead with the cell's reason.
    failure = next(
        e.dagster_event
        for e in s.instance.all_logs(results[0].run_id)
        if e.dagster_event and e.dagster_event.is_step_failure
    )
    data = failure.step_failure_data.user_failure_data
    assert data.description.splitlines()[0] == f"{SLICE[0]}: RUN_ERROR: {tally.run_errors[SLICE[0]]}"
    assert list(data.metadata)[0] == RUN_ERROR_KEY and data.metadata[RUN_ERROR_KEY].value.endswith(
        tally.run_errors[SLICE[0]]
    )
    observed = s.instance.fetch_observations(
        dg.AssetRecordsFilter(asset_key=s.fault_runs, asset_partitions=[SLICE[0]]), limit=1
    ).records
    assert list(observed[0].asset_observation.metadata)[0] == RUN_ERROR_KEY
    # The good runs stay the scored runs; the RUN_ERROR attempts sit beside them.
    assert s.scored() == {SLICE[0]: (1, True), SLICE[1]: (1, True), SLICE[2]: (1, False)}
    assert [a for a in s.attempts() if a[0] == SLICE[0]] == [(SLICE[0], 1, "complete"), (SLICE[0], 2, "run_error")]

    # A board built now (no verdict ever ran for the failed O3 cell) itemizes it as RUN_ERROR, never drops it.
    board = dg.materialize(
        s.defs.assets, selection=[dg.AssetKey(["demo", "scoreboard"])], instance=s.instance, resources=s.defs.resources
    )
    assert board.success
    with connect(s.store, read_only=True) as con:
        doc = json.loads(
            con.execute(
                "SELECT body FROM reports WHERE wave = 'demo' AND ruleset = 'v0.2.0' AND format = 'board.json'"
            ).fetchone()[0]
        )
    assert doc["exclusions"] == [["langgraph", "default", "T1", "O3", "RUN_ERROR", 1]]

    # The endpoint comes back: "failed and missing" within the slice is exactly the RUN_ERROR cells...
    monkeypatch.delenv("SABOT_MODEL_BASE_URL")
    selection = [k for k, v in s.status(SLICE).items() if v in (None, dg.AssetPartitionStatus.FAILED)]
    assert sorted(selection) == sorted(SLICE)
    tally, _ = s.materialize(SLICE)
    # ...and re-running them reuses the stored good runs (same endpoint again) and runs only the third.
    assert (tally.ran, tally.reused, tally.run_errors) == (1, 2, {})
    assert all(v == dg.AssetPartitionStatus.MATERIALIZED for v in s.status(SLICE).values())
    assert s.scored() == {SLICE[0]: (1, True), SLICE[1]: (1, True), SLICE[2]: (2, True)}

    # Lineage names the attempt the verdict read: the good attempt 1, not the RUN_ERROR attempt 2.
    verdicts = dg.materialize(
        s.defs.assets,
        selection=[dg.AssetKey(["demo", "cell_verdicts"])],
        partition_key=SLICE[0],
        instance=s.instance,
        resources=s.defs.resources,
    )
    assert verdicts.success
    from sabot.store.lineage import cell_detail

    with connect(s.store, read_only=True) as con:
        detail = cell_detail(con, "demo", "v0.2.0", *SLICE[0].split("|"))
    assert detail["verdict"]["fault_attempt"] == 1
    assert [(a["attempt"], a["outcome"]) for a in detail["attempts"]] == [
        (1, "complete"),
        (2, "run_error"),
    ]


def _hold_lock(store: Path) -> subprocess.Popen:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, sys; c = duckdb.connect({str(store)!r}); print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_lock_held_past_the_wait_loses_no_finished_run(live_slice, monkeypatch):
    s = live_slice
    with connect(s.store):
        pass  # the store exists
    # A command checks the store's pin of the standard when it starts; the lock is taken by another
    # command afterwards, while this one's run is in flight.
    require_registered(s.registry, DuckDBResource(database=str(s.store)))
    monkeypatch.setenv("SABOT_STORE_LOCK_WAIT", "1")
    holder = _hold_lock(s.store)
    try:
        tally, results = s.materialize(SLICE[:1])
        assert len(tally.waiting) == 1 and tally.ran == 1  # the run finished; the store could not take it
        assert s.status(SLICE[:1])[SLICE[0]] == dg.AssetPartitionStatus.FAILED
        failure = next(e for e in results[0].all_events if e.is_step_failure)
        assert f"PID {holder.pid}" in failure.step_failure_data.user_failure_data.description
        finished = sorted(p.parent.name for p in s.run_root.rglob("attempt.json"))
        assert finished == ["attempt-1"]

        # Under the held lock a read command prints one line naming the holder, no traceback.
        import sabot_assets.constants as constants
        from sabot_assets.cli import main

        monkeypatch.setattr(constants, "STORE_PATH", s.store)
        for name in ("DAGSTER_HOME", "SABOT_DAGSTER_STORAGE"):  # the CLI would set these for good otherwise
            monkeypatch.setenv(name, str(s.store.parent / "dagster"))
        out = CliRunner().invoke(main, ["explain", "demo", "framework_config", "langgraph/default", "union"])
        assert out.exit_code == 1
        assert out.output.count("\n") == 1 and f"PID {holder.pid}" in out.output and "Traceback" not in out.output
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    tally, _ = s.materialize(SLICE[:1])
    assert (tally.ran, tally.reused, tally.waiting) == (0, 1, [])  # ingested from the run root: zero repeated calls
    assert sorted(p.parent.name for p in s.run_root.rglob("attempt.json")) == ["attempt-1"]
    assert s.scored() == {SLICE[0]: (1, True)}
    assert s.status(SLICE[:1])[SLICE[0]] == dg.AssetPartitionStatus.MATERIALIZED
