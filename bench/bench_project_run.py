"""Benchmark: seconds per run of each example project, offline, one process running them in turn.

    .venv/bin/python bench/bench_project_run.py [--runs 3] [--operator O1]

Each example runs once to warm up, then `--runs` times; the mean per run is printed, never
asserted. A run hosts the model gateway and fault layer in this process and starts the pipeline's
own process confined (adapters/byo/confine.py: a fresh interpreter inside bubblewrap), so the
figure includes the sandbox's start and the fresh interpreter's imports, the framework's included.
"""

import argparse
import tempfile
import time
from pathlib import Path

from adapters.byo.runner import execute
from sabot.projects import Project

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--operator", default="O1")
    args = parser.parse_args()
    for folder in sorted(p.parent.parent for p in EXAMPLES.glob("*/sabot/project.json")):
        project = Project.load(folder)
        with tempfile.TemporaryDirectory() as tmp:
            execute(project, args.operator, 1, "warm", Path(tmp) / "warm")
            started = time.perf_counter()
            for i in range(args.runs):
                execute(project, args.operator, 1, f"run{i}", Path(tmp) / f"run{i}")
            print(f"{project.name} ({project.framework}): {(time.perf_counter() - started) / args.runs:.2f} s/run")


if __name__ == "__main__":
    main()
