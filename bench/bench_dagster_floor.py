"""Benchmark: Dagster's own floor for the materializations the scoring commands write.

    .venv/bin/python bench/bench_dagster_floor.py [--repeat 3] [--cells 900] [--child]

Trivial assets with nothing of the project in them (no store, no scorer, no guard), partitioned as
a wave's cells are (operator x probe), materialized in-process over one partition range per run on
a fresh instance of the project's own storage (dagster.yaml), so the seconds are what Dagster itself
spends for that many partitions:

- `cells`: one asset, every cell partition in one run (`BackfillPolicy.single_run`), no metadata;
- `cells + metadata`: the same, each partition given its own small metadata through the public
  `context.add_asset_metadata(partition_key=...)`;
- `cells + 2 checks`: the same with two per-partition asset checks evaluated on every cell, as a
  wave's cell verdicts carry;
- `cells + 2 checks, in 6 runs`: the same cells in six runs of a sixth each (a wave's six rows):
  Dagster's check set-up per run grows with the square of the run's range;
- `corpus row, cold` (`--child`): a new process that imports Dagster, creates a fresh instance and
  materializes what `sabot corpus score` of a 150-cell row does, with trivial bodies: 25 baseline
  and 150 fault partitions, 150 judge and 150 verdict partitions (the verdicts with one check
  each, an imported corpus having no seal), a kappa audit, a scoreboard and a report, in the same six runs.

Each figure is printed beside `python -c "import dagster"` measured in a new process just before
it, as `bench/bench_scoring.py` prints the project's, so the two pages' ratios compare.
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
OPERATORS = ["O1", "O2", "O3", "O4", "O5", "O6"]


def probes(n: int) -> list[str]:
    return [f"fw.cfg.T{t}.s{s:02d}" for t in range(1, -(-n // 25) + 1) for s in range(1, 26)][:n]


def build(n_probes: int, metadata: bool, checks: int):
    """(assets, checks) of a trivial wave: baselines per probe, cells per operator x probe."""
    import dagster as dg

    probe_part = dg.StaticPartitionsDefinition(probes(n_probes))
    cell_part = dg.MultiPartitionsDefinition(
        {"operator": dg.StaticPartitionsDefinition(OPERATORS), "probe": probe_part}
    )
    single = dg.BackfillPolicy.single_run()
    check_specs = [
        dg.AssetCheckSpec(name, asset="verdicts", partitions_def=cell_part) for name in ("verdict", "seal")[:checks]
    ]

    def cell_asset(name: str, specs=()):
        @dg.asset(
            name=name, partitions_def=cell_part, backfill_policy=single, code_version="v1", check_specs=list(specs)
        )
        def cells(context: dg.AssetExecutionContext):
            keys = context.partition_keys
            if metadata:
                for key in keys:
                    context.add_asset_metadata({"verdict": "valid", "cell": key}, partition_key=key)
            for spec in specs:  # one evaluation per cell and check, as sabot_assets/waves/cell_checks.py logs them
                for key in keys:
                    context.log_event(
                        dg.AssetCheckEvaluation(
                            asset_key=context.asset_key, check_name=spec.name, partition=key, passed=True
                        )
                    )
            yield dg.MaterializeResult()
            for check_key in context.selected_asset_check_keys:
                yield dg.Output(None, output_name=context.assets_def.get_output_name_for_asset_check_key(check_key))

        return cells

    @dg.asset(name="baselines", partitions_def=probe_part, backfill_policy=single, code_version="v1")
    def baselines(context: dg.AssetExecutionContext):
        return dg.MaterializeResult()

    @dg.asset(name="board", code_version="v1")
    def board():
        return dg.MaterializeResult()

    return [baselines, cell_asset("runs"), cell_asset("judge"), cell_asset("verdicts", check_specs), board], []


def timed(fn) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def child(cmd: list[str], **kwargs) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = timed(lambda: subprocess.run(cmd, check=True, capture_output=True, **kwargs))[0]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def import_dagster() -> tuple[float, float]:
    return child([sys.executable, "-c", "import dagster"], cwd=PROJECT)


def fresh_instance(tmp: Path):
    import dagster as dg

    os.environ.update(DAGSTER_HOME=str(PROJECT), SABOT_DAGSTER_STORAGE=str(tmp / "dagster"))
    return dg.DagsterInstance.get()


def one_run(instance, assets, names: list[str], n_probes: int, first: int = 0):
    import dagster as dg

    tags = {}
    if names[0] in ("runs", "judge", "verdicts"):
        keys = probes(first + n_probes)[first:]
        tags = {
            "dagster/asset_partition_range_start": f"{OPERATORS[0]}|{keys[0]}",
            "dagster/asset_partition_range_end": f"{OPERATORS[-1]}|{keys[-1]}",
        }
    elif names[0] == "baselines":
        keys = probes(n_probes)
        tags = {"dagster/asset_partition_range_start": keys[0], "dagster/asset_partition_range_end": keys[-1]}
    result = dg.materialize(
        assets,
        selection=[dg.AssetKey(n) for n in names],
        instance=instance,
        tags=tags,
        run_config={"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}},
    )  # as the commands run: quiet
    assert result.success
    return result


def cells_in_process(n_probes: int, metadata: bool, checks: int) -> tuple[float, float]:
    """One run materializing every cell of one asset (operators x probes), on a fresh instance."""
    assets, _ = build(n_probes, metadata, checks)
    with tempfile.TemporaryDirectory() as tmp, fresh_instance(Path(tmp)) as instance:
        one_run(
            instance, assets, ["board"], n_probes
        )  # the instance's first run pays the storage's set-up: not counted
        return timed(lambda: one_run(instance, assets, ["verdicts" if checks else "runs"], n_probes))


def cells_in_runs(n_probes: int, runs: int) -> tuple[float, float]:
    """The same cells with two checks each, in `runs` runs of equal ranges (a rescore's rows)."""
    assets, _ = build(n_probes, False, 2)
    step = n_probes // runs
    with tempfile.TemporaryDirectory() as tmp, fresh_instance(Path(tmp)) as instance:
        one_run(instance, assets, ["board"], n_probes)
        return timed(lambda: [one_run(instance, assets, ["verdicts"], step, i * step) for i in range(runs)])


def corpus_row_cold() -> None:
    """What `--child` runs in a new process: the cold corpus score's runs, trivial bodies."""
    n_probes = 25
    assets, _ = build(n_probes, metadata=True, checks=1)  # an imported corpus has no seal check
    with tempfile.TemporaryDirectory() as tmp, fresh_instance(Path(tmp)) as instance:
        for names in (["board"], ["baselines"], ["runs"], ["judge"], ["verdicts"], ["board"], ["board"]):
            one_run(instance, assets, names, n_probes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--cells", type=int, default=900, help="cell partitions (a multiple of 6): 900 is a full wave 2"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        corpus_row_cold()
        return
    med = statistics.median
    print(
        f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start; median of {args.repeat}; CPU = user + system",
        flush=True,
    )
    figures = {
        f"{args.cells} cells, one run": lambda: cells_in_process(args.cells // 6, False, 0),
        f"{args.cells} cells + per-partition metadata (public add_asset_metadata)": lambda: cells_in_process(
            args.cells // 6, True, 0
        ),
        f"{args.cells} cells + 2 checks per partition": lambda: cells_in_process(args.cells // 6, False, 2),
        f"{args.cells} cells + 2 checks per partition, in 6 runs": lambda: cells_in_runs(args.cells // 6, 6),
        "corpus row, cold: new process, fresh instance, 6 runs, 475 partitions + 150 check evaluations": lambda: child(
            [sys.executable, __file__, "--child"], cwd=PROJECT
        ),
    }
    for name, fn in figures.items():
        pairs = []
        for _ in range(args.repeat):
            floor = import_dagster()
            pairs.append((fn(), floor))
        wall, cpu = med(p[0][0] for p in pairs), med(p[0][1] for p in pairs)
        print(
            f"{name}: {wall:.2f} s wall, {cpu:.2f} s CPU; / import dagster: wall {med(p[0][0] / p[1][0] for p in pairs):.2f}x, "
            f"CPU {med(p[0][1] / p[1][1] for p in pairs):.2f}x (import dagster {med(p[1][1] for p in pairs):.2f} s CPU)",
            flush=True,
        )
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
