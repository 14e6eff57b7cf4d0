"""Steps of one Dagster run executed on two worker hosts through Dagster's Celery executor.

The harness (tests/worker_hosts.py) starts the coordinator's Postgres and Redis and two worker
hosts, each in a network namespace of its own. A trivial job of 8 steps in one pool runs with the
executor config of deploy/hosts/celery.yaml; each step records in the shared run root where and
when it ran. Checked: every step ran exactly once, both hosts ran steps, each from its own address,
the pool bound held across the hosts (the peak of steps in flight, from their start and end
times, is exactly the limit), and the collecting step went to the coordinator's store queue.
"""

import json
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
