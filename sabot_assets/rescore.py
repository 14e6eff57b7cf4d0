"""Re-scoring a wave after a rule change: the hard tier, scoreboard and report, nothing else.

A rule change (a new ruleset file, or a change to the scorer's code) touches only the hard tier:
run assets are never re-run and judge verdicts are not downstream of hard-tier rules. Under a
ruleset the wave registered, the cells are re-materialized through the asset graph, one run per
scoreboard row's stored cells, then the later readings, scoreboard and report. Under a later
ruleset (a new file naming the wave in `rescores`), only its partition of `later_readings`, the
scoreboard and the report, in one run. The verdicts before and after are compared.
"""

from dataclasses import dataclass

import dagster as dg

from sabot.matrix import Probe
from sabot.registry import Registry, RegistryError, WaveDef
from sabot.store.db import connect, held
from sabot.store.verdicts import read_verdicts
from sabot_assets.materialize import WaveRunner, blocks
from sabot_assets.settled import fingerprint, mark_settled, settled_by

VERDICT_FIELDS = ("status", "excluded", "detected_hard", "reacted", "recovered")


@dataclass(frozen=True)
class Flip:
    cell: str  # operator|probe
    before: dict
    after: dict

    def describe(self) -> str:
        changed = [
            f"{k} {self.before[k]} -> {self.after[k]}" for k in VERDICT_FIELDS if self.before[k] != self.after[k]
        ]
        return f"{self.cell}: {', '.join(changed)}"


@dataclass
class Rescore:
    wave: WaveDef
    ruleset: str
    compared_with: str  # the reading whose earlier verdicts the new ones are compared with
    cells: int
    runs: int  # Dagster runs launched: 0 when nothing was stale
    flips: list[Flip]


def _verdicts(con, wave: str, ruleset: str) -> dict:
    return {
        f"{r['operator']}|{r['probe']}": {k: r[k] for k in VERDICT_FIELDS} for r in read_verdicts(con, wave, ruleset)
    }


def _stored_cell_ranges(con, wave: WaveDef) -> list[tuple[str, str]]:
    """Cell partition ranges covering the stored runs: one per (framework, config) row's contiguous
    tasks, so a complete wave is one run per scoreboard row. Not one run for the whole wave: Dagster
    writes a planned row per partition and check when a run starts, serializing the run's whole
    range for each, so a run's check set-up grows with the square of its range (900 cells in one run:
    5.2-5.8 s of CPU in Dagster alone; six runs of 150: 3.5 s; `bench/bench_dagster_floor.py`)."""
    probes = [
        Probe.parse(p) for (p,) in con.execute("SELECT DISTINCT probe FROM runs WHERE wave = ?", [wave.name]).fetchall()
    ]
    touched = {(p.framework, p.config, p.task) for p in probes}
    if not touched:
        raise RegistryError(f"wave {wave.name} has no stored runs to re-score (run or import it first)")
    return [block.cell_range(wave) for block in blocks(wave, touched)]


def rescore_wave(
    registry: Registry,
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    store_path,
    wave_name: str,
    ruleset: str | None = None,
) -> Rescore:
    """Re-materialize the hard tier of a wave's stored cells, then its board; report what flipped."""
    registry.require_registered()
    wave = registry.wave(wave_name)
    ruleset = ruleset or wave.headline_ruleset
    if ruleset not in wave.readings:
        raise RegistryError(
            f"wave {wave.name} is scored under {', '.join(wave.readings)}, not {ruleset!r} "
            f'(a later ruleset reads a wave when its file lists the wave under "rescores")'
        )
    asked = {"rescore": ruleset}
    with connect(store_path, read_only=True) as con:  # one connection for every read before the run
        before = _verdicts(con, wave.name, ruleset)
        print_ = fingerprint(registry, defs.assets, store_path, wave, asked, {}, con)
        if before and settled_by(store_path, wave, print_, con):  # nothing changed since a rescore under these rules
            return Rescore(wave, ruleset, ruleset, len(before), 0, [])
        compared_with = ruleset if before else wave.headline_ruleset
        before = before or _verdicts(con, wave.name, wave.headline_ruleset)
        spans = _stored_cell_ranges(con, wave)  # refuses a wave with nothing stored, whichever the reading
    runner = WaveRunner(defs, wave, instance, tags={"sabot/rescore": ruleset})
    with held(store_path):  # every opening below, the assets' included, is a cursor on one opening
        if ruleset in wave.later_readings:  # its own partition: no cell partition is touched
            spans = []
            board = runner.board(readings=(ruleset, ruleset), instrument=False)
        else:
            for span in spans:
                runner.run(["cell_verdicts"], span)
            board = runner.board(instrument=False)
        with connect(store_path) as con:  # what the rescore left, and its settling recorded
            print_ = fingerprint(registry, defs.assets, store_path, wave, asked, {}, con)
            mark_settled(instance, store_path, wave, board.run_id, print_, con)
            after = _verdicts(con, wave.name, ruleset)
    flips = [
        Flip(cell, before[cell], after[cell])
        for cell in sorted(after)
        if cell in before and before[cell] != after[cell]
    ]
    return Rescore(wave, ruleset, compared_with, len(after), len(spans) + 1, flips)
