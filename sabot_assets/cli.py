"""The `sabot` command line: import and score corpora, check and lock the registry.

Built on click (already a Dagster dependency). Every command materializes through the same asset
graph the UI shows, against the project's Dagster instance and DuckDB store.
"""

import json
import os
import sys
import time
from pathlib import Path

import click

from sabot_assets.constants import PROJECT_ROOT, VAR_DIR


def _instance_env() -> None:
    """Point Dagster at the project's instance (dagster.yaml at the root, storage under var/)."""
    os.environ.setdefault("DAGSTER_HOME", str(PROJECT_ROOT))
    os.environ.setdefault("SABOT_DAGSTER_STORAGE", str(VAR_DIR / "dagster"))
    os.environ.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")


class Context:
    """Lazily built pieces shared by the commands (Dagster imports are slow; `--help` stays fast)."""

    def __init__(self):
        from sabot.registry import Registry

        _instance_env()
        self.registry = Registry()

    def instance(self):
        import dagster as dg

        return dg.DagsterInstance.get()

    def defs(self):
        from sabot_assets.definitions import build_definitions

        return build_definitions(self.registry)


def _guarded(fn, *args):
    """Run a command body; the project's input errors become one clear line and exit status 1."""
    from judges.hard.acts import ScoringError
    from sabot.corpus import CorpusError
    from sabot.registry import RegistryError
    from sabot.trace import TraceError
    from sabot_assets.materialize import MaterializationError

    try:
        return fn(*args)
    except (CorpusError, RegistryError, TraceError, ScoringError, MaterializationError) as exc:
        raise click.ClickException(str(exc)) from exc


@click.group()
def main():
    """Sabot on Dagster: plant faults, score what the pipelines' own checks caught."""


@main.group()
def registry():
    """The standard as data under data/: verify or register it."""


@registry.command("check")
def registry_check():
    """Verify that every registry file still hashes to its registration."""
    from sabot.registry import Registry

    problems = Registry().lock_problems()
    for p in problems:
        click.echo(f"registry: {p}", err=True)
    if problems:
        sys.exit(1)
    click.echo(f"registry ok: {len(Registry().files)} files, sha256 {Registry().content_hash}")


@registry.command("lock")
def registry_lock():
    """Register new data files (a registered file can never be changed in place)."""
    from sabot.registry import Registry, RegistryError

    try:
        added = Registry().write_lock()
    except RegistryError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"registered {len(added)} new file(s)" + "".join(f"\n  {a}" for a in added))


@main.group()
def corpus():
    """Reference corpora: import raw traces and score them through the asset graph."""


def _bar(label):
    def progress(blocks):
        with click.progressbar(blocks, label=label, item_show_func=lambda b: b and f"{b.framework}/{b.config} {b.first_task}-{b.last_task}") as bar:
            yield from bar

    return progress


def _import(ctx: Context, directory: Path, wave_name: str):
    from sabot_assets.constants import STORE_PATH
    from sabot_assets.corpus_jobs import import_corpus

    imported = import_corpus(ctx.registry, ctx.defs(), ctx.instance(), STORE_PATH, directory, wave_name, _bar(f"{wave_name}: run assets"))
    found = imported.scan
    state = "imported" if imported.runs_materialized else "unchanged since the last import of"
    click.echo(f"{wave_name}: {state} {len(found.files)} file(s) from {directory}")
    for path in found.missing:
        click.echo(f"  missing: {path}")
    if found.not_run:
        click.echo(f"  not run (baseline failed): {len(found.not_run)} fault run(s)")
    return imported


@corpus.command("import")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--wave", "wave_name", required=True, help="A registered import wave (data/waves/).")
def corpus_import(directory, wave_name):
    """Validate a corpus checkout and load its runs into the wave's run assets."""
    _guarded(_import, Context(), directory, wave_name)


@corpus.command("score")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--wave", "wave_name", required=True, help="A registered import wave (data/waves/).")
@click.option("--ruleset", default=None, help="Ruleset to report (default: the wave's headline ruleset).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), help="Write scoreboard rows and per-cell verdicts here.")
def corpus_score(directory, wave_name, ruleset, json_out):
    """Import, then materialize cell verdicts, scoreboard and report; print the scoreboard."""
    _guarded(_score, Context(), directory, wave_name, ruleset, json_out)


def _score(ctx: Context, directory: Path, wave_name: str, ruleset: str | None, json_out: Path | None):
    from sabot_assets.constants import STORE_PATH
    from sabot_assets.corpus_jobs import score_corpus
    from sabot_assets.export import score_document, scoreboard_text

    started = time.perf_counter()
    wave = ctx.registry.wave(wave_name)
    ruleset = ruleset or wave.headline_ruleset
    if ruleset not in wave.readings:
        raise click.ClickException(f"wave {wave.name} is scored under {', '.join(wave.readings)}, not {ruleset!r}")
    imported = _import(ctx, directory, wave_name)
    score_corpus(imported, _bar(f"{wave_name}: cell verdicts"))
    doc = score_document(STORE_PATH, wave, ruleset)
    click.echo(scoreboard_text(doc))
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n")
        click.echo(f"wrote {json_out}")
    click.echo(f"done in {time.perf_counter() - started:.1f} s")


@main.group()
def wave():
    """Live waves: real framework runs against the model endpoint (the scripted model by default)."""


@wave.command("run")
@click.argument("name")
@click.option("--framework", "frameworks", multiple=True, help="Limit to these frameworks (repeatable).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), help="Write scoreboard rows and per-cell verdicts here.")
def wave_run(name, frameworks, json_out):
    """Run a registered live wave (e.g. `demo`), score it and print its scoreboard."""
    _guarded(_wave, Context(), name, frameworks, json_out)


def _wave(ctx: Context, name: str, frameworks, json_out: Path | None):
    from adapters.endpoint import provider_from_env
    from sabot_assets.constants import STORE_PATH
    from sabot_assets.export import score_document, scoreboard_text
    from sabot_assets.wave_jobs import run_wave

    started = time.perf_counter()
    models = ctx.registry.doc("standard/models.v0.1.1.json")
    endpoint = provider_from_env(models["pipeline_model"], models["o4_downgrade_model"])
    click.echo(f"{name}: model endpoint: {endpoint.label if endpoint else 'simulation (scripted model on 127.0.0.1)'}")
    result = run_wave(ctx.registry, ctx.defs(), ctx.instance(), name, frameworks or None, _bar(f"{name}: runs and verdicts"))
    for reason in result.skipped:
        click.echo(f"  skipped {reason}")
    wave_def = ctx.registry.wave(name)
    doc = score_document(STORE_PATH, wave_def, wave_def.headline_ruleset)
    click.echo(scoreboard_text(doc))
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n")
        click.echo(f"wrote {json_out}")
    click.echo(f"done in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
