"""Steps of one Dagster run executed on two worker hosts through Dagster's Celery executor.

The harness (tests/worker_hosts.py) starts the coordinator's Postgres and Redis and two worker
hosts, each in a network namespace of its own. A trivial job of 8 steps in one pool runs with the
executor config of deploy/hosts/celery.yaml; each step records in the shared run root where and
when it ran. Checked: every step ran exactly once, both hosts ran steps, each from its own address,
the pool bound held across the hosts (the peak of steps in flight, from their start and end
times, is exactly the limit), and the collecting step went to the coordinator's store queue.
"""

import json
import os
from pathlib import Path

import dagster as dg
import pytest

from tests import hosts_job
from tests.worker_hosts import LABELS, STORE_WORKER, peak_in_flight, worker_hosts  # noqa: F401  (the fixture)

# dagster-celery registers its task on the executor's app once per submitted step; harmless.
pytestmark = pytest.mark.filterwarnings("ignore:Task name 'execute_plan' is already registered")


@pytest.mark.parametrize("limit", [1, 2])
def test_a_job_runs_each_step_once_on_both_worker_hosts_within_the_pool(worker_hosts, limit):  # noqa: F811
    with worker_hosts.environment(), worker_hosts.instance() as instance:
        instance.event_log_storage.set_concurrency_slots(hosts_job.POOL, limit)
        result = dg.execute_job(dg.reconstructable(hosts_job.hosts_check), instance)
        assert result.success, f"the run failed: see {worker_hosts.logs}"
        run_id = result.run_id
        starts = [e.dagster_event.step_key for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_START)]
        workers = {e.dagster_event.engine_event_data.metadata["Celery worker"].value.split("@")[0]
                   for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT)
                   if e.dagster_event.engine_event_data and "Celery worker" in e.dagster_event.engine_event_data.metadata}

    steps = Path(worker_hosts.env["SABOT_RUN_ROOT"]) / "steps"
    executed = [r for r in (json.loads(p.read_text()) for p in steps.glob("*.json")) if r["run_id"] == run_id]
    [collected] = [r for r in executed if r["step"] == "collect"]
    records = [r for r in executed if r["step"] != "collect"]
    expected = sorted(f"step_{i}" for i in range(hosts_job.STEPS))
    assert sorted(r["step"] for r in records) == expected  # each step executed exactly once
    assert sorted(starts) == sorted([*expected, "collect"])  # and Dagster started each exactly once
    assert {r["label"] for r in records} == set(LABELS)  # both worker hosts ran steps
    assert workers == {*LABELS, "store"}  # as Celery reports too
    for record in records:  # each from its own namespace's address, not loopback
        assert record["address"] == worker_hosts.addresses[record["label"]]
    assert peak_in_flight([(r["started"], r["ended"]) for r in records]) == limit
    assert collected["label"] == STORE_WORKER and collected["address"] == worker_hosts.coordinator
    assert collected["started"] >= max(r["ended"] for r in records)


def test_the_queue_tag_is_dagster_celery_s_and_run_steps_go_where_the_store_is():
    from dagster_celery.tags import DAGSTER_CELERY_QUEUE_TAG

    from sabot.registry import Registry
    from sabot_assets.hosts import STORE_QUEUE, WORKER_QUEUE
    from sabot_assets.hosts import DAGSTER_CELERY_QUEUE_TAG as spelled
    from sabot_assets.waves.live_runs import build_live_run_assets

    assert spelled == DAGSTER_CELERY_QUEUE_TAG
    registry = Registry()
    for asset in build_live_run_assets(registry.wave("demo"), registry, dg.AssetKey(["demo", "probes"])):
        ops = {op.name.rpartition("__")[2]: op for op in asset.node_def.iterate_op_defs()}
        assert sorted(ops) == ["execute", "prepare", "settle"]
        assert ops["execute"].tags[DAGSTER_CELERY_QUEUE_TAG] == WORKER_QUEUE and ops["execute"].pool == "llm_agent"
        assert ops["prepare"].tags[DAGSTER_CELERY_QUEUE_TAG] == ops["settle"].tags[DAGSTER_CELERY_QUEUE_TAG] == STORE_QUEUE
        assert ops["prepare"].pool is None and ops["settle"].pool is None  # settling never holds a run's slot


def test_a_cell_claim_is_taken_over_only_from_a_gone_process_or_an_ended_run(tmp_path):
    from sabot import runroot
    from sabot.matrix import Probe
    from sabot_assets.waves.live_runs import claim_over

    @dg.op
    def noop():
        return None

    @dg.job
    def ended():
        noop()

    probe = Probe("langgraph", "default", "t1", 1)
    with dg.instance_for_test() as instance:
        ended_run = ended.execute_in_process(instance=instance).run_id
        over = lambda record: claim_over(instance, record)  # noqa: E731
        live = f"w1:{os.getpid()}"  # a live process (this one), on another host than the claimer's
        assert runroot.claim(tmp_path, "demo", probe, "O1", live, "w1", owner="run-a/execute", stale=over)
        # A redelivered step on another host: the same owner, but its first delivery may still run: refused.
        assert not runroot.claim(tmp_path, "demo", probe, "O1", "w2:1", "w2", owner="run-a/execute", stale=over)
        assert runroot.claim(tmp_path, "demo", probe, "O1", live, "w1", owner="run-a/execute", stale=over)  # the holder again: yes
        runroot.release_claim(tmp_path, "demo", probe, "O1", live)
        assert runroot.claim(tmp_path, "demo", probe, "O1", live, "w1", owner=f"{ended_run}/execute", stale=over)
        # Its Dagster run has ended: judged from the instance, on any host, so another host takes it over.
        assert runroot.claim(tmp_path, "demo", probe, "O1", "w2:1", "w2", owner="run-b/execute", stale=over)
        assert runroot.claim_record(tmp_path, "demo", probe, "O1") == {**runroot.claim_record(tmp_path, "demo", probe, "O1"),
                                                                      "holder": "w2:1", "owner": "run-b/execute"}
