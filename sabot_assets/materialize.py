"""Materializing a wave slice through the asset graph, in-process, a few runs per slice.

Partition ranges go in one run each (the assets use single-run backfill policies), so a scoreboard
row of 150 cells costs a handful of Dagster runs, not one process start per cell. Probe keys are
framework-major with the seed last, so a (framework, config) block of contiguous tasks is one
range, and its cells are the rectangle first-operator..last-operator over that range.
"""

from dataclasses import dataclass
from itertools import groupby

import dagster as dg

from sabot.matrix import Cell, Probe
from sabot.registry import WaveDef

RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}  # the event log keeps everything
SILENT = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}  # an expected check failure is a result, not an error


class MaterializationError(RuntimeError):
    """A run that did not succeed; the message names the wave, assets and partitions."""


@dataclass(frozen=True)
class Block:
    """Contiguous tasks of one (framework, config) row: one probe range, one cell rectangle."""

    framework: str
    config: str
    first_task: str
    last_task: str

    def probe_range(self, wave: WaveDef) -> tuple[str, str]:
        first = Probe(self.framework, self.config, self.first_task, wave.seeds[0])
        last = Probe(self.framework, self.config, self.last_task, wave.seeds[-1])
        return first.key, last.key

    def cell_range(self, wave: WaveDef) -> tuple[str, str]:
        start, end = self.probe_range(wave)
        return Cell(wave.operators[0], Probe.parse(start)).key, Cell(wave.operators[-1], Probe.parse(end)).key


def blocks(wave: WaveDef, touched: set[tuple[str, str, str]]) -> list[Block]:
    """Cover the touched (framework, config, task) triples with as few contiguous blocks as possible."""
    out = []
    for fw in wave.frameworks:
        for cfg in wave.configs:
            indices = [i for i, t in enumerate(wave.tasks) if (fw, cfg, t) in touched]
            for _, run in groupby(enumerate(indices), key=lambda pair: pair[1] - pair[0]):
                span = [i for _, i in run]
                out.append(Block(fw, cfg, wave.tasks[span[0]], wave.tasks[span[-1]]))
    return out


class WaveRunner:
    """Runs selections of one wave's assets in-process against an instance."""

    def __init__(self, defs: dg.Definitions, wave: WaveDef, instance: dg.DagsterInstance, tags: dict | None = None):
        self.defs, self.wave, self.instance = defs, wave, instance
        self.tags = {"sabot/wave": wave.name, **(tags or {})}

    def key(self, name: str) -> dg.AssetKey:
        return dg.AssetKey([self.wave.name, name])

    def run(self, names: list[str], partition_range: tuple[str, str] | None = None) -> dg.ExecuteInProcessResult:
        result = self._execute(names, partition_range)
        if not result.success:
            self._fail(result, names, partition_range)
        return result

    def _fail(self, result, names, partition_range) -> None:
        where = ", ".join(names) + (f" [{partition_range[0]}...{partition_range[1]}]" if partition_range else "")
        failure = next((e for e in result.all_events if e.is_failure), None)
        detail = failure.message if failure else "see the Dagster run log"
        raise MaterializationError(f"{self.wave.name}: materializing {where} failed (run {result.run_id}): {detail}")

    def _execute(self, names: list[str], partition_range: tuple[str, str] | None, run_config=QUIET) -> dg.ExecuteInProcessResult:
        tags = dict(self.tags)
        if partition_range:
            tags[RANGE_START], tags[RANGE_END] = partition_range
        return dg.materialize(
            [*self.defs.assets, *self.defs.asset_checks],
            selection=[self.key(n) for n in names],
            instance=self.instance,
            resources=self.defs.resources,
            tags=tags,
            run_config=run_config,
            raise_on_error=False,
        )

    def preregister(self) -> None:
        """Materialize the pre-registration; its blocking check failing stops everything here."""
        result = self._execute(["preregistration"], None)
        for check in result.get_asset_check_evaluations():
            if not check.passed:
                raise MaterializationError(f"{self.wave.name}: pre-registration check failed: {check.metadata['problems'].value}")
        if not result.success:
            self._fail(result, ["preregistration"], None)

    def runs(self, block: Block) -> None:
        self.run(["baseline_runs"], block.probe_range(self.wave))
        self.run(["fault_runs"], block.cell_range(self.wave))

    def verdicts(self, block: Block) -> None:
        """Hard-tier verdicts and judge verdicts of a block, in one run (same partitions)."""
        self.run(["cell_verdicts", "judge_verdicts"], block.cell_range(self.wave))

    def kappa(self) -> bool:
        """The kappa audit; False when its blocking check failed (the soft tier is low-confidence)."""
        result = self._execute(["kappa_audit"], None, run_config=SILENT)
        failed = [c for c in result.get_asset_check_evaluations() if not c.passed]
        if not result.success and not failed:
            self._fail(result, ["kappa_audit"], None)
        return not failed

    def board(self) -> None:
        self.run(["scoreboard", "report"])
