"""Importing another corpus under a wave's name replaces the wave cleanly or is refused: never a
store whose runs point at a landing that is gone."""

import shutil

import dagster as dg
import pytest
from dagster_duckdb import DuckDBResource

from sabot.corpus import CorpusError
from sabot.store.db import connect
from sabot.store.runs import read_baselines, record_sql
from sabot.store.wave_replace import OrphanedRuns
from sabot_assets.corpus_jobs import import_corpus, score_corpus
from sabot_assets.definitions import build_definitions
from tests.conftest import WAVE2_DIR, require_corpus

WAVE = "public_wave2"
BLOCKS = "harness/runs/wave2/langgraph/default"


@pytest.fixture
def two_corpora(registry, tmp_path):
    """Corpus A (task T1) and corpus B (task T2) of one wave, two seeds of one operator each (the
    rest listed missing), and an empty store."""
    require_corpus()
    corpora = {}
    for name, task in (("A", "T1"), ("B", "T2")):
        for run in ("baseline/seed11", "baseline/seed12", "O1/seed11", "O1/seed12"):
            shutil.copytree(WAVE2_DIR / "langgraph" / "default" / task / run, tmp_path / name / BLOCKS / task / run)
        corpora[name] = tmp_path / name
    store = tmp_path / "store.duckdb"
    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        defs = build_definitions(registry, DuckDBResource(database=str(store)))
        yield lambda name, **kw: import_corpus(registry, defs, instance, store, corpora[name], WAVE, **kw), store


def orphaned(store) -> int:
    with connect(store, read_only=True) as con:
        return con.execute(f"SELECT count(*) FROM runs WHERE status = 'present' AND {record_sql()} IS NULL").fetchone()[
            0
        ]


@pytest.mark.parametrize("first, second", [("A", "B"), ("B", "A")])
def test_another_corpus_under_one_wave_is_refused_then_replaces_cleanly(two_corpora, first, second):
    imp, store = two_corpora
    score_corpus(imp(first))
    with pytest.raises(CorpusError) as refused:
        imp(second)
    assert str(refused.value).startswith(f"wave {WAVE} holds ") and "--replace" in str(refused.value)
    assert orphaned(store) == 0  # the refusal changed nothing

    replaced = imp(second, replace=True)
    assert replaced.replaced and replaced.replaced.runs > 0
    score_corpus(replaced)
    assert orphaned(store) == 0
    with connect(store, read_only=True) as con:
        assert read_baselines(con, WAVE)  # the scoreboard's read: every baseline has its record
        tasks = {r[0] for r in con.execute("SELECT DISTINCT task FROM runs WHERE wave = ?", [WAVE]).fetchall()}
        verdict_tasks = {
            r[0]
            for r in con.execute(
                "SELECT DISTINCT r.task FROM cell_verdicts v JOIN runs r USING (wave, operator, probe) WHERE v.wave = ?",
                [WAVE],
            ).fetchall()
        }
        stray_verdicts = con.execute(
            "SELECT count(*) FROM cell_verdicts v WHERE v.wave = ? AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.wave = v.wave "
            "AND r.operator = v.operator AND r.probe = v.probe)",
            [WAVE],
        ).fetchone()[0]
    expected = {"A": "T1", "B": "T2"}[second]
    assert tasks == {expected} and verdict_tasks == {expected} and stray_verdicts == 0


def test_a_store_broken_the_old_way_is_named_on_open_and_repaired_by_replace(two_corpora):
    imp, store = two_corpora
    imp("A")
    with connect(store) as con:  # what an earlier version's re-import left: runs whose landing was replaced
        con.execute("DELETE FROM corpus_files WHERE wave = ?", [WAVE])
    with pytest.raises(OrphanedRuns) as named:
        imp("A")
    assert str(named.value) == (
        f"store {store}: wave {WAVE} holds 4 imported run(s) whose files a later import replaced (written by an "
        f"earlier version of sabot); repair: sabot corpus import {store.parent / 'A'} --wave {WAVE} --replace"
    )
    imp("A", replace=True)
    assert orphaned(store) == 0
