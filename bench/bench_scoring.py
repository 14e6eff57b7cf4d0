"""Benchmark: the pure scorer, and scoring the imported wave-2 row through Dagster.

    .venv/bin/python bench/bench_scoring.py [--repeat 3] [--corpus ../shared/external/sabot-public]

Figures, not assertions: timings vary with the machine, so they are reported, never tested.
Each Dagster measurement uses a fresh store and a fresh on-disk SQLite instance, as the CLI does.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from judges.hard.cell import score_cell
from judges.hard.rulesets import load_ruleset
from sabot.corpus import scan
from sabot.matrix import Cell
from sabot.registry import Registry
from sabot_assets.corpus_jobs import import_corpus, score_corpus
from sabot_assets.definitions import build_definitions

PROJECT = Path(__file__).resolve().parents[1]


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def pure_scorer(registry, corpus) -> tuple[int, float, float]:
    """Cells scored, seconds for the headline rulesets, seconds for all three rulesets."""
    work = []
    for name in ("public_wave1", "public_wave2"):
        wave = registry.wave(name)
        runs = {key: f.record for key, f in scan(wave, corpus).runs().items()}
        for (op, probe_key), fault in runs.items():
            if op is not None:
                work.append((wave, Cell.parse(f"{op}|{probe_key}"), fault, runs.get((None, probe_key))))
    rulesets = {v: load_ruleset(registry, v) for v in ("v0.1.3", "v0.2.0", "v0.2.1")}

    def score(versions):
        for wave, cell, fault, baseline in work:
            for v in versions(wave):
                score_cell(rulesets[v], cell, fault, baseline, wave.is_carved_out(cell))

    headline = timed(lambda: score(lambda w: [w.headline_ruleset]))
    every = timed(lambda: score(lambda w: w.readings))
    return len(work), headline, every


def through_dagster(registry, corpus) -> tuple[float, float]:
    """(import: run assets, scoring: cell verdicts + scoreboard + report) for the wave-2 row."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "dagster").mkdir()
        with dg.instance_for_test(temp_dir=str(tmp / "dagster")) as instance:
            store_path = tmp / "sabot.duckdb"
            defs = build_definitions(registry, DuckDBResource(database=str(store_path)))
            imported = {}
            t_import = timed(lambda: imported.setdefault("r", import_corpus(registry, defs, instance, store_path, corpus, "public_wave2")))
            t_score = timed(lambda: score_corpus(imported["r"]))
    return t_import, t_score


def cold_cli(corpus) -> float:
    """Wall time of the whole `sabot corpus score` command in a new process and a fresh store."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [str(PROJECT / ".venv" / "bin" / "sabot"), "corpus", "score", str(corpus), "--wave", "public_wave2", "--json", f"{tmp}/out.json"]
        env = {**os.environ, "SABOT_VAR": tmp}
        return timed(lambda: subprocess.run(cmd, env=env, check=True, capture_output=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--corpus", type=Path, default=PROJECT.parent / "shared" / "external" / "sabot-public")
    args = parser.parse_args()
    registry = Registry()

    pure = [pure_scorer(registry, args.corpus) for _ in range(args.repeat)]
    dagster = [through_dagster(registry, args.corpus) for _ in range(args.repeat)]
    cli = [cold_cli(args.corpus) for _ in range(args.repeat)]
    med = statistics.median
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}; median of {args.repeat} runs")
    print(f"pure scorer, {pure[0][0]} imported fault cells (+ baselines), headline ruleset: {med(p[1] for p in pure) * 1000:.0f} ms")
    print(f"pure scorer, same cells under all three rulesets:                 {med(p[2] for p in pure) * 1000:.0f} ms")
    print(f"wave-2 row through Dagster, import (baseline_runs + fault_runs):   {med(d[0] for d in dagster):.2f} s")
    print(f"wave-2 row through Dagster, scoring (cell + judge verdicts, kappa, scoreboard, report): {med(d[1] for d in dagster):.2f} s")
    print(f"wave-2 row through Dagster, import + scoring:                      {med(d[0] + d[1] for d in dagster):.2f} s")
    print(f"`sabot corpus score` cold, new process and fresh store:            {med(cli):.2f} s")


if __name__ == "__main__":
    main()
