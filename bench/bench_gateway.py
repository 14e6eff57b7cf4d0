"""Benchmark: what the model gateway adds to one model call, against the scripted server on 127.0.0.1.

    .venv/bin/python bench/bench_gateway.py [--calls 200]

The same chat completion is sent N times straight to a scripted server and N times through a
gateway in front of it (no limiter, the registered retry policy); the median and 95th percentile
per call are printed, never asserted.
"""

import argparse
import statistics
import time

import openai

from adapters.gateway import CallPolicy, ModelGateway, Upstream
from adapters.scripted import Reply, ScriptedModelServer
from sabot.registry import Registry

MESSAGES = [
    {"role": "system", "content": "You are a worker."},
    {"role": "user", "content": "Summarize the memo. " * 50},
]


def per_call(base_url: str, calls: int) -> list[float]:
    client = openai.OpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)
    client.chat.completions.create(model="gpt-5.6-terra", messages=MESSAGES)  # warm-up, off the clock
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        client.chat.completions.create(model="gpt-5.6-terra", messages=MESSAGES)
        times.append(time.perf_counter() - t0)
    return times


def describe(label: str, times: list[float]) -> str:
    q = statistics.quantiles(times, n=20)
    return (
        f"{label}: median {statistics.median(times) * 1000:.2f} ms, p95 {q[18] * 1000:.2f} ms over {len(times)} calls"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    policy = CallPolicy.load(Registry())
    with ScriptedModelServer(lambda r: Reply(content="A short summary of the memo.")) as server:
        direct = per_call(server.base_url, args.calls)
        with ModelGateway(
            Upstream(server.base_url, "sk-bench", "simulation", scripted=True), policy, "bench"
        ) as gateway:
            through = per_call(gateway.base_url, args.calls)
    print(describe("direct to the scripted server", direct))
    print(describe("through the gateway", through))
    print(
        f"gateway overhead per call (median): {(statistics.median(through) - statistics.median(direct)) * 1000:.2f} ms"
    )


if __name__ == "__main__":
    main()
