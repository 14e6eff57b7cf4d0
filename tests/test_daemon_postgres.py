"""A wave slice through the daemon on a Postgres instance at concurrency 4: every cell stored once,
and nothing left stale: the `rescore` sensor (running in the same daemon) judges the new cells with
the offline judge and re-runs the kappa audit and its check after them, with no launch by anyone.

The real parts: Debian's PostgreSQL (started by `.ci/run` through scripts/postgres.sh, which sets
SABOT_TEST_POSTGRES_URL), dagster-postgres run and event storage, `dagster-daemon` with the queued
run coordinator launching one run worker per backfill run, the llm_agent pool limit at 4, and the
backfill launched through the same GraphQL mutation the UI's "Launch backfill" sends.
"""

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import dagster as dg
import pytest

from sabot.store.db import connect
from sabot_assets.waves.concurrency import pool_limit, set_pool_limit

PROJECT = Path(__file__).resolve().parents[1]
INSTANCE_HOME = PROJECT / "deploy" / "postgres"
DEADLINE_S = 900  # a slow shared machine; a healthy one finishes in about a minute


def _server_url() -> str:
    url = os.environ.get("SABOT_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("SABOT_REQUIRE_POSTGRES"):
            pytest.fail(
                "SABOT_REQUIRE_POSTGRES is set but SABOT_TEST_POSTGRES_URL is not (start it: bash scripts/postgres.sh)"
            )
        pytest.skip("no Postgres for the instance (set SABOT_TEST_POSTGRES_URL; bash scripts/postgres.sh prints one)")
    return url


@pytest.fixture
def postgres_instance(tmp_path, monkeypatch):
    """A fresh database on the server, and the project's Postgres instance config pointed at it."""
    import psycopg2

    server = _server_url()
    name = f"sabot_daemon_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(server.replace("postgresql+psycopg2://", "postgresql://"))
    admin.autocommit = True
    admin.cursor().execute(f'CREATE DATABASE "{name}"')
    env = {
        "DAGSTER_HOME": str(INSTANCE_HOME),
        "SABOT_DAGSTER_PG_URL": server.rsplit("/", 1)[0] + "/" + name,
        "SABOT_DAGSTER_STORAGE": str(tmp_path / "dagster"),
        "SABOT_VAR": str(tmp_path / "var"),
        "DAGSTER_DISABLE_TELEMETRY": "1",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with dg.DagsterInstance.from_config(str(INSTANCE_HOME)) as instance:
        yield instance, env, tmp_path
    admin.cursor().execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.close()


def _launch_backfill(instance, partition_names: list[str]) -> str:
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget
    from dagster_graphql.client.query import LAUNCH_PARTITION_BACKFILL_MUTATION
    from dagster_graphql.test.utils import execute_dagster_graphql

    target = WorkspaceFileTarget(paths=[str(PROJECT / "workspace.yaml")])
    with WorkspaceProcessContext(instance, target) as process_context:
        result = execute_dagster_graphql(
            process_context.create_request_context(),
            LAUNCH_PARTITION_BACKFILL_MUTATION,
            {
                "backfillParams": {
                    "assetSelection": [{"path": ["demo", "fault_runs"]}],
                    "partitionNames": partition_names,
                    "tags": [{"key": "sabot/wave", "value": "demo"}],
                }
            },
        )
    launched = result.data["launchPartitionBackfill"]
    assert launched["__typename"] == "LaunchBackfillSuccess", launched
    return launched["backfillId"]


def test_a_wave_slice_through_the_daemon_on_postgres_stores_every_cell_once(postgres_instance, registry):
    instance, env, tmp = postgres_instance
    set_pool_limit(instance, 4)
    assert pool_limit(instance) == 4
    wave = registry.wave("demo")
    probes = [p for p in wave.probes() if p.framework == "langgraph" and p.config == "default"][:4]
    cells = [f"{op}|{p.key}" for p in probes for op in ("O1", "O2")]  # 8 cells; Dagster splits them into several runs
    judge, kappa = dg.AssetKey(["demo", "judge_verdicts"]), dg.AssetKey(["demo", "kappa_audit"])
    log = open(tmp / "daemon.log", "w")
    daemon = subprocess.Popen(
        [str(PROJECT / ".venv/bin/dagster-daemon"), "run", "-w", str(PROJECT / "workspace.yaml")],
        cwd=PROJECT,
        env={**os.environ, **env},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        backfill_id = _launch_backfill(instance, cells)
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            backfill = instance.get_backfill(backfill_id)
            if backfill.status.value.startswith("COMPLETED") or backfill.status.value in ("FAILED", "CANCELED"):
                break
            assert daemon.poll() is None, f"the daemon exited: see {tmp / 'daemon.log'}"
            time.sleep(3)
        assert backfill.status.value == "COMPLETED_SUCCESS", f"backfill {backfill.status}: see {tmp / 'daemon.log'}"
        while not _soft_tier_current(instance, judge, kappa, cells):
            assert time.monotonic() < deadline, (
                f"judge verdicts or the kappa audit stayed stale: see {tmp / 'daemon.log'}"
            )
            assert daemon.poll() is None, f"the daemon exited: see {tmp / 'daemon.log'}"
            time.sleep(5)
    finally:
        os.killpg(daemon.pid, signal.SIGKILL)  # `dagster-daemon` started in the background may ignore SIGTERM
        daemon.wait()
        log.close()

    # Several Dagster runs launched by the daemon, sharing the 4 pool slots.
    runs = instance.get_run_records(dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
    assert len(runs) >= 2 and all(r.dagster_run.status == dg.DagsterRunStatus.SUCCESS for r in runs)
    with connect(Path(env["SABOT_VAR"]) / "sabot.duckdb", read_only=True) as con:
        stored = con.execute(
            "SELECT operator || '|' || probe, count(*), bool_and(outcome = 'complete') FROM attempts WHERE wave = 'demo' GROUP BY 1"
        ).fetchall()
        scored = con.execute(
            "SELECT operator || '|' || probe FROM runs WHERE wave = 'demo' AND status = 'present' AND error IS NULL"
        ).fetchall()
    assert sorted(key for (key,) in scored) == sorted(cells)
    assert sorted(key for key, _, _ in stored) == sorted(cells)  # every selected cell, and nothing else
    assert all(count == 1 and ok for _, count, ok in stored), (
        stored
    )  # each run exactly once (one attempt), each complete

    # The soft tier caught up by itself: every new cell judged (offline judge, no model call), each
    # partition with its own verdict, and the kappa audit and its check after the last of them.
    with connect(Path(env["SABOT_VAR"]) / "sabot.duckdb", read_only=True) as con:
        judged = con.execute(
            "SELECT operator || '|' || probe FROM judge_verdicts WHERE wave = 'demo' AND prompt_variant = 0"
        ).fetchall()
    assert sorted(key for (key,) in judged) == sorted(cells)
    sensor_runs = [r for r in instance.get_run_records(dg.RunsFilter(tags={"dagster/sensor_name": "rescore"}))]
    assert sensor_runs and all(
        r.dagster_run.status == dg.DagsterRunStatus.SUCCESS
        for r in sensor_runs
        if judge in (r.dagster_run.asset_selection or ())
    )
    latest = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=judge, asset_partitions=cells[:1]), limit=1
    ).records[0]
    assert latest.asset_materialization.metadata["judged"].value == "yes"


def _soft_tier_current(instance, judge: dg.AssetKey, kappa: dg.AssetKey, cells: list[str]) -> bool:
    """Every cell's judge verdict materialized, then the kappa audit and its check evaluated after all of them."""
    judged = {}
    for cell in cells:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=judge, asset_partitions=[cell]), limit=1
        ).records
        if not records:
            return False
        judged[cell] = records[0].storage_id
    audits = instance.fetch_materializations(kappa, limit=1).records
    if not audits or audits[0].storage_id < max(judged.values()):
        return False
    check = instance.event_log_storage.get_latest_asset_check_execution_by_key(
        [dg.AssetCheckKey(kappa, "kappa_meets_bound")]
    )
    evaluation = check.get(dg.AssetCheckKey(kappa, "kappa_meets_bound"))
    from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus as Status

    finished = (Status.SUCCEEDED, Status.FAILED)  # failed: too few double-judged pairs, and still current
    return (
        evaluation is not None and evaluation.status in finished and evaluation.event.timestamp >= audits[0].timestamp
    )
