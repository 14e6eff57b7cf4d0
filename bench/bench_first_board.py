"""Benchmark: a team's first hour, offline: `sabot init` a LangGraph project, check it, lock it and
run its first wave to a board, timed step by step (the target: the first board within 3 minutes on
a 2-core machine).

    .venv/bin/python bench/bench_first_board.py               # one pass (~1-2 min)
    .venv/bin/python bench/bench_first_board.py --framework crewai

Each pass scaffolds a fresh folder in a temporary directory and uses a fresh SABOT_VAR (store and
Dagster instance), so nothing is reused; the commands are the `sabot` executable a team types, run
one after another as the README and docs/own-pipeline.md tell it. Printed, never asserted: the wall
time of each step and of the whole, the board's first line, and how long `wave run` takes to refuse
a misspelt folder (before Dagster is imported or a store created).
"""

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SABOT = ROOT / ".venv" / "bin" / "sabot"
TARGET_SECONDS = 180


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", default="langgraph", choices=("langgraph", "crewai", "autogen"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sabot-first-board-") as tmp:
        project = Path(tmp) / "my_project"
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("SABOT_DB", "SABOT_MODEL_BASE_URL", "SABOT_MODEL_API_KEY", "SABOT_DAGSTER_STORAGE")
        }
        env["SABOT_VAR"] = str(Path(tmp) / "var")
        steps = (
            ("init", ["init", str(project), "--framework", args.framework]),
            ("project check", ["project", "check", str(project)]),
            ("registry lock", ["registry", "lock", str(project)]),
            ("wave run", ["wave", "run", str(project)]),
        )
        total, board = 0.0, ""
        for name, argv in steps:
            started = time.perf_counter()
            done = subprocess.run([str(SABOT), *argv], cwd=ROOT, env=env, capture_output=True, text=True)
            took = time.perf_counter() - started
            total += took
            print(f"{name:<14} {took:6.1f} s  (exit status {done.returncode})")
            if done.returncode != 0:
                raise SystemExit(f"{name} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
            board = next((line for line in done.stdout.splitlines() if "under ruleset" in line), board)
        print(
            f"{'first board':<14} {total:6.1f} s  (target {TARGET_SECONDS} s; {os.cpu_count()} cores) {args.framework}"
        )
        print(f"board: {board}")
        typo = str(project.parent / "my_projcet")
        started = time.perf_counter()
        done = subprocess.run([str(SABOT), "wave", "run", typo], cwd=ROOT, env=env, capture_output=True, text=True)
        print(
            f"{'typo refused':<14} {time.perf_counter() - started:6.2f} s  (exit status {done.returncode}): {done.stderr.strip()[:100]}"
        )


if __name__ == "__main__":
    main()
