"""Running a live wave (or a slice of it) through the asset graph."""

from dataclasses import dataclass

import dagster as dg

from adapters.runner import PIPELINES
from sabot.registry import Registry, RegistryError
from sabot_assets.materialize import Block, WaveRunner


@dataclass
class WaveRun:
    wave: str
    rows: list[tuple[str, str]]
    skipped: list[str]  # frameworks not run, with the reason


def run_wave(registry: Registry, defs: dg.Definitions, instance: dg.DagsterInstance, wave_name: str, frameworks=None, progress=iter) -> WaveRun:
    """Baselines and fault runs block by block (one framework, config and task at a time), then the board."""
    registry.require_registered()
    wave = registry.wave(wave_name)
    if wave.source != "live":
        raise RegistryError(f"wave {wave_name} is filled by import; use `sabot corpus score`")
    wanted = list(frameworks or wave.frameworks)
    unknown = [f for f in wanted if f not in wave.frameworks]
    if unknown:
        raise RegistryError(f"wave {wave_name} has no framework(s) {', '.join(unknown)}")
    runnable = [f for f in wanted if f in PIPELINES]
    skipped = [f"{f}: no adapter yet" for f in wanted if f not in PIPELINES]
    runner = WaveRunner(defs, wave, instance)
    runner.preregister()
    blocks = [Block(fw, cfg, task, task) for fw in runnable for cfg in wave.configs for task in wave.tasks]
    for block in progress(blocks):
        runner.runs(block)
        runner.verdicts(block)
    runner.kappa()
    runner.board()
    return WaveRun(wave.name, [(fw, cfg) for fw in runnable for cfg in wave.configs], skipped)
