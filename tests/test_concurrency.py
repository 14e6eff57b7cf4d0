"""Concurrent live runs: each in its own process, nothing leaks between them, the pool bounds them."""

import functools
import multiprocessing
import os
import time
import types

import dagster as dg
import pytest

from adapters.pool import crashed_run, run_many, run_spec
from adapters.runner import RunSpec, run
from sabot_assets.constants import LLM_POOL
from sabot_assets.waves.concurrency import PoolSlots, pool_limit, set_pool_limit


def timed_run(spec, registry, work_root, together=None):
    """A run, with when it ran and in which process (CLOCK_MONOTONIC is system-wide on Linux). With
    `together` (a barrier of the runs), it starts only once every run's process is there: a pool that
    ran them one after another would never get past it."""
    if together is not None:
        together.wait()
    started = time.monotonic()
    outcome = run_spec(spec, registry, work_root)
    return outcome, started, time.monotonic(), os.getpid()


# CrewAI's event bus is a process-wide singleton: two CrewAI cells of different operators are the
# case where a leak would show (an event of one run recorded in the other's record).
CELLS = [RunSpec("t", 2, "crewai", "guardrail", "T1", "O1", 11), RunSpec("t", 2, "crewai", "guardrail", "T2", "O5", 12)]


def test_two_cells_run_concurrently_and_each_record_holds_only_its_own_events(registry, tmp_path):
    alone = {spec: run(spec, registry, tmp_path / "alone") for spec in CELLS}  # one after another, in this process
    with multiprocessing.Manager() as manager:  # a pool process starting late must not read as no overlap
        barrier = manager.Barrier(len(CELLS), timeout=120)
        fn = functools.partial(timed_run, registry=registry, work_root=str(tmp_path / "together"), together=barrier)
        together = {spec: result for spec, result, _ in run_many(fn, CELLS, concurrency=2)}

    (_, start_a, end_a, pid_a), (_, start_b, end_b, pid_b) = together[CELLS[0]], together[CELLS[1]]
    assert pid_a != pid_b and os.getpid() not in (pid_a, pid_b)
    assert start_a < end_b and start_b < end_a, "the two runs did not overlap in time"
    for spec in CELLS:
        record = together[spec][0].record
        assert record.error is None, record.error
        assert record.run_id == spec.run_id
        injected = [e for e in record.events if e.payload.get("injected")]
        assert [e.payload["operator"] for e in injected] == [spec.operator]
        assert (
            record.events == alone[spec].record.events
        )  # the same events as the run made alone: none added, none lost


def test_each_process_sees_the_callers_environment_of_now(registry, tmp_path, monkeypatch):
    """The fork server started earlier; a run must still see the endpoint switch as set now."""
    monkeypatch.setenv("SABOT_TEST_MARKER", "set-after-the-fork-server-started")
    [(_, seen, _)] = list(run_many(_getenv, ["SABOT_TEST_MARKER"], concurrency=1))
    assert seen == "set-after-the-fork-server-started"


def test_may_launch_stops_launching_and_keeps_what_finished(registry, tmp_path):
    specs = [RunSpec("t", 2, "langgraph", "default", "T1", op, 11) for op in ("O1", "O2", "O3")]
    launched = []

    def gate(spec):
        if len(launched) >= 2:
            return False
        launched.append(spec)
        return True

    fn = functools.partial(run_spec, registry=registry, work_root=str(tmp_path))
    finished = [spec for spec, outcome, _ in run_many(fn, specs, concurrency=1, may_launch=gate)]
    assert finished == specs[:2]  # the third was never started: not yielded, not an error


def _getenv(name):
    return os.environ.get(name)


def _die(_):
    os._exit(9)


def test_a_process_that_dies_is_a_run_error_and_the_rest_still_run(registry, tmp_path):
    spec = RunSpec("t", 2, "langgraph", "default", "T1", "O1", 11)
    [(item, outcome, _)] = list(run_many(_die, [spec], concurrency=1, on_crash=crashed_run))
    assert item == spec and "process died" in outcome.record.error


def _context(instance, run_id, step):
    return types.SimpleNamespace(instance=instance, run_id=run_id, op_handle=step)


def test_pool_slots_bound_runs_in_flight_across_dagster_runs(tmp_path):
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        set_pool_limit(instance, 3)
        assert pool_limit(instance) == 3
        storage = instance.event_log_storage
        # Another Dagster run's step holds one slot; ours holds its own step slot, as Dagster claims it.
        assert storage.claim_concurrency_slot(LLM_POOL, "other-run", "other_step").is_claimed
        assert storage.claim_concurrency_slot(LLM_POOL, "our-run", "fault_runs").is_claimed
        slots = PoolSlots(_context(instance, "our-run", "fault_runs"))
        assert slots.acquire("a")  # rides on the step's own slot
        assert slots.acquire("b")  # claims the third and last slot
        assert not slots.acquire("c")  # the pool is full: not launched yet
        assert storage.get_concurrency_info(LLM_POOL).pending_step_count == 0  # no claim left queued
        slots.release("b")
        assert slots.acquire("c")
        slots.release("a")
        assert slots.acquire("d")  # the step's own slot again
        slots.close()
        assert storage.get_concurrency_info(LLM_POOL).active_slot_count == 2  # the two step slots only


def _nap(seconds):
    started = time.monotonic()
    time.sleep(seconds)
    return started, time.monotonic(), os.getpid()


def test_the_spare_process_never_lets_more_runs_than_the_concurrency_run_at_once():
    """The pool keeps one process more than the runs in flight (forked ahead, so the next run starts at
    once); it must never run more than `concurrency` items at the same time."""
    spans = [result for _, result, _ in run_many(_nap, [0.4] * 6, concurrency=2)]
    assert len({pid for _, _, pid in spans}) == 6  # a process of its own for each
    in_flight = max(sum(1 for s, e, _ in spans if s <= t < e) for t, _, _ in spans)
    assert in_flight == 2


def test_concurrency_must_be_positive(registry, tmp_path):
    with pytest.raises(ValueError, match="at least 1"):
        list(run_many(_getenv, ["X"], concurrency=0))


def test_slots_of_a_killed_in_process_run_are_freed_and_a_live_ones_kept(tmp_path):
    """A wave killed with -9 leaves its run STARTED holding pool slots; the next wave frees them."""
    import socket
    import subprocess

    from sabot_assets.constants import LAUNCHER_TAG
    from sabot_assets.waves.concurrency import free_slots_of_dead_runs

    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid is free now: the launching process of a killed wave
    host = socket.gethostname()
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        set_pool_limit(instance, 2)
        storage = instance.event_log_storage
        for run_id, pid in (("killed-run", gone.pid), ("live-run", os.getpid())):
            instance.add_run(
                dg.DagsterRun(
                    job_name="__ASSET_JOB",
                    run_id=run_id,
                    status=dg.DagsterRunStatus.STARTED,
                    tags={LAUNCHER_TAG: f"{host}:{pid}"},
                )
            )
            assert storage.claim_concurrency_slot(LLM_POOL, run_id, "fault_runs").is_claimed
        assert not storage.claim_concurrency_slot(LLM_POOL, "new-run", "fault_runs").is_claimed  # the pool is full
        storage.free_concurrency_slot_for_step("new-run", "fault_runs")

        assert free_slots_of_dead_runs(instance) == ["killed-run"]
        assert instance.get_run_by_id("killed-run").status == dg.DagsterRunStatus.FAILURE
        assert instance.get_run_by_id("live-run").status == dg.DagsterRunStatus.STARTED
        assert storage.claim_concurrency_slot(LLM_POOL, "new-run", "fault_runs").is_claimed  # the freed slot
        assert storage.get_concurrency_run_ids() == {"live-run", "new-run"}


MAIN_SCRIPT = """
import os, sys
with open(sys.argv[1] if len(sys.argv) > 1 else os.environ["SABOT_TEST_MAIN_LOG"], "a") as log:
    log.write(f"{__name__} {os.getpid()}\\n")  # one line each time this script's top level runs


def where(_):
    return os.getpid()


if __name__ == "__main__":
    os.environ["SABOT_TEST_MAIN_LOG"] = sys.argv[1]
    from adapters.pool import run_many
    print(sorted(set(pid for _, pid, _ in run_many(where, range(3), concurrency=3))))
"""


def test_the_callers_main_script_runs_once_in_the_fork_server_not_once_a_run(tmp_path):
    """CPython 3.11's fork server ignores "__main__" in its preload: without adapters.fork_ready each
    child re-ran the caller's main script (under Dagster: seconds of imports a run)."""
    import subprocess
    import sys

    script, log = tmp_path / "main_script.py", tmp_path / "main.log"
    script.write_text(MAIN_SCRIPT)
    out = subprocess.run(
        [sys.executable, str(script), str(log)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=os.getcwd(),
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    children = eval(out.stdout.strip().splitlines()[-1])
    assert len(children) == 3  # three runs, three processes
    lines = log.read_text().splitlines()
    assert [line.split()[0] for line in lines] == ["__main__", "__mp_main__"], (
        lines
    )  # the caller, then the fork server once
    assert not {int(line.split()[1]) for line in lines} & set(children)  # no run re-ran it
