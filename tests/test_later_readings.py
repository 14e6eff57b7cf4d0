"""A ruleset added after a wave's registration is one partition of `later_readings`: adding it
re-scores that partition and the board, keeps every other reading's board as a fresh build would
make it, and leaves every cell partition as it was."""

import contextlib
import json
import shutil

import dagster as dg
import pytest
from dagster_duckdb import DuckDBResource

from judges.hard.rulesets import load_ruleset
from judges.hard.strict import floor_rules
from sabot.store.db import connect
from sabot_assets.corpus_jobs import import_corpus, score_corpus
from sabot_assets.definitions import build_definitions
from sabot_assets.materialize import WaveRunner
from sabot_assets.rescore import rescore_wave
from sabot_assets.waves.board_inputs import board_inputs
from sabot_assets.waves.scoreboard_assets import conformance_label
from tests.registry_copy import NEW_RULESET, add_one_anchor_ruleset, copy_registry
from tests.test_rescore import WAVE, slice_corpus  # noqa: F401  (fixture)

LATER = "v0.2.1-2026-12-02"  # registered later, names public_wave2 in `rescores`


@pytest.fixture
def scored(tmp_path):
    """scored(registry, corpus, name): the slice imported and scored in a store and instance of its own."""
    with contextlib.ExitStack() as held:

        def score(registry, corpus, name):
            store_path = tmp_path / name / "store.duckdb"
            (tmp_path / name / "dagster").mkdir(parents=True)
            instance = held.enter_context(dg.instance_for_test(temp_dir=str(tmp_path / name / "dagster")))
            defs = build_definitions(registry, DuckDBResource(database=str(store_path)))
            score_corpus(import_corpus(registry, defs, instance, store_path, corpus, WAVE))
            return store_path, instance

        yield score


def boards(store_path) -> dict:
    """reading -> (its board as stored, the Dagster runs that wrote its scoreboard rows)."""
    with connect(store_path, read_only=True) as con:
        stored = dict(
            con.execute("SELECT ruleset, body FROM reports WHERE wave = ? AND format = 'board.json'", [WAVE]).fetchall()
        )
        writers = dict(
            con.execute(
                "SELECT ruleset, string_agg(DISTINCT dagster_run_id, ',') FROM scoreboard WHERE wave = ? GROUP BY 1",
                [WAVE],
            ).fetchall()
        )
    return {v: (json.loads(body), writers[v]) for v, body in stored.items()}


def scoreboard_metadata(instance) -> dict:
    [record] = instance.fetch_materializations(dg.AssetKey([WAVE, "scoreboard"]), limit=1).records
    return dict(record.asset_materialization.metadata)


def test_a_new_reading_builds_its_own_board_and_keeps_the_others_as_a_fresh_build_makes_them(
    registry,
    slice_corpus,  # noqa: F811
    scored,
    tmp_path,
):
    store_path, instance = scored(registry, slice_corpus, "rescored")
    before, head_before = boards(store_path), scoreboard_metadata(instance)
    copied = add_one_anchor_ruleset(copy_registry(tmp_path))
    store = DuckDBResource(database=str(store_path))
    result = rescore_wave(copied, build_definitions(copied, store), instance, store_path, WAVE, NEW_RULESET)
    after, head_after = boards(store_path), scoreboard_metadata(instance)

    assert set(after) == set(before) | {NEW_RULESET}
    for reading in before:  # not built again: the same rows, written by the same run
        assert after[reading] == before[reading], reading
    assert after[NEW_RULESET][1] != before["v0.2.0"][1]  # the new reading's board is this run's
    # The headline board was kept, with the metadata its build gave it (number links, lineage).
    assert head_after.pop("boards built by this run").value == NEW_RULESET
    assert head_before.pop("boards built by this run").value == ", ".join(registry.wave(WAVE).readings)
    assert head_after == head_before
    assert result.runs == 1

    # The headline's number pages are files its build wrote: gone, the next board run builds it again.
    shutil.rmtree(store_path.parent / "reports" / WAVE / "cells")
    WaveRunner(build_definitions(copied, store), copied.wave(WAVE), instance).board()
    assert scoreboard_metadata(instance)["boards built by this run"].value == "v0.2.0"
    assert (store_path.parent / "reports" / WAVE / "cells").is_dir()

    # What was kept is what a build from nothing under the new registry makes, board for board.
    fresh_path, _ = scored(copied, slice_corpus, "fresh")
    fresh = boards(fresh_path)
    assert set(fresh) == set(after)
    for reading in fresh:
        assert after[reading][0] == fresh[reading][0], f"{reading}: the kept board differs from a fresh build"


def test_a_boards_inputs_move_with_its_own_verdicts_runs_judge_and_rules_and_not_with_a_new_reading(
    registry,
    slice_corpus,  # noqa: F811
    scored,
    tmp_path,
    monkeypatch,
):
    store_path, _ = scored(registry, slice_corpus, "scored")
    wave = registry.wave(WAVE)

    def digests(reg, edit_sql: str | None = None) -> dict:
        w = reg.wave(WAVE)
        rulesets = [load_ruleset(reg, v) for v in w.readings]
        floors = {r.version: floor_rules(r, rulesets) for r in rulesets}
        with connect(store_path) as con:
            if edit_sql:
                con.execute(edit_sql, [WAVE])
            return board_inputs(con, reg, w, rulesets, floors, conformance_label(con, w))

    first = digests(registry)
    assert set(first) == set(wave.readings) and len(set(first.values())) == len(first)
    assert digests(registry) == first  # nothing moved: nothing to build

    # A new later reading moves no other reading's inputs.
    copied = add_one_anchor_ruleset(copy_registry(tmp_path))
    assert {v: d for v, d in digests(copied).items() if v != NEW_RULESET} == first

    # The same verdicts written again by another run: nothing moved.
    assert digests(registry, "UPDATE cell_verdicts SET dagster_run_id = 'another' WHERE wave = ?") == first
    # One cell's verdict under one reading changed: that reading's board only.
    moved = digests(
        registry,
        "UPDATE cell_verdicts SET detected_hard = NOT detected_hard WHERE wave = ? "
        f"AND ruleset = '{LATER}' AND (operator, probe) = (SELECT (min(operator), min(probe)) FROM cell_verdicts)",
    )
    assert {v for v in first if moved[v] != first[v]} == {LATER}
    # The judge's verdicts and the runs feed every board.
    judged = digests(registry, "UPDATE judge_verdicts SET dagster_run_id = 'another' WHERE wave = ?")
    assert all(judged[v] not in (first[v], moved[v]) for v in first)
    runs = digests(
        registry,
        "UPDATE runs SET source_sha256 = 'edited' WHERE wave = ? AND probe = (SELECT min(probe) FROM runs)",
    )
    assert all(runs[v] != judged[v] for v in first)
    # The headline's metadata links the UI: another address, another build.
    monkeypatch.setenv("SABOT_UI_URL", "http://elsewhere:3000")
    assert all(moved_ui != runs[v] for v, moved_ui in digests(registry).items())


def test_the_rescore_sensor_makes_a_new_reading_and_the_board_and_leaves_the_cells(
    registry,
    slice_corpus,  # noqa: F811
    scored,
    tmp_path,
):
    """The UI's and the daemon's path: a partial wave (30 of 900 cells) and a new ruleset file."""
    store_path, instance = scored(registry, slice_corpus, "sensor")
    store = DuckDBResource(database=str(store_path))
    first = dg.evaluate_automation_conditions(defs=build_definitions(registry, store), instance=instance)
    copied = add_one_anchor_ruleset(copy_registry(tmp_path))
    tick = dg.evaluate_automation_conditions(
        defs=build_definitions(copied, store), instance=instance, cursor=first.cursor
    )
    names = ("baseline_runs", "fault_runs", "cell_verdicts", "judge_verdicts", "later_readings", "scoreboard", "report")
    requested = {n: tick.get_num_requested(dg.AssetKey([WAVE, n])) for n in names}
    # Both partitions of later_readings (the asset's code version spans its readings), never a cell.
    assert requested == {n: {"later_readings": 2, "scoreboard": 1, "report": 1}.get(n, 0) for n in names}


def test_a_wave_run_after_a_new_ruleset_settles_no_block_again(tmp_path):
    """`sabot wave run` over a settled slice after a new rule: the new reading and the board, no cell."""
    from sabot.registry import Registry
    from sabot_assets.wave_jobs import Slice, run_wave

    one_block = Slice(frameworks=("langgraph",), configs=("default",), tasks=("T1",))
    store_path = tmp_path / "store.duckdb"
    store = DuckDBResource(database=str(store_path))
    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        registry = Registry()
        run_wave(registry, build_definitions(registry, store), instance, "demo", selection=one_block)
        key = lambda name: dg.AssetKey(["demo", name])  # noqa: E731
        counted = lambda name: len(instance.fetch_materializations(key(name), limit=10_000).records)  # noqa: E731
        before = {n: counted(n) for n in ("cell_verdicts", "judge_verdicts", "fault_runs", "scoreboard")}
        copied = add_one_anchor_ruleset(copy_registry(tmp_path), rescores=("demo",))
        again = run_wave(copied, build_definitions(copied, store), instance, "demo", selection=one_block)
        after = {n: counted(n) for n in before}
        readings = instance.fetch_materializations(key("later_readings"), limit=1).records
    assert (again.tally.ran, again.tally.reused) == (0, 7)  # one baseline and six fault runs, all stored
    assert {n: after[n] - before[n] for n in before} == {
        "cell_verdicts": 0,
        "judge_verdicts": 0,
        "fault_runs": 0,
        "scoreboard": 1,
    }
    assert readings and readings[0].partition_key == NEW_RULESET
    with connect(store_path, read_only=True) as con:
        scored = con.execute(
            "SELECT count(*) FROM cell_verdicts WHERE wave = 'demo' AND ruleset = ?", [NEW_RULESET]
        ).fetchone()[0]
    assert scored == 6  # every settled cell, under the new reading
