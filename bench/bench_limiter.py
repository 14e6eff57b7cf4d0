"""Benchmark: what the endpoint limiter's admission costs per call, on this host's files or in Postgres.

    .venv/bin/python bench/bench_limiter.py [--calls 30] [--postgres URL]

Admits N calls of 4,000 and of 40,000 tokens into a fresh token bucket with room for all of them,
once counting in the shipped token unit and once a token at a time (what the bucket did before:
the limiter library writes one row per unit of weight). With --postgres (e.g. the URL
`bash scripts/postgres.sh` prints) the buckets are the shared state's, else SQLite files in a
temporary directory. Medians are printed, never asserted.
"""

import argparse
import os
import statistics
import tempfile
import time
import uuid

from adapters.gateway import limiter
from adapters.gateway.policy import RateLimit
from sabot.shared_state import SHARED_STATE_URL_ENV, shared_state_url


def median_ms(calls: int, tokens: int, shared_url: str | None, directory: str) -> float:
    bucket = limiter.EndpointLimiter(
        f"https://bench.example/{uuid.uuid4()}",
        RateLimit(requests=1_000_000, tokens=1_000_000_000, window_seconds=60.0),
        directory,
        shared_url,
    )
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        bucket.admit(tokens=tokens, timeout=30)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--postgres", help="a Postgres URL: measure the shared state's buckets")
    args = parser.parse_args()
    shipped, url = limiter.TOKEN_UNIT, shared_state_url({SHARED_STATE_URL_ENV: args.postgres or ""})
    print(
        f"load {os.getloadavg()[0]:.2f}; backend {'Postgres' if args.postgres else 'SQLite files'}; {args.calls} admissions each"
    )
    with tempfile.TemporaryDirectory() as directory:
        for unit in (shipped, 1):
            limiter.TOKEN_UNIT = unit  # read when a bucket is made and at each admission
            for tokens in (4_000, 40_000):
                print(
                    f"unit {unit:>3} token(s), {tokens:>6,} tokens a call: median {median_ms(args.calls, tokens, url, directory):.1f} ms"
                )
    limiter.TOKEN_UNIT = shipped


if __name__ == "__main__":
    main()
