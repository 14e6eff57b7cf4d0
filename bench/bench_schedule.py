"""Benchmark: how full one wave's schedule keeps the pool.

    .venv/bin/python bench/bench_schedule.py                  # wave 2's LangGraph rows: 350 runs (~2.5 min)
    .venv/bin/python bench/bench_schedule.py --task T1        # a proportional slice: one task, 70 runs

The selection runs through `run_wave` (the CLI's path: pre-registration, the schedule, every block
settled and scored as its runs land, kappa, board) on a fresh store and a fresh on-disk Dagster
instance (the project's dagster.yaml, as the CLI's) whose `llm_agent` pool limit is the concurrency. Every scripted call takes the fixed
latency (SABOT_SCRIPTED_LATENCY), so the ideal wall time is calls x latency / concurrency.

Printed, never asserted: runs, model calls, ideal and measured wall time, efficiency (ideal / wall;
the issue's target is at least 0.8), where the rest went (seconds before the first run started and
after the last one ended, the mean number of runs in flight in between, a run's mean duration beside
its mean scripted latency; from the attempts' own start and end times) and the load average before
and after.
"""

import argparse
import datetime as dt
import json
import os
import tempfile
import time
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from sabot.registry import Registry
from sabot.store.db import connect
from sabot_assets.cli.common import settle_heap
from sabot_assets.definitions import build_definitions
from sabot_assets.wave_jobs import Slice, run_wave
from sabot_assets.waves.concurrency import set_pool_limit

LATENCY_ENV = "SABOT_SCRIPTED_LATENCY"
PROJECT = Path(__file__).resolve().parents[1]


def load() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()


def measure(wave: str, framework: str, tasks: tuple[str, ...] | None, concurrency: int, latency: float) -> dict:
    os.environ[LATENCY_ENV] = str(latency)
    registry = Registry()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "dagster").mkdir()
        store_path = tmp / "sabot.duckdb"
        # The instance `sabot wave run` uses: the project's dagster.yaml (its event storage), on fresh files.
        os.environ.update(
            DAGSTER_HOME=str(PROJECT), SABOT_DAGSTER_STORAGE=str(tmp / "dagster"), DAGSTER_DISABLE_TELEMETRY="1"
        )
        with dg.DagsterInstance.get() as instance:
            set_pool_limit(instance, concurrency)
            defs = build_definitions(registry, DuckDBResource(database=str(store_path)))
            settle_heap()  # as the CLI does once the definitions are built
            start, began = time.perf_counter(), time.time()
            result = run_wave(registry, defs, instance, wave, [framework], selection=Slice(tasks=tasks))
            wall = time.perf_counter() - start
            ended = began + wall
        with connect(store_path, read_only=True) as con:
            records = [
                json.loads(r)
                for (r,) in con.execute(
                    "SELECT record FROM runs WHERE wave = ? AND status = 'present'", [wave]
                ).fetchall()
            ]
            spans = [
                (_epoch(a), _epoch(b))
                for a, b in con.execute(
                    "SELECT started_at, finished_at FROM attempts WHERE wave = ?", [wave]
                ).fetchall()
            ]
    calls = sum(len(r.get("exchanges", [])) for r in records)
    ideal = calls * latency / concurrency
    first, last = min(a for a, _ in spans), max(b for _, b in spans)
    busy = sum(b - a for a, b in spans)
    return {
        "runs": len(records),
        "ran": result.tally.ran,
        "run_errors": len(result.tally.run_errors),
        "calls": calls,
        "ideal_s": round(ideal, 1),
        "wall_s": round(wall, 1),
        "efficiency": round(ideal / wall, 3),
        # Where the rest goes: before the first run, after the last, and how full the pool was in between.
        "first_run_after_s": round(first - began, 1),
        "after_last_run_s": round(ended - last, 1),
        "mean_in_flight": round(busy / (last - first), 2),
        "mean_run_s": round(busy / len(spans), 2),
        "mean_run_latency_s": round(calls * latency / len(spans), 2),
    }


def _epoch(iso: str) -> float:
    return dt.datetime.fromisoformat(iso).timestamp()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wave", default="wave2")
    parser.add_argument("--framework", default="langgraph")
    parser.add_argument("--task", action="append", help="a proportional slice: these tasks only (repeatable)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency", type=float, default=1.0)
    args = parser.parse_args()
    before = load()
    figures = measure(
        args.wave, args.framework, tuple(args.task) if args.task else None, args.concurrency, args.latency
    )
    print(
        json.dumps(
            {
                "wave": args.wave,
                "framework": args.framework,
                "tasks": args.task or "all",
                "concurrency": args.concurrency,
                "latency_s": args.latency,
                **figures,
                "load_before": before,
                "load_after": load(),
            }
        )
    )


if __name__ == "__main__":
    main()
