"""How the wave's schedule hands work to settling: a block's baselines as soon as they land, and a pool
slot to a step that waits for one (sabot_assets/waves/schedule.py)."""

import types

import dagster as dg
from dagster import DagsterEventType
from dagster_duckdb import DuckDBResource

from adapters.runner import RunSpec
from sabot.store.db import connect
from sabot_assets.definitions import build_definitions
from sabot_assets.wave_jobs import Slice, run_wave
from sabot_assets.waves.concurrency import set_pool_limit
from sabot_assets.waves.schedule import BASELINES, WHOLE, BlockCounter, slot_wanted_by_others
from sabot_assets.constants import LLM_POOL, SCHEDULED_TAG


def _spec(task: str, operator: str | None, seed: int) -> RunSpec:
    return RunSpec("w", 2, "langgraph", "default", task, operator, seed)


def test_a_blocks_baselines_are_handed_out_once_they_land_and_before_the_whole_block():
    specs = [_spec(t, op, seed) for t in ("T1", "T2") for op in (None, "O1") for seed in (1, 2)]
    counter = BlockCounter(["T1", "T2"], lambda s: s.task, specs)
    assert counter.ready_now() == []
    assert counter.land(_spec("T1", None, 1)) == []
    assert counter.land(_spec("T1", None, 2)) == [(BASELINES, "T1")]  # its fault runs have not landed
    assert counter.land(_spec("T1", "O1", 1)) == []
    assert counter.land(_spec("T1", "O1", 2)) == [(WHOLE, "T1")]  # its baselines are not handed out twice
    assert counter.land(_spec("T2", "O1", 1)) == []  # a fault run landing first (its baseline was reused elsewhere)
    # What never landed (the breaker stopped launching) settles as missing: baselines first, each stage once.
    assert counter.rest() == [(BASELINES, "T2"), (WHOLE, "T2")]
    assert counter.rest() == []


def test_a_block_whose_baselines_need_no_run_hands_them_out_at_once():
    counter = BlockCounter(["T1"], lambda s: s.task, [_spec("T1", "O1", 1)])  # the baselines are stored: reused
    assert counter.ready_now() == [(BASELINES, "T1")]
    assert counter.land(_spec("T1", "O1", 1)) == [(WHOLE, "T1")]


def test_the_schedule_sees_a_step_of_another_run_waiting_for_a_slot_until_it_has_one(tmp_path):
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        set_pool_limit(instance, 1)
        storage = instance.event_log_storage
        schedule = types.SimpleNamespace(instance=instance, run_id="schedule-run")  # what the step's context carries
        wanted = slot_wanted_by_others(schedule)
        assert storage.claim_concurrency_slot(LLM_POOL, "schedule-run", "run_schedule[slot-1]").is_claimed
        assert not wanted()  # its own slot is no one's wait
        assert not storage.claim_concurrency_slot(LLM_POOL, "block-run", "execute").is_claimed
        assert wanted()  # the block step waits: the schedule's next launch gives its slot back
        storage.free_concurrency_slot_for_step("schedule-run", "run_schedule[slot-1]")
        assert not wanted()  # Dagster assigned the freed slot to the waiting step
        assert storage.claim_concurrency_slot(LLM_POOL, "block-run", "execute").is_claimed


def test_the_block_steps_settling_a_wave_skip_their_execute_step_and_claim_no_slot(registry, tmp_path):
    """The wave's schedule made every run; a block's Dagster runs only settle them. Their execute step
    (in the `llm_agent` pool) is skipped, so settling never takes a slot the schedule could run a run in."""
    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        defs = build_definitions(registry, DuckDBResource(database=str(tmp_path / "sabot.duckdb")))
        run_wave(
            registry, defs, instance, "demo", selection=Slice(("langgraph",), ("default",), ("T1", "T2"), ("O1", "O2"))
        )
        settling = [r for r in instance.get_run_records() if SCHEDULED_TAG in r.dagster_run.tags]
        assert len(settling) >= 4  # two blocks: baselines, fault runs, verdicts each
        run_assets = 0
        for record in settling:
            started = {e.step_key for e in _events(instance, record.dagster_run.run_id, DagsterEventType.STEP_START)}
            skipped = {e.step_key for e in _events(instance, record.dagster_run.run_id, DagsterEventType.STEP_SKIPPED)}
            executes = {key for key in started | skipped if key.endswith("__execute")}
            assert executes <= skipped, record.dagster_run.run_id  # never started: no slot claimed
            if executes:
                run_assets += 1
                assert any(key.endswith("__settle") for key in started)  # settling ran all the same
        assert run_assets >= 4  # each block's baselines and fault runs
        with connect(tmp_path / "sabot.duckdb", read_only=True) as con:
            assert (
                con.execute("SELECT count(*) FROM runs WHERE wave = 'demo'").fetchone()[0] == 2 * 2 + 2
            )  # 4 fault runs, 2 baselines


def _events(instance, run_id: str, kind):
    return [r.event_log_entry.dagster_event for r in instance.get_records_for_run(run_id, of_type=kind).records]
