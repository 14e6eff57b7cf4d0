"""Benchmark: how long a wave-2 selection takes to stop against a dead and against a hanging provider.

    .venv/bin/python bench/bench_faults.py                      # both, the whole of wave 2 selected
    .venv/bin/python bench/bench_faults.py --mode hang          # one of them
    .venv/bin/python bench/bench_faults.py --framework langgraph # a smaller selection

Each measurement is one `sabot wave run wave2 --concurrency 8` in a fresh SABOT_VAR, pointed at a
127.0.0.1 fault provider (tests/fault_provider.py): "dead" is a port nothing listens on (connection
refused), "hang" accepts every connection and never answers. The registered call policy applies
as shipped (no override): the breaker, the connect and first-byte timeouts are what a user gets.
Printed, never asserted: wall time to exit, exit status, connections/requests the provider saw,
the stop paragraph, and the load average. Before the breaker (call policy v1), the same selections
would have failed run by run: 68 s a run (dead) and 361 s a run (hang), about 5.3 h and 28 h.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from tests.fault_provider import FaultProvider  # noqa: E402 - the project root first


def measure(mode: str, frameworks: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"bench-faults-{mode}-") as var, FaultProvider(mode) as provider:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("SABOT_DB", "DAGSTER_HOME", "SABOT_DAGSTER_STORAGE", "SABOT_CALL_POLICY", "SABOT_LIMITER_DIR")
        }
        env.update(SABOT_VAR=var, SABOT_MODEL_BASE_URL=provider.base_url, SABOT_MODEL_API_KEY="sk-bench-not-a-key")
        args = [
            str(PROJECT / ".venv/bin/sabot"),
            "wave",
            "run",
            "wave2",
            "--concurrency",
            "8",
            *[a for f in frameworks for a in ("--framework", f)],
        ]
        load = Path("/proc/loadavg").read_text().split()[:3]
        started = time.monotonic()
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=3 * 3600)
        seconds = time.monotonic() - started
        paragraph = next((line for line in done.stderr.splitlines() if "the wave stopped" in line), done.stderr[-600:])
        return {
            "mode": mode,
            "seconds": seconds,
            "exit": done.returncode,
            "provider saw": provider.calls,
            "load before": " ".join(load),
            "load after": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
            "paragraph": paragraph,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["dead", "hang"], action="append")
    parser.add_argument("--framework", action="append", default=[])
    opts = parser.parse_args()
    for mode in opts.mode or ["dead", "hang"]:
        r = measure(mode, opts.framework)
        print(
            f"{r['mode']}: stopped in {r['seconds']:.1f} s (exit {r['exit']}); the provider saw {r['provider saw']} "
            f"connection(s)/request(s); load {r['load before']} -> {r['load after']}"
        )
        print(f"  {r['paragraph']}")


if __name__ == "__main__":
    main()
