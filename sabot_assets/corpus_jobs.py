"""Corpus import and scoring as functions: the CLI's bodies, callable with any store and instance."""

from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from sabot.corpus import CorpusScan, scan
from sabot.registry import Registry, RegistryError, WaveDef
from sabot.store.db import connect
from sabot.store.landing import landed_digest, write_import
from sabot_assets.materialize import Block, WaveRunner, blocks


@dataclass
class ImportResult:
    wave: WaveDef
    scan: CorpusScan
    blocks: list[Block]
    runs_materialized: bool
    runner: WaveRunner = field(repr=False)


def import_corpus(registry: Registry, defs: dg.Definitions, instance: dg.DagsterInstance, store_path: Path, directory: Path, wave_name: str, progress=iter) -> ImportResult:
    """Validate every file, land them in one transaction, then materialize the run assets.

    A corpus whose files are byte-identical to what is already landed is not re-materialized.
    """
    registry.require_registered()
    wave = registry.wave(wave_name)
    if wave.source != "import":
        raise RegistryError(f"wave {wave_name} is a live wave; only import waves read a corpus")
    found = scan(wave, directory)
    with connect(store_path) as con:
        unchanged = landed_digest(con, wave.name) == found.digest() and con.execute(
            "SELECT count(*) FROM runs WHERE wave = ?", [wave.name]
        ).fetchone()[0] > 0
        if not unchanged:
            write_import(con, found, registry.content_hash)
    runner = WaveRunner(defs, wave, instance)
    runner.preregister()
    spans = blocks(wave, {(f.probe.framework, f.probe.config, f.probe.task) for f in found.files})
    if not unchanged:
        for block in progress(spans):
            runner.runs(block)
    return ImportResult(wave, found, spans, not unchanged, runner)


def score_corpus(imported: ImportResult, progress=iter) -> None:
    """Materialize cell verdicts for every imported block, then the scoreboard and report."""
    for block in progress(imported.blocks):
        imported.runner.verdicts(block)  # judge verdicts here are the cached reference ones: no model call
    imported.runner.kappa()
    imported.runner.board()
