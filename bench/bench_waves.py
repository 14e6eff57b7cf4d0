"""Benchmark: live offline waves through the asset graph, and the baseline pass rate per task.

    .venv/bin/python bench/bench_waves.py                          # demo (eight rows), then waves 1 and 2 (six rows each)
    .venv/bin/python bench/bench_waves.py --demo-only --framework langgraph

Each wave runs in a fresh store and a fresh on-disk Dagster instance, as `sabot wave run` does.
Figures are printed, never asserted.
"""

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from sabot.registry import Registry
from sabot.store.db import connect
from sabot_assets.definitions import build_definitions
from sabot_assets.wave_jobs import run_wave


def timed_wave(registry: Registry, name: str, frameworks) -> tuple[float, Counter, Counter, int]:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "dagster").mkdir()
        store_path = tmp / "sabot.duckdb"
        with dg.instance_for_test(temp_dir=str(tmp / "dagster")) as instance:
            defs = build_definitions(registry, DuckDBResource(database=str(store_path)))
            start = time.perf_counter()
            run_wave(registry, defs, instance, name, frameworks)
            elapsed = time.perf_counter() - start
        with connect(store_path, read_only=True) as con:
            rows = con.execute(
                "SELECT framework || '/' || task, task_passed FROM runs WHERE wave = ? AND operator = ''", [name]
            ).fetchall()
            runs = con.execute("SELECT count(*) FROM runs WHERE wave = ?", [name]).fetchone()[0]
    passed, total = Counter(), Counter()
    for task, ok in rows:
        total[task] += 1
        passed[task] += bool(ok)
    return elapsed, passed, total, runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo-only", action="store_true")
    parser.add_argument("--framework", action="append", help="limit to these frameworks (repeatable)")
    args = parser.parse_args()
    registry = Registry()
    for name in ["demo"] + ([] if args.demo_only else ["wave1", "wave2"]):
        elapsed, passed, total, runs = timed_wave(registry, name, args.framework)
        rates = ", ".join(f"{t} {passed[t]}/{total[t]}" for t in sorted(total))
        rows = ", ".join(args.framework) if args.framework else "all rows"
        print(
            f"{name}: {runs} runs ({rows}) in {elapsed:.1f} s ({elapsed / max(runs, 1):.2f} s/run); baseline passes: {rates}"
        )


if __name__ == "__main__":
    main()
