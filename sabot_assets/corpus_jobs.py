"""Corpus import and scoring as functions: the CLI's bodies, callable with any store and instance."""

from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from sabot.corpus import LIMITS, CorpusError, CorpusScan, scan
from sabot.registry import Registry, RegistryError, WaveDef
from sabot.store.db import connect
from sabot.store.landing import landed_digest, latest_import, write_import
from sabot.store.wave_replace import OrphanedRuns, Replaced, held_runs, orphan_message, orphaned_runs
from sabot_assets.materialize import Block, WaveRunner, blocks
from sabot_assets.settled import fingerprint, mark_settled, settled_by


@dataclass
class ImportResult:
    wave: WaveDef
    scan: CorpusScan
    blocks: list[Block]
    runs_materialized: bool
    runner: WaveRunner | None = field(repr=False)  # None: nothing was stale, nothing is to be materialized
    settled_by: str | None = None  # the board run that scored exactly this corpus, rules and code: nothing is stale
    replaced: Replaced | None = None  # what a replacing import removed
    registry: Registry | None = field(default=None, repr=False)


def import_corpus(
    registry: Registry,
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    store_path: Path,
    directory: Path,
    wave_name: str,
    progress=iter,
    replace: bool = False,
    scoring: bool = False,
    found: CorpusScan | None = None,
) -> ImportResult:
    """Validate every file, land them in one transaction, then materialize the run assets.

    A corpus whose files are byte-identical to what is already landed is not re-materialized. A wave
    holding runs of another corpus (another directory) is refused unless `replace`, which replaces the
    wave's runs, landing and verdicts in the landing's transaction. When `scoring` (and not
    `replace`), and a board run scored exactly this corpus, from this directory, under the same rules
    and code with nothing written since, nothing is materialized at all (`settled_import`).
    `found`: the caller's `scan_corpus` of `directory`, not made again.
    """
    wave, found = scan_corpus(registry, wave_name, directory) if found is None else (registry.wave(wave_name), found)
    if scoring and not replace:
        settled = settled_import(registry, defs.assets, store_path, wave, found)
        if settled is not None:
            return settled
    runner = WaveRunner(defs, wave, instance)
    spans = blocks(wave, {(f.probe.framework, f.probe.config, f.probe.task) for f in found.files})
    replaced = None
    with connect(store_path) as con:
        if not replace:
            refuse_another_corpus(con, store_path, wave.name, directory)
        unchanged = (
            not replace and landed_digest(con, wave.name) == found.digest() and runs_match_landing(con, wave.name)
        )
        if not unchanged:
            replaced = write_import(con, found, registry.content_hash, replace)
    runner.preregister()
    if not unchanged:
        for block in progress(spans):
            runner.runs(block)
    return ImportResult(wave, found, spans, not unchanged, runner, None, replaced, registry)


def scan_corpus(registry: Registry, wave_name: str, directory: Path) -> tuple[WaveDef, CorpusScan]:
    """The import wave and every file of `directory` validated: every refusal comes before the store is opened."""
    registry.require_registered()
    wave = registry.wave(wave_name)
    if wave.source != "import":
        raise RegistryError(f"wave {wave_name} is a live wave; only import waves read a corpus")
    return wave, scan(wave, directory, registry.field(LIMITS, "max_file_bytes"))


def settled_import(
    registry: Registry, assets, store_path: Path, wave: WaveDef, found: CorpusScan
) -> ImportResult | None:
    """What `corpus score` of `found` reports when nothing is stale: a board run scored exactly this
    corpus, from this directory, under the same rules and code, with nothing written since
    (sabot_assets.settled). Asked of the store alone: no Dagster instance, and `assets` may be the
    wave's own (`sabot_assets.waves.factory.build_wave`) rather than the whole definitions'."""
    board_run = settled_by(store_path, wave, _fingerprint(registry, assets, store_path, wave, found))
    return None if board_run is None else ImportResult(wave, found, [], False, None, board_run, None, registry)


def refuse_another_corpus(con, store_path: Path, wave: str, directory: Path) -> None:
    """Refuse an import that would leave runs of two corpora under one wave, or build on a store an
    earlier version left with runs whose landing is gone; both name the flag that replaces the wave."""
    orphans = orphaned_runs(con, wave)
    if orphans:
        raise OrphanedRuns(orphan_message(store_path, wave, orphans, directory))
    previous = latest_import(con, wave)
    if previous and held_runs(con, wave) and Path(previous["corpus_root"]).resolve() != Path(directory).resolve():
        raise CorpusError(
            f"wave {wave} holds {held_runs(con, wave)} run(s) imported from {previous['corpus_root']}, not {directory}: "
            f"import with --replace to replace the wave's runs, landing and verdicts, or under another wave name"
        )


def runs_match_landing(con, wave: str) -> bool:
    """Whether every landed run file is the stored run of its slot: an import whose run assets were
    cut off part way (a killed process) is materialized again, not taken as done."""
    unmatched = con.execute(
        "SELECT count(*) FROM corpus_files f WHERE f.wave = ? AND f.kind IN ('fault', 'baseline') AND NOT EXISTS "
        "(SELECT 1 FROM runs r WHERE r.wave = f.wave AND r.source_path = f.rel_path AND r.source_sha256 = f.sha256)",
        [wave],
    ).fetchone()[0]
    return unmatched == 0 and con.execute("SELECT count(*) FROM runs WHERE wave = ?", [wave]).fetchone()[0] > 0


def score_corpus(imported: ImportResult, progress=iter) -> None:
    """Materialize cell verdicts for every imported block, then the scoreboard and report; nothing
    when the import found nothing stale."""
    if imported.settled_by:
        return
    runner = imported.runner
    for block in progress(imported.blocks):
        runner.verdicts(block)  # judge verdicts here are the cached reference ones: no model call
    runner.kappa()
    board = runner.board()
    store_path = Path(runner.defs.resources["store"].database)
    print_ = _fingerprint(imported.registry, runner.defs.assets, store_path, imported.wave, imported.scan)
    mark_settled(runner.instance, store_path, imported.wave, board.run_id, print_)


def _fingerprint(registry: Registry, assets, store_path: Path, wave: WaveDef, found: CorpusScan) -> str:
    asked = {
        "corpus": found.digest(),
        "from": str(Path(found.root).resolve()),
    }  # another directory is refused, not settled
    return fingerprint(registry, assets, store_path, wave, asked, {})
