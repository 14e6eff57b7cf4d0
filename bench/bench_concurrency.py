"""Benchmark: a 100-run slice at concurrency 1 and 8, with and without scripted latency per call.

    .venv/bin/python bench/bench_concurrency.py                    # latency 1.0 s: concurrency 8, then 1 (~5 min)
    .venv/bin/python bench/bench_concurrency.py --skip-serial      # concurrency 8 only

The slice is wave 1's LangGraph default row, operators O1-O4 over every task and seed: 100 fault
runs in one `fault_runs` materialization, as a backfill run of them would make. Each measurement
gets a fresh store and a fresh on-disk Dagster instance with the `llm_agent` pool limit set to the
concurrency. Latency is the scripted model's seeded knob (SABOT_SCRIPTED_LATENCY, fixed per call).

Printed, never asserted:
- wall time at latency 0 and at the given latency (concurrency 8), the model calls made, and the
  bound 1.25 x (calls x latency / 8) + the zero-latency wall time;
- concurrency 1 against 8 at that latency, as a ratio;
- the harness's overhead per run: one run through the harness (fork-server child, runner,
  isolated HOME, fault, recorder) against the same pipeline invoked bare on the same scripted
  server with the same latency, as a ratio.
"""

import argparse
import statistics
import functools
import json
import os
import tempfile
import time
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from adapters.endpoint import scripted
from adapters.pool import run_many, run_spec
from adapters.runner import RunSpec, pipeline_class
from adapters.scripted.policy import ScriptedPolicy
from adapters.scripted.server import ScriptedModelServer
from adapters.tools import TaskTools
from operators import make_fault
from sabot import tasks
from sabot.matrix import Cell, Probe
from sabot.parse_rules import Protocols
from sabot.recorder import Recorder
from sabot.registry import Registry
from sabot.store.db import connect
from sabot_assets.definitions import build_definitions
from sabot_assets.materialize import WaveRunner
from sabot_assets.waves.concurrency import set_pool_limit

LATENCY_ENV = "SABOT_SCRIPTED_LATENCY"
REPEATS = 3
WAVE, FRAMEWORK, CONFIG, OPERATORS = "wave1", "langgraph", "default", ("O1", "O4")  # O1..O4: 4 x 25 probes = 100 runs


def slice_range(registry: Registry) -> tuple[str, str]:
    wave = registry.wave(WAVE)
    first = Probe(FRAMEWORK, CONFIG, wave.tasks[0], wave.seeds[0])
    last = Probe(FRAMEWORK, CONFIG, wave.tasks[-1], wave.seeds[-1])
    return Cell(OPERATORS[0], first).key, Cell(OPERATORS[1], last).key


def timed_slice(registry: Registry, concurrency: int, latency: float) -> tuple[float, int, int]:
    """(wall seconds, runs stored, model calls) for the slice in a fresh store and instance."""
    os.environ[LATENCY_ENV] = str(latency)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "dagster").mkdir()
        store_path = tmp / "sabot.duckdb"
        with dg.instance_for_test(temp_dir=str(tmp / "dagster")) as instance:
            set_pool_limit(instance, concurrency)
            defs = build_definitions(registry, DuckDBResource(database=str(store_path)))
            runner = WaveRunner(defs, registry.wave(WAVE), instance)
            runner.preregister()
            start = time.perf_counter()
            runner.run(["fault_runs"], slice_range(registry))
            elapsed = time.perf_counter() - start
        with connect(store_path, read_only=True) as con:
            records = [
                json.loads(r)
                for (r,) in con.execute(
                    "SELECT record FROM runs WHERE wave = ? AND status = 'present'", [WAVE]
                ).fetchall()
            ]
    calls = sum(len(r.get("exchanges", [])) for r in records)
    return elapsed, len(records), calls


def harness_run(registry: Registry, spec: RunSpec) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        fn = functools.partial(run_spec, registry=registry, work_root=tmp)
        [(_, outcome, seconds)] = list(run_many(fn, [spec], concurrency=1))
        assert outcome.record.error is None, outcome.record.error
    return seconds


def fork_server_start(registry: Registry) -> float:
    """The first run of a process pays the fork server's start (it imports the three frameworks);
    every later run, in this wave or the next block, forks from it. Timed apart from a run."""
    from adapters.pool import _context

    start = time.perf_counter()
    ctx = _context()
    ctx.Process(target=int).start()  # starts the fork server with its preload, then forks a no-op
    return time.perf_counter() - start


def bare_run(registry: Registry, spec: RunSpec) -> float:
    """The same pipeline on the same scripted server, called directly: no child process, run root,
    HOME, retry or record. Only what the pipeline needs to run is built."""
    from adapters.scripted.latency import Latency  # the knob; absent before it landed

    models = registry.doc("standard/models.v0.1.1.json")
    task, oracle = tasks.served(spec.task), tasks.oracle(spec.task)
    with tempfile.TemporaryDirectory() as tmp:
        recorder = Recorder()
        fault = make_fault(spec.operator, oracle.operators, models["o4_downgrade_model"])
        tools = TaskTools(task, recorder, fault, Path(tmp), task.worker_role)
        policy = ScriptedPolicy(spec.run_id, weak_model=models["o4_downgrade_model"])
        with ScriptedModelServer(policy, latency=Latency.from_env(spec.run_id)) as server:
            endpoint = scripted(server.base_url, models["pipeline_model"], models["o4_downgrade_model"])
            pipeline = pipeline_class(spec.framework)(
                spec.config,
                task,
                tools,
                recorder,
                endpoint,
                fault,
                Protocols.from_registry(registry),
                spec.protocol >= 2,
            )
            start = time.perf_counter()
            pipeline.run()
            return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=1.0, help="scripted seconds per model call")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--skip-serial", action="store_true", help="skip concurrency 1 at that latency (~5 min)")
    parser.add_argument("--overhead-only", action="store_true", help="only the harness's overhead per run")
    args = parser.parse_args()
    registry = Registry()
    c = args.concurrency
    print(
        f"slice: {WAVE} {FRAMEWORK}/{CONFIG} fault_runs {' ... '.join(slice_range(registry))}; load average {os.getloadavg()[0]:.1f}"
    )

    print(
        f"fork server start (once per process, before its first run; not in the figures below): {fork_server_start(registry):.2f} s"
    )
    if not args.overhead_only:
        zero, runs, zero_calls = timed_slice(registry, c, 0.0)
        print(f"concurrency {c}, latency 0: {zero:.1f} s for {runs} runs, {zero_calls} model calls")
        slow, runs, calls = timed_slice(registry, c, args.latency)
        bound = 1.25 * (calls * args.latency / c) + zero
        verdict = "within" if slow <= bound else "OVER"
        print(
            f"concurrency {c}, latency {args.latency}: {slow:.1f} s for {runs} runs, {calls} model calls; "
            f"bound 1.25 x ({calls} x {args.latency} / {c}) + {zero:.1f} = {bound:.1f} s: {verdict}"
        )
        if not args.skip_serial:
            serial, runs, _ = timed_slice(registry, 1, args.latency)
            print(
                f"concurrency 1, latency {args.latency}: {serial:.1f} s for {runs} runs; concurrency 1 / {c} = {serial / slow:.2f}"
            )

    os.environ[LATENCY_ENV] = str(args.latency)
    spec = RunSpec(WAVE, registry.wave(WAVE).protocol, FRAMEWORK, CONFIG, "T1", "O1", registry.wave(WAVE).seeds[0])
    harness = statistics.median(harness_run(registry, spec) for _ in range(REPEATS))
    bare = statistics.median(bare_run(registry, spec) for _ in range(REPEATS))
    print(
        f"one run, latency {args.latency} (median of {REPEATS}): through the harness {harness:.2f} s, bare pipeline {bare:.2f} s; "
        f"harness / bare = {harness / bare:.2f} (overhead {harness - bare:.2f} s a run)"
    )


if __name__ == "__main__":
    main()
