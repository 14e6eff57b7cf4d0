"""`sabot corpus`: import a reference corpus and score it through the asset graph."""

import time
from pathlib import Path

import click

from sabot_assets.cli.common import Context, guarded, progress_bar, publish


REPLACE_HELP = "Replace what the wave holds from another corpus (its runs, landing and verdicts), in one transaction."


@click.group()
def corpus():
    """Reference corpora: import raw traces and score them through the asset graph."""


def _import(ctx: Context, directory: Path, wave_name: str, replace: bool, scoring: bool = False):
    from sabot.store.db import held
    from sabot_assets.constants import STORE_PATH
    from sabot_assets.corpus_jobs import import_corpus, scan_corpus, settled_import
    from sabot_assets.settled import own_assets

    wave, found = scan_corpus(ctx.registry, wave_name, directory)
    imported = None
    if scoring and not replace:  # asked of the store before the Dagster instance and the whole definitions are made
        imported = settled_import(ctx.registry, own_assets(ctx.registry, wave), STORE_PATH, wave, found)
    if imported is None:
        with held(STORE_PATH):  # the run assets' openings are cursors on one (sabot.store.db.held)
            imported = import_corpus(
                ctx.registry,
                ctx.defs(),
                ctx.instance(),
                STORE_PATH,
                directory,
                wave_name,
                progress_bar(f"{wave_name}: run assets"),
                replace,
                scoring,
                found,
            )
    found = imported.scan
    if imported.replaced:
        click.echo(imported.replaced.text(wave_name))
    state = "imported" if imported.runs_materialized else "unchanged since the last import of"
    click.echo(f"{wave_name}: {state} {len(found.files)} file(s) from {directory}")
    if imported.settled_by:
        click.echo(
            f"{wave_name}: nothing stale: the verdicts, scoreboard and report are those Dagster run {imported.settled_by} made "
            "from these files under the same rules and code; nothing materialized"
        )
    for path in found.missing:
        click.echo(f"  missing: {path}")
    if found.not_run:
        click.echo(f"  not run (baseline failed): {len(found.not_run)} fault run(s)")
    return imported


@corpus.command("import")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--wave", "wave_name", required=True, help="A registered import wave (data/waves/).")
@click.option("--replace", is_flag=True, help=REPLACE_HELP)
def corpus_import(directory, wave_name, replace):
    """Validate a corpus checkout and load its runs into the wave's run assets."""
    guarded(_import, Context(), directory, wave_name, replace)


@corpus.command("score")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--wave", "wave_name", required=True, help="A registered import wave (data/waves/).")
@click.option("--ruleset", default=None, help="Ruleset to report (default: the wave's headline ruleset).")
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write scoreboard rows and per-cell verdicts here.",
)
@click.option("--replace", is_flag=True, help=REPLACE_HELP)
def corpus_score(directory, wave_name, ruleset, json_out, replace):
    """Import, then materialize cell verdicts, scoreboard and report; print the scoreboard."""
    guarded(_score, Context(), directory, wave_name, ruleset, json_out, replace)


def _score(
    ctx: Context, directory: Path, wave_name: str, ruleset: str | None, json_out: Path | None, replace: bool = False
):
    from sabot.store.db import held
    from sabot_assets.constants import STORE_PATH
    from sabot_assets.corpus_jobs import score_corpus
    from sabot_assets.export import score_document

    started = time.perf_counter()
    wave = ctx.registry.wave(wave_name)
    ruleset = ruleset or wave.headline_ruleset
    if ruleset not in wave.readings:
        raise click.ClickException(f"wave {wave.name} is scored under {', '.join(wave.readings)}, not {ruleset!r}")
    imported = _import(ctx, directory, wave_name, replace, scoring=True)
    if not imported.settled_by:
        with held(STORE_PATH):  # every asset's opening is a cursor on one: about 30 openings in a cold score
            score_corpus(imported, progress_bar(f"{wave_name}: cell verdicts"))
    doc = score_document(STORE_PATH, wave, ruleset)
    publish(doc, json_out, started)
