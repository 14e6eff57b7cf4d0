"""Benchmark: a real local model server's speed, and a wave slice's wall time against it.

    .venv/bin/python bench/bench_local_model.py                 # tokens/s, then the slice live and replayed
    .venv/bin/python bench/bench_local_model.py --no-slice      # tokens/s only

Starts the bundled model with `scripts/local_model.sh start` (building it first if this machine has
not: ~15 min) on a free port, then:
- prompt tokens/s: one call of a ~700-token prompt with `max_tokens` 1 (the server's prompt cache
  is emptied first by a different prompt), its prompt tokens over its wall time;
- generation tokens/s: the same prompt again (now cached) with `max_tokens` 128, completion tokens
  over wall time (a base model never stops early, so it writes all 128);
- the slice: `sabot wave run demo` for LangGraph and CrewAI, T1, the baseline and O1, O2 (6 runs)
  in a fresh SABOT_VAR with the slice test's call profile (tests/test_local_model_slice.py), then
  the same selection `--replay` with the server stopped.
Printed, never asserted, with the load average: the machine is shared.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

import openai  # noqa: E402

from tests.test_local_model_slice import SELECTION, SLICE_PROFILE  # noqa: E402 - the project root first

SCRIPT = PROJECT / "scripts" / "local_model.sh"
PROMPT = "Maintenance log, pump P-101. " + " ".join(
    f"Reading {i}: vibration {40 + i % 9}.{i % 10} mm/s, temperature {60 + i % 7} C." for i in range(60)
)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def speed(base_url: str) -> dict:
    client = openai.OpenAI(base_url=base_url, api_key="sk-local-model", max_retries=0, timeout=900)
    messages = [{"role": "user", "content": PROMPT}]
    client.chat.completions.create(
        model="gpt-5.6-terra", messages=[{"role": "user", "content": "Warm up."}], max_tokens=1
    )
    started = time.monotonic()
    first = client.chat.completions.create(model="gpt-5.6-terra", messages=messages, max_tokens=1)
    prompt_seconds = time.monotonic() - started
    started = time.monotonic()
    second = client.chat.completions.create(model="gpt-5.6-terra", messages=messages, max_tokens=128)
    generation_seconds = time.monotonic() - started
    return {
        "prompt tokens": first.usage.prompt_tokens,
        "prompt tokens/s": first.usage.prompt_tokens / prompt_seconds,
        "completion tokens": second.usage.completion_tokens,
        "generation tokens/s": second.usage.completion_tokens / generation_seconds,
    }


def slice_seconds(exports: dict, stop) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-local-model-") as var:
        policy = Path(var) / "policy.json"
        policy.write_text(json.dumps({"profiles": {"local_model": SLICE_PROFILE}}))
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("SABOT_DB", "DAGSTER_HOME", "SABOT_DAGSTER_STORAGE", "SABOT_MODEL_API_KEY")
        }
        env.update(SABOT_VAR=var, SABOT_CALL_POLICY=str(policy), **exports)
        out = {}
        for mode, extra in (("live", []), ("replay", ["--replay"])):
            if mode == "replay":
                stop()
            started = time.monotonic()
            done = subprocess.run(
                [
                    str(PROJECT / ".venv/bin/sabot"),
                    "wave",
                    "run",
                    "demo",
                    *SELECTION,
                    *extra,
                    "--json",
                    f"{var}/{mode}.json",
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=3600,
            )
            out[f"{mode} s"] = time.monotonic() - started
            cells = json.loads(Path(f"{var}/{mode}.json").read_text())["cells"] if done.returncode in (0, 1) else []
            out[f"{mode} outcomes"] = sorted(str(c["excluded"] or "valid") for c in cells) or done.stderr[-400:]
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-slice", action="store_true", help="measure tokens/s only")
    args = parser.parse_args()
    env = {**os.environ, "SABOT_LOCAL_MODEL_PORT": str(_free_port())}
    started = subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=7200)
    if started.returncode != 0:
        sys.exit(started.stderr[-2000:])
    exports = dict(
        line.removeprefix("export ").split("=", 1) for line in started.stdout.splitlines() if line.startswith("export ")
    )
    stop = lambda: subprocess.run(["bash", str(SCRIPT), "stop"], env=env, capture_output=True, timeout=60)  # noqa: E731
    try:
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        figures = speed(exports["SABOT_MODEL_BASE_URL"])
        print(
            f"local model (gemma-3-270m Q4_K_M, llama-cpp-python 0.3.36, load {load}): prompt {figures['prompt tokens/s']:.0f} tokens/s "
            f"({figures['prompt tokens']} tokens), generation {figures['generation tokens/s']:.1f} tokens/s ({figures['completion tokens']} tokens)"
        )
        if not args.no_slice:
            result = slice_seconds(exports, stop)
            print(
                f"slice (LangGraph + CrewAI, T1, baseline + O1 + O2: 6 runs): live {result['live s']:.0f} s {result['live outcomes']}; "
                f"replay {result['replay s']:.0f} s {result['replay outcomes']}; load after {' '.join(Path('/proc/loadavg').read_text().split()[:3])}"
            )
    finally:
        stop()


if __name__ == "__main__":
    main()
