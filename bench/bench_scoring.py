"""Benchmark: the pure scorer, a rule change over a full live wave 2, and the public row.

    .venv/bin/python bench/bench_scoring.py [--repeat 3] [--live-var DIR] [--public-only] [--skip-demo] [--detail]

Figures, not assertions: timings vary with the machine, so they are reported, never tested. On a
shared machine wall time depends on the load, so CPU time is printed beside it.

- pure scorer: `score_cell` over 1,000 cells (the imported fault cells, cycled), headline ruleset;
- rescore of a full live wave 2 (825 cells + 75 carved out, 150 baselines) after a hard-rule
  change: a new ruleset file whose anchors differ in one anchor, then `rescore_wave` (what
  `sabot wave rescore` runs): cell verdicts, scoreboard and report through Dagster, on a copy of a
  store and instance made by `sabot wave run wave2` (built under --live-var on first use: minutes);
  the pure scorer over the same cells and rulesets in the same process gives the ratio;
- the published wave-2 row through Dagster, and `sabot corpus score` cold in a new process;
- `sabot wave run demo --framework langgraph` a second time over the same store (every run reused);
- loading the definitions (`build_definitions()`) in a new process;
- without a target, what the commands behind two figures cost whole: the same rule change in a new
  process, as `sabot wave rescore` makes it (imports, definitions, the Dagster instance, then
  `rescore_wave`), and `sabot corpus score` of the public row again (nothing stale).

Each headline figure is also printed as a ratio to `python -c "import dagster"` measured in the same
run, interleaved with it (one floor measurement before each repetition), so the ratio holds on a
loaded machine where the seconds do not.
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
ONE_ANCHOR = ("T1", "O2", "no issues", "no open issues")


def timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def cells_of(registry, corpus):
    from sabot.corpus import scan
    from sabot.matrix import Cell

    work = []
    for name in ("public_wave1", "public_wave2"):
        wave = registry.wave(name)
        limit = registry.field("standard/corpus_import.v1.json", "max_file_bytes")
        runs = {key: f.record for key, f in scan(wave, corpus, limit).runs().items()}
        for (op, probe_key), fault in runs.items():
            if op is not None:
                work.append((wave, Cell.parse(f"{op}|{probe_key}"), fault, runs.get((None, probe_key))))
    return work


def pure_scorer(registry, work, n=1000) -> float:
    """Seconds for `n` cell scorings under each cell's headline ruleset."""
    from judges.hard.cell import score_cell
    from judges.hard.rulesets import load_ruleset

    rulesets = {v: load_ruleset(registry, v) for v in ("v0.1.3", "v0.2.0", "v0.2.1")}
    batch = [work[i % len(work)] for i in range(n)]

    def score():
        for wave, cell, fault, baseline in batch:
            score_cell(rulesets[wave.headline_ruleset], cell, fault, baseline, wave.is_carved_out(cell))

    return timed(score)[0]


def registry_with_rule_change(tmp: Path):
    """A registry copy plus one new ruleset (v0.2.0 with one anchor changed) that re-scores wave2."""
    from sabot.registry import DATA_DIR, Registry

    root = tmp / "data"
    shutil.copytree(DATA_DIR, root)
    task, op, old, new = ONE_ANCHOR
    anchors = json.loads((root / "standard/anchors.v0.2.0.json").read_text())
    anchors["anchors"][task][op] = [new if a == old else a for a in anchors["anchors"][task][op]]
    (root / "standard/anchors.v0.2.0-bench.json").write_text(json.dumps(anchors))
    ruleset = json.loads((root / "rulesets/v0.2.0.json").read_text())
    ruleset.update(version="v0.2.0-bench", rescores=["wave2"])
    ruleset["uses"]["anchors"] = "anchors.v0.2.0-bench.json"
    (root / "rulesets/v0.2.0-bench.json").write_text(json.dumps(ruleset))
    Registry(root).write_lock()
    return Registry(root)


def ensure_live_wave2(live_var: Path) -> None:
    """A full live wave 2 under `live_var`, its board built by the current code. A board is kept
    only while the code that builds it is unchanged (`sabot_assets/waves/board_inputs.py`), so a
    store left by older code has its board built again once here (untimed), as a user's would."""
    import dagster as dg
    from dagster_duckdb import DuckDBResource

    from sabot.registry import Registry
    from sabot_assets.definitions import build_definitions
    from sabot_assets.materialize import WaveRunner

    if not (live_var / "sabot.duckdb").exists():
        print(f"building a full live wave 2 under {live_var} (`sabot wave run wave2`, several minutes)...", flush=True)
        env = {**os.environ, "SABOT_VAR": str(live_var)}
        subprocess.run(
            [str(PROJECT / ".venv/bin/sabot"), "wave", "run", "wave2"], env=env, check=True, capture_output=True
        )
    os.environ.update(DAGSTER_HOME=str(PROJECT), SABOT_DAGSTER_STORAGE=str(live_var / "dagster"))
    with dg.DagsterInstance.get() as instance:
        registry = Registry()
        defs = build_definitions(registry, DuckDBResource(database=str(live_var / "sabot.duckdb")))
        WaveRunner(defs, registry.wave("wave2"), instance).board()


def rescore_live_wave2(live_var: Path) -> dict:
    """One rule change over a copy of the live wave-2 store and instance: Dagster vs pure scorer."""
    import dagster as dg
    from dagster_duckdb import DuckDBResource

    from judges.hard.cell import score_cell
    from judges.hard.rulesets import load_ruleset
    from sabot.matrix import Cell
    from sabot.store.db import connect
    from sabot.store.runs import read_runs
    from sabot_assets.cli.common import settle_heap
    from sabot_assets.definitions import build_definitions
    from sabot_assets.rescore import rescore_wave

    with tempfile.TemporaryDirectory(dir=live_var.parent) as tmp:
        tmp = Path(tmp)
        shutil.copytree(live_var, tmp / "var")
        os.environ.update(DAGSTER_HOME=str(PROJECT), SABOT_DAGSTER_STORAGE=str(tmp / "var" / "dagster"))
        registry = registry_with_rule_change(tmp)
        store_path = tmp / "var" / "sabot.duckdb"
        with dg.DagsterInstance.get() as instance:
            defs = build_definitions(registry, DuckDBResource(database=str(store_path)))
            settle_heap()  # as `sabot wave rescore` does once the definitions are built
            out = {}
            wall, cpu = timed(
                lambda: out.setdefault("r", rescore_wave(registry, defs, instance, store_path, "wave2", "v0.2.0-bench"))
            )
        result = out["r"]
        # The pure scorer over the same cells and rulesets, runs read from the same store.
        wave = registry.wave("wave2")
        rulesets = [load_ruleset(registry, v) for v in wave.readings]
        cells = [Cell(op, p) for p in wave.probes() for op in wave.operators]
        with connect(store_path, read_only=True) as con:
            runs = read_runs(
                con, wave.name, [(c.operator, c.probe.key) for c in cells] + [("", p.key) for p in wave.probes()]
            )

        def score():
            for cell in cells:
                fault, baseline = runs.get((cell.operator, cell.probe.key)), runs.get(("", cell.probe.key))
                for r in rulesets:
                    score_cell(
                        r,
                        cell,
                        fault.record if fault else None,
                        baseline.record if baseline else None,
                        wave.is_carved_out(cell),
                    )

        pure = timed(score)[0]
    return {
        "wall": wall,
        "cpu": cpu,
        "pure": pure,
        "cells": result.cells,
        "runs": result.runs,
        "flips": len(result.flips),
        "rulesets": len(rulesets),
    }


def public_row_through_dagster(registry, corpus) -> tuple[float, float]:
    """(import: run assets, scoring: cell + judge verdicts, kappa, scoreboard, report) for the wave-2 row,
    on a fresh instance with the project's storage (dagster.yaml)."""
    import dagster as dg
    from dagster_duckdb import DuckDBResource

    from sabot_assets.corpus_jobs import import_corpus, score_corpus
    from sabot_assets.definitions import build_definitions

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        os.environ.update(DAGSTER_HOME=str(PROJECT), SABOT_DAGSTER_STORAGE=str(tmp / "dagster"))
        with dg.DagsterInstance.get() as instance:
            store_path = tmp / "sabot.duckdb"
            defs = build_definitions(registry, DuckDBResource(database=str(store_path)))
            imported = {}
            t_import = timed(
                lambda: imported.setdefault(
                    "r", import_corpus(registry, defs, instance, store_path, corpus, "public_wave2")
                )
            )[0]
            t_score = timed(lambda: score_corpus(imported["r"]))[0]
    return t_import, t_score


def child(cmd: list[str], **kwargs) -> tuple[float, float]:
    """(wall, CPU) seconds of a command in a new process: its user + system time, which a loaded
    machine moves far less than the wall time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = timed(lambda: subprocess.run(cmd, check=True, capture_output=True, **kwargs))[0]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _env(**extra) -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "SABOT_DAGSTER_STORAGE")} | extra


def corpus_score(corpus, var: str) -> tuple[float, float]:
    """`sabot corpus score` of the public wave-2 row in a new process, over the store under `var`."""
    cmd = [str(PROJECT / ".venv" / "bin" / "sabot"), "corpus", "score", str(corpus), "--wave", "public_wave2"]
    return child([*cmd, "--json", f"{var}/out.json"], env=_env(SABOT_VAR=var))


def cold_cli(corpus) -> tuple[float, float]:
    """`sabot corpus score` of the public wave-2 row in a new process and a fresh store."""
    with tempfile.TemporaryDirectory() as tmp:
        return corpus_score(corpus, tmp)


# `sabot wave rescore` against a registry with the bench's rule change (the command reads the
# project's own data/): its imports, definitions, instance and `rescore_wave`, in a new process.
RESCORE_COMMAND = """
import sys
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from sabot.registry import Registry
from sabot_assets.cli.common import settle_heap
from sabot_assets.definitions import build_definitions
from sabot_assets.rescore import rescore_wave

tmp = Path(sys.argv[1])
registry, store_path = Registry(tmp / "data"), tmp / "var" / "sabot.duckdb"
defs = build_definitions(registry, DuckDBResource(database=str(store_path)))
settle_heap()
with dg.DagsterInstance.get() as instance:
    assert rescore_wave(registry, defs, instance, store_path, "wave2", "v0.2.0-bench").runs == 1
"""


def rescore_command(live_var: Path) -> tuple[float, float]:
    """The rule change of `rescore_live_wave2` as a command makes it, in a new process (the copies untimed)."""
    with tempfile.TemporaryDirectory(dir=live_var.parent) as tmp:
        tmp = Path(tmp)
        shutil.copytree(live_var, tmp / "var")
        registry_with_rule_change(tmp)
        env = _env(DAGSTER_HOME=str(PROJECT), SABOT_DAGSTER_STORAGE=str(tmp / "var" / "dagster"))
        return child([str(PROJECT / ".venv" / "bin" / "python"), "-c", RESCORE_COMMAND, str(tmp)], cwd=PROJECT, env=env)


def import_dagster() -> tuple[float, float]:
    """The floor every figure is compared with: `python -c "import dagster"`."""
    return child([str(PROJECT / ".venv" / "bin" / "python"), "-c", "import dagster"], cwd=PROJECT)


def definitions_load() -> tuple[float, float]:
    """Loading the code location's definitions in a new process, as `dagster dev` or a command does."""
    code = "from sabot_assets.definitions import build_definitions; build_definitions()"
    return child([str(PROJECT / ".venv" / "bin" / "python"), "-c", code], cwd=PROJECT)


def demo_wave(var: Path) -> tuple[float, float]:
    """`sabot wave run demo --framework langgraph` over the store under `var`."""
    return child(
        [str(PROJECT / ".venv" / "bin" / "sabot"), "wave", "run", "demo", "--framework", "langgraph"],
        env=_env(SABOT_VAR=str(var)),
    )


class Figures:
    """Each figure's repetitions, each one paired with an `import dagster` measured just before it."""

    def __init__(self):
        self.pairs: dict[
            str, list[tuple[tuple[float, float], tuple[float, float]]]
        ] = {}  # ((wall, CPU), floor's (wall, CPU))

    def measure(self, name: str, fn, repeat: int):
        out = []
        for _ in range(repeat):
            floor = import_dagster()
            result = fn()
            seconds = (result["wall"], result["cpu"]) if isinstance(result, dict) else result
            self.pairs.setdefault(name, []).append((seconds, floor))
            out.append(result)
        return out

    def line(self, name: str, target: float | None) -> str:
        med, pairs = statistics.median, self.pairs[name]
        wall, cpu = med(s[0] for s, _ in pairs), med(s[1] for s, _ in pairs)
        floor_wall, floor_cpu = med(f[0] for _, f in pairs), med(f[1] for _, f in pairs)
        each = ", ".join(f"{s[0] / f[0]:.2f}" for s, f in pairs)
        return (
            f"{name}: {wall:.2f} s wall / import dagster {floor_wall:.2f} s = {med(s[0] / f[0] for s, f in pairs):.2f}x (each: {each}); "
            f"CPU {cpu:.2f} s / {floor_cpu:.2f} s = {med(s[1] / f[1] for s, f in pairs):.2f}x; "
            + (f"target <= {target}x" if target is not None else "no target")
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--corpus", type=Path, default=PROJECT.parent / "shared" / "external" / "sabot-public")
    parser.add_argument(
        "--live-var",
        type=Path,
        default=PROJECT / "var" / "bench-wave2",
        help="SABOT_VAR of a full live wave 2 (built if absent)",
    )
    parser.add_argument(
        "--public-only", action="store_true", help="skip the live wave 2 (its first build takes minutes)"
    )
    parser.add_argument(
        "--skip-demo", action="store_true", help="skip the demo wave run twice (its first run takes about a minute)"
    )
    parser.add_argument(
        "--detail", action="store_true", help="also the pure scorer and the public row through Dagster in this process"
    )
    args = parser.parse_args()
    from sabot.registry import Registry

    registry = Registry()
    med = statistics.median
    figures = Figures()
    print(
        f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start, Python {sys.version.split()[0]}; "
        f"median of {args.repeat} runs, each after an `import dagster` in a new process; CPU = user + system",
        flush=True,
    )
    figures.measure("loading the definitions (new process)", definitions_load, args.repeat)
    print(figures.line("loading the definitions (new process)", 1.5), flush=True)
    figures.measure("`sabot corpus score` public wave-2 row, cold", lambda: cold_cli(args.corpus), args.repeat)
    print(figures.line("`sabot corpus score` public wave-2 row, cold", 2.5), flush=True)
    again = "  `sabot corpus score` of the same row again, nothing stale"
    with tempfile.TemporaryDirectory() as var:
        corpus_score(args.corpus, var)  # the first score, untimed
        figures.measure(again, lambda: corpus_score(args.corpus, var), args.repeat)
    print(figures.line(again, None), flush=True)
    if not args.public_only:
        ensure_live_wave2(args.live_var)
        live = figures.measure(
            "rule change over live wave 2 (`rescore_wave`)", lambda: rescore_live_wave2(args.live_var), args.repeat
        )
        print(figures.line("rule change over live wave 2 (`rescore_wave`)", 1.0), flush=True)
        print_live(live)
        name = "  the same rule change in a new process, as `sabot wave rescore` makes it"
        figures.measure(name, lambda: rescore_command(args.live_var), args.repeat)
        print(figures.line(name, None), flush=True)
    if not args.skip_demo:
        with tempfile.TemporaryDirectory() as var:
            first = demo_wave(Path(var))
            figures.measure(
                "`wave run demo --framework langgraph`, all reused", lambda: demo_wave(Path(var)), args.repeat
            )
        print(
            figures.line("`wave run demo --framework langgraph`, all reused", 2.0)
            + f"; the first run: {first[0]:.2f} s wall",
            flush=True,
        )
    if args.detail:
        work = cells_of(registry, args.corpus)
        pure = [pure_scorer(registry, work) for _ in range(args.repeat)]
        row = [public_row_through_dagster(registry, args.corpus) for _ in range(args.repeat)]
        print(f"pure scorer, 1,000 cells (imported fault cells, cycled), headline ruleset:  {med(pure) * 1000:.0f} ms")
        print(
            f"wave-2 public row through Dagster, import (baseline_runs + fault_runs):      {med(r[0] for r in row):.2f} s"
        )
        print(
            f"wave-2 public row through Dagster, scoring (cell + judge verdicts, kappa, scoreboard, report): {med(r[1] for r in row):.2f} s"
        )
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


def print_live(live) -> None:
    med, one = statistics.median, live[0]
    print(
        f"  {one['cells']} cells x {one['rulesets']} rulesets, {one['runs']} Dagster runs, {one['flips']} flipped: "
        f"{med(x['wall'] for x in live):.2f} s wall, {med(x['cpu'] for x in live):.2f} s CPU; "
        f"the pure scorer over the same cells and rulesets, same process: {med(x['pure'] for x in live) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
