"""Benchmark: the same 100-run slice on one worker host and on two, at the same total concurrency.

    .venv/bin/python bench/bench_hosts.py                  # latency 1.0 s a call, concurrency 8 (root)
    .venv/bin/python bench/bench_hosts.py --concurrency 4 --latency 0.5

The slice is bench/bench_concurrency.py's (wave 1, LangGraph default, O1-O4 over every task and
seed). Each measurement lays out the deployment of deploy/hosts/ on this machine afresh
(tests/worker_hosts.py: the coordinator's Postgres, broker and store worker, and the worker hosts
in network namespaces), sets the `llm_agent` pool limit, backfills the slice through the daemon
with the mutation the UI's "Launch backfill" sends, and times it from launch to the backfill's end:

- one worker host at concurrency C;
- two worker hosts at the same total C (the pool is shared through the instance's Postgres);
- two worker hosts at 2C.

Each backfill run is a chunk of 50 cells (the default), so the slice is 2 Dagster runs whose
`execute` steps each run on one worker host (a host runs one step at a time: `--pool solo`) and
hold up to C of the pool's slots between them; `prepare` and `settle` run on the coordinator.

Printed, never asserted: each wall time (to the backfill marked done, and to its last run's end),
the attempts and their peak in flight read from their start
and end times in the run root, the load average, and the ratios two/one at C (the target is at most
1.1) and two at 2C / one at C (the target is at most 0.6). Exits 2 without a figure where worker
hosts cannot be laid out here (root, iproute2, redis-server, PostgreSQL).
"""

import argparse
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(PROJECT), str(PROJECT / "bench")]

from bench_concurrency import CONFIG, FRAMEWORK, OPERATORS, WAVE  # noqa: E402  the same slice

from sabot.matrix import Cell  # noqa: E402

from tests.worker_hosts import LABELS, hosts_layout, peak_in_flight, unavailable  # noqa: E402

LATENCY_ENV = "SABOT_SCRIPTED_LATENCY"
DEADLINE_S = 3600


def launch_backfill(instance, partitions: list[str]) -> str:
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget
    from dagster_graphql.client.query import LAUNCH_PARTITION_BACKFILL_MUTATION
    from dagster_graphql.test.utils import execute_dagster_graphql

    target = WorkspaceFileTarget(paths=[str(PROJECT / "workspace.yaml")])
    with WorkspaceProcessContext(instance, target) as process_context:
        result = execute_dagster_graphql(
            process_context.create_request_context(),
            LAUNCH_PARTITION_BACKFILL_MUTATION,
            {"backfillParams": {"assetSelection": [{"path": [WAVE, "fault_runs"]}], "partitionNames": partitions}},
        )
    launched = result.data["launchPartitionBackfill"]
    if launched["__typename"] != "LaunchBackfillSuccess":
        raise RuntimeError(f"the backfill was refused: {launched}")
    return launched["backfillId"]


def slice_partitions(registry) -> list[str]:
    """The slice's cells: operators O1-O4 over the row's probes, the rectangle bench_concurrency.py runs."""
    first, last = (int(op.removeprefix("O")) for op in OPERATORS)
    probes = [p for p in registry.wave(WAVE).probes() if p.framework == FRAMEWORK and p.config == CONFIG]
    return [Cell(f"O{n}", probe).key for n in range(first, last + 1) for probe in probes]


def attempt_intervals(run_root: Path) -> list[tuple[float, float]]:
    """(start, end) of every attempt in the run root, from its sealed attempt.json."""
    out = []
    for sealed in run_root.rglob("attempt.json"):
        meta = json.loads(sealed.read_text())
        out.append(
            (
                dt.datetime.fromisoformat(meta["started_at"]).timestamp(),
                dt.datetime.fromisoformat(meta["finished_at"]).timestamp(),
            )
        )
    return out


def measure(hosts: int, concurrency: int, latency: float) -> dict:
    """Wall seconds from launch to the backfill's end, attempts and their peak in flight, on `hosts` worker hosts."""
    from sabot.registry import Registry

    os.environ[LATENCY_ENV] = str(latency)  # every host's environment starts from this one
    with tempfile.TemporaryDirectory() as tmp, hosts_layout(Path(tmp), LABELS[:hosts]) as layout, layout.environment():
        daemon = subprocess.Popen(
            ["bash", str(PROJECT / "deploy/hosts/coordinator.sh"), "daemon"],
            cwd=PROJECT,
            env={**os.environ, "SABOT_COORDINATOR_ADDRESS": layout.coordinator},
            stdout=open(Path(tmp) / "daemon.log", "w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            with layout.instance() as instance:
                instance.event_log_storage.set_concurrency_slots("llm_agent", concurrency)
                start, launched_at = time.monotonic(), time.time()
                backfill_id = launch_backfill(instance, slice_partitions(Registry()))
                while time.monotonic() - start < DEADLINE_S:
                    status = instance.get_backfill(backfill_id).status.value
                    if status.startswith("COMPLETED") or status in ("FAILED", "CANCELED"):
                        break
                    time.sleep(2)
                wall = time.monotonic() - start
        finally:
            os.killpg(daemon.pid, signal.SIGKILL)  # the daemon may ignore SIGTERM when started in the background
            daemon.wait()
        intervals = attempt_intervals(Path(layout.env["SABOT_RUN_ROOT"]))
    # The backfill is marked done on a later tick of the daemon's backfill loop; the slice's work is done
    # when its last run ends. Both are printed: the first is what the UI shows, the second the work.
    return {
        "hosts": hosts,
        "concurrency": concurrency,
        "status": status,
        "wall_s": round(wall, 1),
        "to_last_run_end_s": round(max(end for _, end in intervals) - launched_at, 1),
        "attempts": len(intervals),
        "peak_in_flight": peak_in_flight(intervals),
        "load_1min": round(os.getloadavg()[0], 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency", type=float, default=1.0, help="scripted seconds per model call")
    args = parser.parse_args()
    missing = unavailable()
    if missing:
        print(f"bench_hosts: cannot lay out worker hosts here: {missing}", file=sys.stderr)
        return 2
    rows = []
    for hosts, concurrency in ((1, args.concurrency), (2, args.concurrency), (2, 2 * args.concurrency)):
        rows.append(measure(hosts, concurrency, args.latency))
        print(json.dumps(rows[-1]), flush=True)  # each as measured: a later failure keeps it
    one, two, double = rows
    print(f"slice {WAVE} langgraph default {OPERATORS[0]}-{OPERATORS[1]}, latency {args.latency} s a call")
    for field, what in (
        ("wall_s", "launch to the backfill marked done"),
        ("to_last_run_end_s", "launch to the last run's end"),
    ):
        print(
            f"{what}: two hosts / one host at concurrency {args.concurrency}: {two[field] / one[field]:.2f} (target <= 1.1); "
            f"two hosts at {2 * args.concurrency} / one host at {args.concurrency}: {double[field] / one[field]:.2f} (target <= 0.6)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
