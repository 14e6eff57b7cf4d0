"""Commands starting on a fresh store at once: each opens a whole database, never a half-created file.

Two `wave run`s on a new SABOT_VAR used to race: one opened the file the other had just created but
not yet written a header to ("exists, but it is not a valid DuckDB database file")."""

import multiprocessing
import os

from sabot.store.db import connect

ROUNDS, OPENERS = 30, 4  # before the fix: about 4% of openers failed (5 of 120 here)


def _open(path, barrier, table):
    barrier.wait()  # every opener reaches the missing store at the same moment
    with connect(path) as con:
        con.execute(f"SELECT count(*) FROM {table}").fetchall()


def test_openers_racing_on_a_fresh_store_all_open_it(tmp_path):
    context = multiprocessing.get_context("fork")
    failed = []
    for round_ in range(ROUNDS):
        path = tmp_path / str(round_) / "sabot.duckdb"
        barrier = context.Barrier(OPENERS)
        openers = [context.Process(target=_open, args=(path, barrier, "runs")) for _ in range(OPENERS)]
        for opener in openers:
            opener.start()
        for opener in openers:
            opener.join(60)
        failed += [(round_, o.exitcode) for o in openers if o.exitcode != 0]
        assert os.listdir(path.parent) == ["sabot.duckdb"], "a draft of the store was left beside it"
    assert failed == []
