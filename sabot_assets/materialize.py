"""Materializing a wave slice through the asset graph, in-process, a few runs per slice.

Partition ranges go in one run each (the assets use single-run backfill policies), so a scoreboard
row of 150 cells costs a handful of Dagster runs, not one process start per cell. Probe keys are
framework-major with the seed last, so a (framework, config) block of contiguous tasks is one
range, and its cells are the rectangle first-operator..last-operator over that range.
"""

import functools
from dataclasses import dataclass, field
from itertools import groupby

import dagster as dg

from sabot.debug import debugging
from sabot.matrix import Cell, Probe
from sabot.registry import WaveDef
from sabot_assets.constants import NOT_LAUNCHED_KEY, RUN_ERRORS_KEY, STOPPED_KEY, UNINGESTED_KEY
from sabot_assets.waves.concurrency import launcher_tag

RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"
SILENT = {
    "loggers": {"console": {"config": {"log_level": "CRITICAL"}}}
}  # an expected check failure is a result, not an error


def quiet() -> dict:
    """The console's run config: warnings only under --debug (SABOT_DEBUG), else nothing: the command
    says what failed in one line, and the event log (the UI) keeps every step failure with its trace."""
    return {"loggers": {"console": {"config": {"log_level": "WARNING" if debugging() else "CRITICAL"}}}}


class MaterializationError(RuntimeError):
    """A run that did not succeed; the message names the wave, assets and partitions."""


def own_cause(error) -> str:
    """The first line of the exception a step raised (e.g. a held store lock), past Dagster's wrappers and
    before the library error it was raised from (a raw DuckDB lock error says less than the project's)."""
    while error.cause is not None and (error.cls_name or "Dagster").startswith("Dagster"):
        error = error.cause
    first = (error.message.strip().splitlines() or [error.cls_name or "an error with no message"])[0]
    name, _, rest = first.partition(": ")
    return rest if rest and error.cls_name and name.split(".")[-1] == error.cls_name else first


@dataclass
class RunTally:
    """What the run assets did across a wave: reused, ran, carved out, and the RUN_ERROR cells."""

    ran: int = 0
    reused: int = 0
    carved_out: int = 0
    run_errors: dict = field(default_factory=dict)  # partition key -> error
    waiting: list = field(default_factory=list)  # finished runs a store lock kept out of the store
    not_launched: int = 0  # runs the spend breaker never launched: missing, resumable
    stopped: str | None = None  # why the endpoint stopped the wave (its cells missing, resumable)

    def add(self, result) -> None:
        """Count one run asset's result: from its cells' materializations, or, when the step
        failed on RUN_ERROR cells or a held lock, from the tally its Failure carries."""
        counted = {"reused": 0, "ran": 0, "carved out": 0}
        for event in result.all_events:
            if event.event_type_value == "ASSET_MATERIALIZATION":
                run = event.event_specific_data.materialization.metadata.get("run")
                text = run.value if run is not None else ""
                counted["reused"] += text.startswith("reused")
                counted["ran"] += text == "ran"
                counted["carved out"] += text.startswith("never run")
            elif event.event_type_value == "ASSET_OBSERVATION":
                observed = event.event_specific_data.asset_observation.metadata
                launched = observed.get(NOT_LAUNCHED_KEY)
                self.not_launched += launched.value if launched is not None else 0
                if observed.get(STOPPED_KEY) is not None:
                    self.stopped = self.stopped or observed[STOPPED_KEY].value
            elif event.is_step_failure and event.step_failure_data.user_failure_data:
                meta = event.step_failure_data.user_failure_data.metadata
                if RUN_ERRORS_KEY in meta:
                    self.run_errors.update(meta[RUN_ERRORS_KEY].value)
                    self.waiting += meta[UNINGESTED_KEY].value
                    counted = {k: meta[k].value for k in counted}
        self.reused += counted["reused"]
        self.ran += counted["ran"]
        self.carved_out += counted["carved out"]


@dataclass(frozen=True)
class Block:
    """Contiguous tasks of one (framework, config) row: one probe range, one cell rectangle."""

    framework: str
    config: str
    first_task: str
    last_task: str
    operators: tuple[str, ...] | None = None  # None: every operator of the wave
    seeds: tuple[int, ...] | None = None  # None: every seed of the wave

    def probe_range(self, wave: WaveDef) -> tuple[str, str]:
        first = Probe(self.framework, self.config, self.first_task, wave.seeds[0])
        last = Probe(self.framework, self.config, self.last_task, wave.seeds[-1])
        return first.key, last.key

    def cell_range(self, wave: WaveDef) -> tuple[str, str]:
        start, end = self.probe_range(wave)
        return Cell(wave.operators[0], Probe.parse(start)).key, Cell(wave.operators[-1], Probe.parse(end)).key

    def probe_ranges(self, wave: WaveDef) -> list[tuple[str, str]]:
        """One probe range per contiguous run of the selected seeds (seed is the last key part, so a
        seed subset of one task splits only where a seed is skipped)."""
        if self.seeds is None:
            return [self.probe_range(wave)]
        if self.first_task != self.last_task:
            raise ValueError("a seed subset needs a block of one task")
        out = []
        for span in _spans([i for i, seed in enumerate(wave.seeds) if seed in self.seeds]):
            first = Probe(self.framework, self.config, self.first_task, wave.seeds[span[0]])
            last = Probe(self.framework, self.config, self.first_task, wave.seeds[span[-1]])
            out.append((first.key, last.key))
        return out

    def cell_ranges(self, wave: WaveDef) -> list[tuple[str, str]]:
        """One rectangle per contiguous run of the selected operators over each probe range."""
        operators = self.operators or wave.operators
        spans = _spans([i for i, op in enumerate(wave.operators) if op in operators])
        out = []
        for start, end in self.probe_ranges(wave):
            for span in spans:
                out.append(
                    (
                        Cell(wave.operators[span[0]], Probe.parse(start)).key,
                        Cell(wave.operators[span[-1]], Probe.parse(end)).key,
                    )
                )
        return out


def _spans(indices: list[int]) -> list[list[int]]:
    """Contiguous runs of ascending indices: [0, 1, 3] -> [[0, 1], [3]]."""
    return [[i for _, i in run] for _, run in groupby(enumerate(indices), key=lambda pair: pair[1] - pair[0])]


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
        self.tags = {"sabot/wave": wave.name, **launcher_tag(), **(tags or {})}
        self.tally = RunTally()

    def key(self, name: str) -> dg.AssetKey:
        return dg.AssetKey([self.wave.name, name])

    def run(self, names: list[str], partition_range: tuple[str, str] | None = None) -> dg.ExecuteInProcessResult:
        result = self._execute(names, partition_range)
        if not result.success:
            self._fail(result, names, partition_range)
        return result

    def _fail(self, result, names, partition_range) -> None:
        where = ", ".join(names) + (f" [{partition_range[0]}...{partition_range[1]}]" if partition_range else "")
        failure = next((e for e in result.all_events if e.is_step_failure), None) or next(
            (e for e in result.all_events if e.is_failure), None
        )
        detail = failure.message if failure else "see the Dagster run log"
        if failure is not None and failure.is_step_failure and failure.step_failure_data.error:
            detail = own_cause(failure.step_failure_data.error)
        if failure is not None and failure.is_step_failure:
            user = failure.step_failure_data.user_failure_data
            if user is not None and user.description:  # a refusal raised as dg.Failure says it all (the registry check)
                detail = user.description
        raise MaterializationError(f"{self.wave.name}: materializing {where} failed (run {result.run_id}): {detail}")

    def _execute(
        self, names: list[str], partition_range: tuple[str, str] | None, run_config=None
    ) -> dg.ExecuteInProcessResult:
        tags = dict(self.tags)
        if partition_range:
            tags[RANGE_START], tags[RANGE_END] = partition_range
        return dg.materialize(
            self._wave_definitions,
            selection=[self.key(n) for n in names],
            instance=self.instance,
            resources=self.defs.resources,
            tags=tags,
            run_config=run_config or quiet(),
            raise_on_error=False,
        )

    @functools.cached_property
    def _wave_definitions(self) -> list:
        """The wave's own assets and checks: Dagster builds a job from what it is given, on every
        run, and the whole code location's six waves made each run's set-up six times the work."""
        own = self.wave.name
        return [a for a in self.defs.assets if any(k.path[0] == own for k in a.keys)] + [
            c for c in self.defs.asset_checks if any(k.asset_key.path[0] == own for k in c.check_keys)
        ]

    def preregister(self) -> None:
        """Materialize the pre-registration; its blocking check failing stops everything here."""
        result = self._execute(["preregistration"], None)
        for check in result.get_asset_check_evaluations():
            if not check.passed:
                raise MaterializationError(
                    f"{self.wave.name}: pre-registration check failed: {check.metadata['problems'].value}"
                )
        if not result.success:
            self._fail(result, ["preregistration"], None)

    def runs(self, block: Block) -> None:
        """Baselines, then fault runs. A run asset that failed only because cells ended in RUN_ERROR
        is a result (tallied, the wave goes on to score and itemize them); anything else raises."""
        self.baselines(block)
        self.fault_runs(block)

    def baselines(self, block: Block) -> None:
        for probe_range in block.probe_ranges(self.wave):
            self._live(["baseline_runs"], probe_range)

    def fault_runs(self, block: Block) -> None:
        for cell_range in block.cell_ranges(self.wave):
            self._live(["fault_runs"], cell_range)

    def _live(self, names: list[str], partition_range: tuple[str, str]) -> None:
        # RUN_ERROR cells are a result the caller itemizes; any other failure still raises below.
        result = self._execute(names, partition_range, run_config=SILENT)
        before = len(self.tally.run_errors), len(self.tally.waiting)
        self.tally.add(result)
        reported = (len(self.tally.run_errors), len(self.tally.waiting)) != before
        if not result.success and not reported:
            self._fail(result, names, partition_range)

    def verdicts(self, block: Block) -> str:
        """Judge verdicts, then hard-tier verdicts, of a block: a cell's record then shows the §2
        outcome with the judge's ruling (two independent assets: one run would order them by name).
        Returns the last Dagster run's id."""
        for cell_range in block.cell_ranges(self.wave):
            self.run(["judge_verdicts"], cell_range)
            last = self.run(["cell_verdicts"], cell_range).run_id
        return last

    def kappa(self) -> bool:
        """The kappa audit; False when its blocking check failed (the soft tier is low-confidence)."""
        result = self._execute(["kappa_audit"], None, run_config=SILENT)
        failed = [c for c in result.get_asset_check_evaluations() if not c.passed]
        if not result.success and not failed:
            self._fail(result, ["kappa_audit"], None)
        return not failed

    def board(self, readings: tuple[str, str] | None = None, instrument: bool = True) -> dg.ExecuteInProcessResult:
        """The scoreboard and report (and the instrument check), after the wave's later readings
        (`readings`: a range of them; default all) in the same run: a later reading is one partition
        over every settled cell."""
        names = ["scoreboard", "report"] + (
            ["instrument_check"] if instrument and self.wave.source == "live" and not self.wave.project else []
        )
        later = self.wave.later_readings
        if not later:
            return self.run(names)
        return self.run(["later_readings", *names], readings or (later[0], later[-1]))
