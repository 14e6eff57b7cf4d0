"""Steps of Dagster runs executed on two worker hosts through Dagster's Celery executor: a trivial
job, then a demo wave backfilled through the daemon with one host killed mid-wave.

The harness (tests/worker_hosts.py) starts the coordinator's Postgres and Redis and two worker
hosts, each in a network namespace of its own. A trivial job of 8 steps in one pool runs with the
executor config of deploy/hosts/celery.yaml; each step records in the shared run root where and
when it ran. Checked: every step ran exactly once, both hosts ran steps, each from its own address,
the pool bound held across the hosts (the peak of steps in flight, from their start and end
times, is exactly the limit), and the collecting step went to the coordinator's store queue.

The wave: `dagster-daemon` launches a backfill's runs with the Celery executor. Each run's
`execute` step (the pipeline runs) goes to a worker host and writes sealed attempts to the shared
run root; `prepare` and `settle` (the store) go to the coordinator's store queue. 16 demo cells in
chunks of 4 (4 Dagster runs), the `llm_agent` pool at 2, the scripted model at a small latency.
Once a worker host has claimed cells, everything in its namespace is killed (SIGKILL). Its run
then waits on a step no worker answers until the broker's visibility timeout, so it is terminated,
as an operator (or the `dagster/max_runtime` tag) would; a second backfill of the cells not
materialized ("failed and missing") resumes. Checked: every cell has exactly one finished attempt,
one stored attempt and one verdict, the pool bound held across hosts (the peak of attempts in
flight, from their start and end times), and both hosts executed runs. This test kills a host: it runs last in the module.
"""

import datetime as dt
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import dagster as dg
import pytest

from sabot import runroot
from sabot.matrix import Cell
from sabot.store.db import connect
from sabot_assets.waves.concurrency import set_pool_limit
from tests import hosts_job
from tests.worker_hosts import LABELS, STORE_WORKER, WAVE_ENV, peak_in_flight, worker_hosts  # noqa: F401  (the fixture)

# dagster-celery registers its task on the executor's app once per submitted step; harmless.
pytestmark = pytest.mark.filterwarnings("ignore:Task name 'execute_plan' is already registered")

PROJECT = Path(__file__).resolve().parents[1]
CELLS, LIMIT = 16, 2
CHUNK = int(WAVE_ENV["SABOT_LIVE_CHUNK"])
DEADLINE_S = 900  # a loaded shared machine; the wave takes about 100 s there
KILLED = LABELS[0]


def test_a_job_runs_each_step_once_on_both_worker_hosts_within_the_pool(worker_hosts):  # noqa: F811
    limit = 2
    with worker_hosts.environment(), worker_hosts.instance() as instance:
        instance.event_log_storage.set_concurrency_slots(hosts_job.POOL, limit)
        result = dg.execute_job(dg.reconstructable(hosts_job.hosts_check), instance)
        assert result.success, f"the run failed: see {worker_hosts.logs}"
        run_id = result.run_id
        starts = [e.dagster_event.step_key for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_START)]
        workers = {
            e.dagster_event.engine_event_data.metadata["Celery worker"].value.split("@")[0]
            for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT)
            if e.dagster_event.engine_event_data and "Celery worker" in e.dagster_event.engine_event_data.metadata
        }

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
        assert (
            ops["prepare"].tags[DAGSTER_CELERY_QUEUE_TAG] == ops["settle"].tags[DAGSTER_CELERY_QUEUE_TAG] == STORE_QUEUE
        )
        assert ops["prepare"].pool is None and ops["settle"].pool is None  # settling never holds a run's slot


def test_a_cell_claim_is_taken_over_only_from_a_gone_process_or_an_ended_run(tmp_path):
    from sabot import runroot
    from sabot.matrix import Probe
    from sabot_assets.waves.live_execute import claim_over

    @dg.op
    def noop():
        return None

    @dg.job
    def ended():
        noop()

    probe = Probe("langgraph", "default", "t1", 1)
    with dg.instance_for_test() as instance:
        ended_run = ended.execute_in_process(instance=instance).run_id

        def claim(holder: str, owner: str) -> bool:
            return runroot.claim(
                tmp_path,
                "demo",
                probe,
                "O1",
                holder,
                holder.partition(":")[0],
                owner=owner,
                stale=lambda record: claim_over(instance, record, owner),
            )

        live = f"w1:{os.getpid()}"  # a live process (this one), on another host than the claimer's
        assert claim(live, "run-a/execute")
        assert claim(live, "run-a/execute")  # the holder again: yes
        # Another Dagster run's step on another host, while run-a may still run the cell: refused.
        assert not claim("w2:1", "run-b/execute")
        # The same run's step redelivered to another host: it is that step's own claim, taken over.
        assert claim("w2:1", "run-a/execute")
        assert runroot.claim_record(tmp_path, "demo", probe, "O1")["holder"] == "w2:1"
        runroot.release_claim(tmp_path, "demo", probe, "O1", "w2:1")
        assert claim(live, f"{ended_run}/execute")
        # Its Dagster run has ended: judged from the instance, on any host, so another run takes it over.
        assert claim("w2:1", "run-b/execute")
        record = runroot.claim_record(tmp_path, "demo", probe, "O1")
        assert (record["holder"], record["owner"]) == ("w2:1", "run-b/execute")


def _launch_backfill(instance, cells: list[str]) -> str:
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget
    from dagster_graphql.client.query import LAUNCH_PARTITION_BACKFILL_MUTATION
    from dagster_graphql.test.utils import execute_dagster_graphql

    with WorkspaceProcessContext(instance, WorkspaceFileTarget(paths=[str(PROJECT / "workspace.yaml")])) as process:
        result = execute_dagster_graphql(
            process.create_request_context(),
            LAUNCH_PARTITION_BACKFILL_MUTATION,
            {"backfillParams": {"assetSelection": [{"path": ["demo", "fault_runs"]}], "partitionNames": cells}},
        )
    launched = result.data["launchPartitionBackfill"]
    assert launched["__typename"] == "LaunchBackfillSuccess", launched
    return launched["backfillId"]


def _wait(condition, what: str, daemon, logs: Path, poll: float = 1.0):
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert daemon.poll() is None, f"the daemon exited: see {logs / 'daemon.log'}"
        assert time.monotonic() < deadline, f"{what} did not happen in {DEADLINE_S} s: see {logs}"
        time.sleep(poll)


def _backfill_done(instance, backfill_id: str) -> bool:
    status = instance.get_backfill(backfill_id).status.value
    return status.startswith("COMPLETED") or status in ("FAILED", "CANCELED")


def _claims(run_root: Path, cells: list[Cell]) -> list[dict]:
    return [r for r in (runroot.claim_record(run_root, "demo", c.probe, c.operator) for c in cells) if r]


def _executed_on(instance, run_ids) -> set[str]:
    """The Celery workers (host labels) that started a step of these runs, as Dagster logged them."""
    out = set()
    for run_id in run_ids:
        for event in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
            data = event.dagster_event.engine_event_data
            if data and "Celery worker" in data.metadata:
                out.add(data.metadata["Celery worker"].value.split("@")[0])
    return out


def _interval(run_root: Path, directory: Path) -> tuple[float, float]:
    attempt = runroot.read_attempt(run_root, directory)
    return dt.datetime.fromisoformat(attempt.started_at).timestamp(), dt.datetime.fromisoformat(
        attempt.finished_at
    ).timestamp()


def test_a_demo_wave_on_two_worker_hosts_runs_each_cell_once_and_resumes_after_a_host_dies(worker_hosts, registry):  # noqa: F811
    wave = registry.wave("demo")
    cells = [
        Cell(op, p) for p in wave.probes() for op in ("O1", "O2", "O3", "O4") if not wave.is_carved_out(Cell(op, p))
    ][:CELLS]
    assert len(cells) == CELLS
    keys = [c.key for c in cells]
    run_root = Path(worker_hosts.env["SABOT_DB"]).parent / "runroot"
    logs = worker_hosts.logs
    with worker_hosts.environment(), worker_hosts.instance() as instance:
        set_pool_limit(instance, LIMIT)
        daemon = subprocess.Popen(
            ["bash", str(PROJECT / "deploy/hosts/coordinator.sh"), "daemon"],
            cwd=PROJECT,
            env={**os.environ, "SABOT_COORDINATOR_ADDRESS": worker_hosts.coordinator},
            stdout=open(logs / "daemon.log", "w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            started = time.monotonic()
            first = _launch_backfill(instance, keys)
            # Mid-wave: once the doomed host holds claims (its runs are in flight), it dies at once.
            _wait(
                lambda: any(r["holder"].startswith(f"{KILLED}:") for r in _claims(run_root, cells)),
                f"{KILLED} claiming cells",
                daemon,
                logs,
                0.2,
            )
            doomed = {
                r["owner"].partition("/")[0] for r in _claims(run_root, cells) if r["holder"].startswith(f"{KILLED}:")
            }
            worker_hosts.kill(KILLED)
            # The rest of the wave goes on on the other host; the dead host's run waits on its step.
            first_runs = lambda: instance.get_run_records(dg.RunsFilter(tags={"dagster/backfill": first}))  # noqa: E731
            _wait(
                lambda: (
                    len(first_runs()) == CELLS // CHUNK
                    and all(r.dagster_run.is_finished for r in first_runs() if r.dagster_run.run_id not in doomed)
                ),
                "the surviving runs",
                daemon,
                logs,
            )
            for run_id in doomed:  # as the UI's Terminate does; the dead host's claims are then over
                instance.run_launcher.terminate(run_id)
            # Not waiting for the backfill's own bookkeeping (its daemon ticks every 30 s): its runs have ended.
            _wait(
                lambda: all(r.dagster_run.is_finished for r in first_runs()), "the dead host's run ending", daemon, logs
            )
            killed_cells = [c for c in cells if not _finished(run_root, c)]
            assert killed_cells, "the killed host had finished every cell: nothing was in flight"

            materialized = instance.get_materialized_partitions(dg.AssetKey(["demo", "fault_runs"]))
            second = _launch_backfill(
                instance, [k for k in keys if k not in materialized]
            )  # the resume: the UI's "failed and missing"
            _wait(lambda: _backfill_done(instance, second), "the resume", daemon, logs)
            wall = time.monotonic() - started
            assert instance.get_backfill(second).status.value == "COMPLETED_SUCCESS", (
                f"resume {instance.get_backfill(second).status}: see {logs}"
            )
            runs = [
                r.dagster_run.run_id
                for b in (first, second)
                for r in instance.get_run_records(dg.RunsFilter(tags={"dagster/backfill": b}))
            ]
            executed_on = _executed_on(instance, runs)
        finally:
            os.killpg(daemon.pid, signal.SIGKILL)  # the daemon may ignore SIGTERM when started in the background
            daemon.wait()

    finished = {c.key: runroot.finished_attempts(run_root, "demo", c.probe, c.operator) for c in cells}
    assert all(len(dirs) == 1 for dirs in finished.values()), {
        k: len(d) for k, d in finished.items()
    }  # run exactly once
    intervals = [_interval(run_root, dirs[0]) for dirs in finished.values()]
    assert peak_in_flight(intervals) <= LIMIT  # the pool held across both hosts
    assert {KILLED, LABELS[1], "store"} <= executed_on, (
        executed_on
    )  # both worker hosts executed runs; the store steps ran on the coordinator
    with connect(Path(worker_hosts.env["SABOT_DB"]), read_only=True) as con:
        stored = dict(
            con.execute(
                "SELECT operator || '|' || probe, count(*) FROM attempts WHERE wave = 'demo' GROUP BY 1"
            ).fetchall()
        )
        scored = con.execute(
            "SELECT operator || '|' || probe, count(*) FROM runs WHERE wave = 'demo' AND status = 'present' GROUP BY 1"
        ).fetchall()
    assert stored == {k: 1 for k in keys}  # one attempt stored per cell, none twice
    assert dict(scored) == {k: 1 for k in keys}  # one verdict per cell
    print(
        f"wave on hosts: {CELLS} cells, {len(killed_cells)} resumed after the kill, wall {wall:.0f} s, load {open('/proc/loadavg').read().split()[:3]}"
    )


def _finished(run_root: Path, cell: Cell) -> bool:
    return bool(runroot.finished_attempts(run_root, "demo", cell.probe, cell.operator))
