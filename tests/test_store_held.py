"""A store held open by a short command (`sabot.store.db.held`, a rescore): every opening inside is a
cursor on the one opening, read-only or not, and what was written is the store's once it lets go."""

import subprocess
import sys

import pytest

from sabot.store.db import connect, held, open_store

OPEN_ELSEWHERE = (
    "import sys; from sabot.store.db import connect\n"
    "with connect(sys.argv[1], read_only=True) as con:\n"
    "    print(con.execute('SELECT count(*) FROM settlements').fetchone()[0])"
)


def _count_elsewhere(path) -> subprocess.CompletedProcess:
    """Another process opening the store read-only, not waiting for a held lock."""
    return subprocess.run(
        [sys.executable, "-c", OPEN_ELSEWHERE, str(path)],
        capture_output=True,
        text=True,
        env={"SABOT_STORE_LOCK_WAIT": "0", "PATH": "/usr/bin:/bin"},
        timeout=120,
    )


def test_openings_inside_a_held_store_share_it_and_its_writes_outlive_it(tmp_path):
    path = tmp_path / "sabot.duckdb"
    with held(path):
        with connect(path) as con:
            con.execute("INSERT INTO settlements VALUES ('w', 'print', 'run-1', now())")
        # Read-only, and with another configuration (the assets' resource): DuckDB refuses both
        # beside an open connection of its own unless they are cursors on it.
        with connect(path, read_only=True) as con:
            assert con.execute("SELECT dagster_run_id FROM settlements").fetchall() == [("run-1",)]
        con = open_store(path, config={"custom_user_agent": "dagster"})
        assert con.execute("SELECT count(*) FROM settlements").fetchone()[0] == 1
        con.close()
        held_elsewhere = _count_elsewhere(path)
        assert held_elsewhere.returncode != 0 and "locked" in held_elsewhere.stderr
    after = _count_elsewhere(path)
    assert after.returncode == 0, after.stderr
    assert after.stdout.strip() == "1"


def test_without_holding_a_read_only_opening_beside_a_writer_is_refused(tmp_path):
    """What `held` is for: the same openings without it are separate databases to DuckDB."""
    path = tmp_path / "sabot.duckdb"
    with connect(path) as writer:
        writer.execute("SELECT 1")
        with pytest.raises(Exception, match="different configuration"):
            open_store(path, read_only=True)


def test_a_held_store_is_let_go_when_the_command_fails(tmp_path):
    path = tmp_path / "sabot.duckdb"
    with pytest.raises(RuntimeError), held(path):
        raise RuntimeError("a step failed")
    with connect(path, read_only=True) as con:  # a new opening: nothing of the held one is left
        assert con.execute("SELECT count(*) FROM settlements").fetchone()[0] == 0
