"""One asset group per registered wave; the key prefix is the wave's name.

A live wave also gets its rerun jobs: the run assets with the tag `sabot/rerun=true`, so a cell
is run again from the UI by picking its partitions in the job's Materialize dialog.
"""

from dataclasses import dataclass, field

import dagster as dg

from judges.hard.rulesets import load_ruleset
from sabot.registry import Registry, WaveDef
from sabot_assets.waves.scoreboard_assets import build_board_assets
from sabot_assets.waves.instrument import build_instrument_check
from sabot_assets.waves.preregistration import build_preregistration
from sabot_assets.waves.judging import build_judging_assets
from sabot_assets.waves.later_readings import build_later_readings
from sabot_assets.waves.live_runs import build_live_run_assets
from sabot_assets.waves.runs import build_run_assets
from sabot_assets.constants import RERUN_TAG
from sabot_assets.waves.cell_metadata import rerun_hint, rerun_job_name
from sabot_assets.waves.verdicts import build_cell_verdicts, scorer_version


@dataclass
class WaveDefinitions:
    assets: list
    checks: list
    jobs: list = field(default_factory=list)


def with_rerun_hint(wave: WaveDef, assets_def: dg.AssetsDefinition) -> dg.AssetsDefinition:
    """The run asset's description, plus how to rerun one of its cells from the UI."""
    name = assets_def.key.path[-1]
    [hinted] = dg.map_asset_specs(
        lambda spec: spec.replace_attributes(description=f"{spec.description or ''} {rerun_hint(wave.name, name)}"),
        [assets_def],
    )
    return hinted


def rerun_jobs(wave: WaveDef, run_assets: list[dg.AssetsDefinition]) -> list:
    return [
        dg.define_asset_job(
            rerun_job_name(wave.name, a.key.path[-1]),
            selection=[a.key],
            partitions_def=a.partitions_def,
            tags={RERUN_TAG: "true"},
            description=f"Runs the selected {a.key.path[-1]} partitions of {wave.name} again, as new attempts (tag {RERUN_TAG}=true): "
            "open Materialize, pick the partitions, launch. Each run calls the model again.",
        )
        for a in run_assets
    ]


def build_wave(wave: WaveDef, registry: Registry, scorer: str | None = None) -> WaveDefinitions:
    """Assets, checks and jobs of a wave. `scorer` overrides the derived scorer code version (tests)."""
    rulesets = [load_ruleset(registry, v) for v in wave.readings]
    if wave.headline_ruleset not in wave.registered_readings:
        raise ValueError(f"wave {wave.name}: headline ruleset {wave.headline_ruleset} is not among its readings")
    registered = [r for r in rulesets if r.version in wave.registered_readings]
    later = [r for r in rulesets if r.version in wave.later_readings]
    prereg, check = build_preregistration(wave, registry, rulesets)
    if wave.source == "import":
        baseline_runs, fault_runs = build_run_assets(wave, prereg.key)
    else:
        baseline_runs, fault_runs = (
            with_rerun_hint(wave, a) for a in build_live_run_assets(wave, registry, prereg.key)
        )
    # A later ruleset changes the code version of its own asset and the board, never the cells'.
    verdicts = build_cell_verdicts(
        wave, registry, registered, fault_runs.key, baseline_runs.key, scorer or scorer_version(registered)
    )
    readings = (
        [build_later_readings(wave, registry, later, verdicts.key, scorer or scorer_version(later))] if later else []
    )
    scored = [verdicts.key, *(a.key for a in readings)]
    (judge_verdicts, kappa_audit), kappa_checks = build_judging_assets(wave, registry, fault_runs.key)
    board_version = scorer or scorer_version(rulesets)
    board = build_board_assets(wave, registry, rulesets, scored, judge_verdicts.key, board_version)
    # A team's test double keeps no intent log: a project gets no instrument check (docs/own-pipeline.md).
    instrument = (
        [build_instrument_check(wave, rulesets, scored, board_version)]
        if wave.source == "live" and not wave.project
        else []
    )
    assets = [prereg, baseline_runs, fault_runs, verdicts, *readings, judge_verdicts, kappa_audit, *board, *instrument]
    jobs = rerun_jobs(wave, [baseline_runs, fault_runs]) if wave.source == "live" else []
    return WaveDefinitions(assets, [check, *kappa_checks], jobs)
