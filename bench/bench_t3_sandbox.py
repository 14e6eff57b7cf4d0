"""Benchmark: the T3 baselines of waves 1 and 2 through the real pipelines, and the sandbox's cost.

    .venv/bin/python bench/bench_t3_sandbox.py                       # every framework, waves 1 and 2
    .venv/bin/python bench/bench_t3_sandbox.py --wave wave1 --framework langgraph

Each T3 baseline cell (operator none; every config and registered seed) runs as a wave would run it
(adapters.runner.run: the framework against the scripted model on 127.0.0.1), and the pass
criterion `tasks.passes` is timed on its own. Prints, per wave and framework, the passes out of the
runs, the mean time of a whole T3 run and of its pass criterion. Figures are printed, never asserted.
"""

import argparse
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from adapters import runner
from sabot import tasks
from sabot.registry import Registry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wave", action="append", help="wave1 and wave2 unless given (repeatable)")
    parser.add_argument("--framework", action="append", help="limit to these frameworks (repeatable)")
    args = parser.parse_args()
    registry = Registry()
    criterion_times: list[float] = []
    original = tasks.passes

    def timed_passes(task_id, run_dir):
        start = time.perf_counter()
        try:
            return original(task_id, run_dir)
        finally:
            criterion_times.append(time.perf_counter() - start)

    tasks.passes = timed_passes  # the runner calls tasks.passes through the module
    for name in args.wave or ["wave1", "wave2"]:
        wave = registry.wave(name)
        for framework in args.framework or wave.frameworks:
            passed, runs, run_times = 0, 0, []
            criterion_times.clear()
            errors = defaultdict(int)
            with tempfile.TemporaryDirectory(prefix="sabot-bench-t3-") as tmp:
                for config in wave.configs:
                    for seed in wave.seeds:
                        spec = runner.RunSpec(name, wave.protocol, framework, config, "T3", None, seed)
                        start = time.perf_counter()
                        record = runner.run(spec, registry, Path(tmp)).record
                        run_times.append(time.perf_counter() - start)
                        runs += 1
                        passed += bool(record.task_passed)
                        if record.error:
                            errors[record.error[:80]] += 1
            print(
                f"{name} {framework}: T3 baselines passed {passed}/{runs}; per run {statistics.mean(run_times):.2f} s, "
                f"pass criterion {statistics.mean(criterion_times):.3f} s (median {statistics.median(criterion_times):.3f} s)"
                + (f"; errors: {dict(errors)}" if errors else ""),
                flush=True,
            )


if __name__ == "__main__":
    main()
