"""The `sabot` command line, built on click (already a Dagster dependency).

Every command materializes through the same asset graph the UI shows, against the project's
Dagster instance and DuckDB store. Heavy imports happen inside commands, so `--help` stays fast.
"""

import gc

import click

from sabot_assets.cli.compare import compare
from sabot_assets.cli.corpus import corpus
from sabot_assets.cli.explain import explain, predictions
from sabot_assets.cli.project import init, project
from sabot_assets.cli.registry import registry
from sabot_assets.cli.verify import verify
from sabot_assets.cli.wave import wave


class _Sabot(click.Group):
    """A held store lock, or a replay with nothing sound to replay, ends any command with one line
    naming what and where, never a traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except Exception as exc:
            if isinstance(exc, _one_line_errors()):
                raise click.ClickException(str(exc)) from exc
            raise
        finally:
            # Everything left is freed when the process exits: without this, the collector walks
            # Dagster's whole heap at interpreter shutdown, about a second after the output.
            gc.freeze()


def _one_line_errors() -> tuple[type, ...]:
    """The error classes shown as one line, from the modules already imported: a class whose module
    was never imported was never raised, and importing the store (duckdb, pandas) up front would cost
    a command that refuses its argument most of its second."""
    import sys

    db, recordings = sys.modules.get("sabot.store.db"), sys.modules.get("sabot.store.recordings")
    return ((db.StoreLocked,) if db else ()) + ((recordings.RecordingMissing, recordings.RecordingRefused) if recordings else ())


@click.group(cls=_Sabot)
def main():
    """Sabot on Dagster: plant faults, score what the pipelines' own checks caught."""


for command in (registry, corpus, wave, verify, explain, predictions, init, project, compare):
    main.add_command(command)
