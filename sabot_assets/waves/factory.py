"""One asset group per registered wave; the key prefix is the wave's name."""

import dagster as dg

from judges.hard.rulesets import load_ruleset
from sabot.registry import Registry, WaveDef
from sabot_assets.waves.board import build_board_assets
from sabot_assets.waves.instrument import build_instrument_check
from sabot_assets.waves.preregistration import build_preregistration
from sabot_assets.waves.judging import build_judging_assets
from sabot_assets.waves.live_runs import build_live_run_assets
from sabot_assets.waves.runs import build_run_assets
from sabot_assets.waves.verdicts import build_cell_verdicts, scorer_version


def build_wave(wave: WaveDef, registry: Registry, scorer: str | None = None) -> tuple[list, list]:
    """(assets, checks) of a wave. `scorer` overrides the derived scorer code version (tests)."""
    rulesets = [load_ruleset(registry, v) for v in wave.readings]
    if wave.headline_ruleset not in wave.readings:
        raise ValueError(f"wave {wave.name}: headline ruleset {wave.headline_ruleset} is not among its readings")
    scorer = scorer or scorer_version(rulesets)
    prereg, check = build_preregistration(wave, registry, rulesets)
    if wave.source == "import":
        baseline_runs, fault_runs = build_run_assets(wave, prereg.key)
    else:
        baseline_runs, fault_runs = build_live_run_assets(wave, registry, prereg.key)
    verdicts = build_cell_verdicts(wave, registry, rulesets, fault_runs.key, baseline_runs.key, scorer)
    (judge_verdicts, kappa_audit), kappa_checks = build_judging_assets(wave, registry, fault_runs.key)
    board = build_board_assets(wave, registry, rulesets, verdicts.key, judge_verdicts.key, scorer)
    instrument = [build_instrument_check(wave, rulesets, verdicts.key, scorer)] if wave.source == "live" else []
    return [prereg, baseline_runs, fault_runs, verdicts, judge_verdicts, kappa_audit, *board, *instrument], [check, *kappa_checks]
