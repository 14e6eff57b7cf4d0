"""`sabot wave run` with nothing stale launches nothing: every selected run reused, the verdicts and
board as the last complete run left them. Anything written since (a lost or changed row) is stale."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from sabot.store.db import connect

PROJECT = Path(__file__).resolve().parents[1]
SLICE = ["demo", "--framework", "langgraph", "--config", "default", "--task", "T1"]  # 1 baseline + 6 fault runs
NOTHING_STALE = "nothing stale"


def _sabot(var: Path, **extra_env) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SABOT_MODEL_BASE_URL", "SABOT_MODEL_API_KEY", "SABOT_DB", "DAGSTER_HOME", "SABOT_DAGSTER_STORAGE")
    }
    return subprocess.run(
        [str(PROJECT / ".venv/bin/sabot"), "wave", "run", *SLICE],
        env={**env, "SABOT_VAR": str(var), **extra_env},
        capture_output=True,
        text=True,
        timeout=600,
    )


def _writers(var: Path) -> set:
    """Every (table, Dagster run) that wrote a row of the demo wave: a materialization adds one."""
    with connect(var / "sabot.duckdb", read_only=True) as con:
        return {
            (t, r)
            for t in ("runs", "cell_verdicts", "scoreboard", "reports")
            for (r,) in con.execute(f"SELECT DISTINCT dagster_run_id FROM {t} WHERE wave = 'demo'").fetchall()
        }


def _board(stdout: str) -> str:
    return stdout[stdout.index("Instrument check") : stdout.rindex("done in")]


def _corpus_board(stdout: str) -> str:
    return stdout[stdout.index("public_wave2 under ruleset") : stdout.rindex("done in")]


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


def test_nothing_stale_is_known_without_the_dagster_instance(var, tmp_path, monkeypatch):
    """The settling is looked up in the store: with an instance that cannot even be created, a
    command with nothing to do still says so, naming the board run the store recorded, which
    Dagster holds as a success tagged with the same fingerprint."""
    import dagster as dg

    from sabot_assets.settled import SETTLED_TAG

    var, _ = var
    broken = tmp_path / "no-instance"
    broken.mkdir()
    (broken / "dagster.yaml").write_text("storage: [this is not an instance config]\n")
    again = _sabot(var, DAGSTER_HOME=str(broken))
    assert again.returncode == 0, again.stderr[-2000:]
    assert NOTHING_STALE in again.stdout
    with connect(var / "sabot.duckdb", read_only=True) as con:
        board_run, print_ = con.execute(
            "SELECT dagster_run_id, fingerprint FROM settlements WHERE wave = 'demo' ORDER BY settled_at DESC LIMIT 1"
        ).fetchone()
    assert f"those Dagster run {board_run} made" in again.stdout
    monkeypatch.setenv("DAGSTER_HOME", str(PROJECT))
    monkeypatch.setenv("SABOT_DAGSTER_STORAGE", str(var / "dagster"))
    with dg.DagsterInstance.get() as instance:
        run = instance.get_run_by_id(board_run)
    assert run.status == dg.DagsterRunStatus.SUCCESS and run.tags[SETTLED_TAG] == print_

    # The same instance home, once something is stale, does fail: the command above never created it.
    copy = tmp_path / "copy"
    shutil.copytree(var, copy)
    with connect(copy / "sabot.duckdb") as con:
        con.execute("DELETE FROM cell_verdicts WHERE wave = 'demo' AND operator = 'O2'")
    stale = _sabot(copy, DAGSTER_HOME=str(broken))
    assert stale.returncode != 0 and NOTHING_STALE not in stale.stdout


def test_corpus_score_with_nothing_stale_needs_no_dagster_instance(tmp_path):
    """`sabot corpus score` of the same corpus again: nothing stale, said from the store alone (an
    instance that cannot be created is never asked for), with the same board."""
    from tests.test_rescore import copy_slice

    corpus, var = copy_slice(tmp_path), tmp_path / "var"
    score = [str(PROJECT / ".venv/bin/sabot"), "corpus", "score", str(corpus), "--wave", "public_wave2"]
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "SABOT_DAGSTER_STORAGE")}
    env["SABOT_VAR"] = str(var)
    first = subprocess.run(score, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    assert NOTHING_STALE not in first.stdout
    broken = tmp_path / "no-instance"
    broken.mkdir()
    (broken / "dagster.yaml").write_text("storage: [this is not an instance config]\n")
    again = subprocess.run(score, env={**env, "DAGSTER_HOME": str(broken)}, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert NOTHING_STALE in again.stdout
    assert _corpus_board(again.stdout) == _corpus_board(first.stdout)


def test_a_verdict_lost_from_the_store_is_stale_and_written_again(var):
    var, _ = var
    with connect(var / "sabot.duckdb") as con:
        con.execute("DELETE FROM cell_verdicts WHERE wave = 'demo' AND operator = 'O1'")
    again = _sabot(var)
    assert again.returncode == 0, again.stderr[-2000:]
    assert NOTHING_STALE not in again.stdout
    assert "0 run, 7 reused" in again.stdout  # stale verdicts, not stale runs: nothing re-run
    with connect(var / "sabot.duckdb", read_only=True) as con:
        assert (
            con.execute("SELECT count(*) FROM cell_verdicts WHERE wave = 'demo' AND operator = 'O1'").fetchone()[0] > 0
        )
    assert NOTHING_STALE in _sabot(var).stdout  # settled again


def test_corpus_score_and_rescore_with_nothing_stale_materialize_nothing(registry, tmp_path):
    import dagster as dg
    from dagster_duckdb import DuckDBResource

    from sabot_assets.corpus_jobs import import_corpus, score_corpus
    from sabot_assets.definitions import build_definitions
    from sabot_assets.rescore import rescore_wave
    from tests.test_rescore import copy_slice, materializations

    corpus = copy_slice(tmp_path)
    store_path = tmp_path / "store.duckdb"
    store = DuckDBResource(database=str(store_path))
    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        defs = build_definitions(registry, store, scorer="verdicts-rules-A")
        first = import_corpus(registry, defs, instance, store_path, corpus, "public_wave2", scoring=True)
        assert first.settled_by is None
        score_corpus(first)
        verdicts = materializations(instance, "cell_verdicts")

        again = import_corpus(registry, defs, instance, store_path, corpus, "public_wave2", scoring=True)
        assert again.settled_by is not None
        score_corpus(again)
        assert materializations(instance, "cell_verdicts") == verdicts

        # A scorer change is a new code version: stale, so scored again.
        changed = build_definitions(registry, store, scorer="verdicts-rules-B")
        bumped = import_corpus(registry, changed, instance, store_path, corpus, "public_wave2", scoring=True)
        assert bumped.settled_by is None
        score_corpus(bumped)
        assert materializations(instance, "cell_verdicts") == 2 * verdicts

        rescored = rescore_wave(registry, changed, instance, store_path, "public_wave2")
        assert rescored.runs > 0  # the board the corpus score made is not a rescore's
        verdicts = materializations(instance, "cell_verdicts")
        assert rescore_wave(registry, changed, instance, store_path, "public_wave2").runs == 0
        assert materializations(instance, "cell_verdicts") == verdicts

        with connect(store_path) as con:  # a row lost since: stale again
            con.execute("DELETE FROM scoreboard WHERE wave = 'public_wave2'")
        assert rescore_wave(registry, changed, instance, store_path, "public_wave2").runs > 0
