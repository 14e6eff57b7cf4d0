"""The project's instance storage (dagster.yaml): Dagster's SQLite files, written faster.

A run's event shard is copied from a template made by Dagster's own initialisation, and the
storage is built with one parsed Alembic directory; every database must be the very one Dagster
would have made, and events must land in the shards and in the index.
"""

import sqlite3

import dagster as dg
import pytest

from tests.conftest import PROJECT


@dg.asset
def one() -> int:
    return 1


def _schema(path) -> tuple:
    with sqlite3.connect(path) as con:
        tables = sorted(
            con.execute("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchall()
        )
        revision = con.execute("SELECT version_num FROM alembic_version").fetchall()
        journal = con.execute("PRAGMA journal_mode").fetchone()[0]
    return tables, revision, journal


@pytest.fixture
def project_instance(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(PROJECT))
    monkeypatch.setenv("SABOT_DAGSTER_STORAGE", str(tmp_path / "dagster"))
    with dg.DagsterInstance.get() as instance:
        yield instance


def test_run_shards_are_the_databases_dagster_makes_and_hold_the_events(project_instance, tmp_path):
    from sabot_assets.instance_storage import BatchedSqliteEventLogStorage

    assert isinstance(project_instance.event_log_storage, BatchedSqliteEventLogStorage)
    runs = [dg.materialize([one], instance=project_instance).run_id for _ in range(2)]
    (tmp_path / "stock").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "stock")) as stock:  # Dagster's own SQLite storage
        stock_run = dg.materialize([one], instance=stock).run_id
    shard_dir = tmp_path / "dagster" / "history" / "runs"
    expected = _schema(tmp_path / "stock" / "history" / "runs" / f"{stock_run}.db")
    assert expected[2] == "wal"
    for run_id in runs:
        assert _schema(shard_dir / f"{run_id}.db") == expected
        assert any(
            e.dagster_event and e.dagster_event.is_step_materialization for e in project_instance.all_logs(run_id)
        )
    assert sorted(project_instance.event_log_storage.get_all_run_ids()) == sorted(runs)  # the template is no run
    for name in (
        "history/runs.db",
        "history/runs/index.db",
        "schedules/schedules.db",
    ):  # made by Dagster, checked and stamped
        assert _schema(tmp_path / "dagster" / name) == _schema(tmp_path / "stock" / name), name
    latest = project_instance.get_latest_materialization_event(dg.AssetKey("one"))
    assert latest is not None and latest.run_id == runs[-1]
