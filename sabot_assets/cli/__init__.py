"""The `sabot` command line, built on click (already a Dagster dependency).

Every command materializes through the same asset graph the UI shows, against the project's
Dagster instance and DuckDB store. Heavy imports happen inside commands, so `--help` stays fast.
"""

import gc
import os

import click

from sabot.debug import DEBUG_ENV, debugging
from sabot_assets.cli.common import expected_failures
from sabot_assets.cli.compare import compare
from sabot_assets.cli.corpus import corpus
from sabot_assets.cli.explain import explain, predictions
from sabot_assets.cli.project import init, project
from sabot_assets.cli.registry import registry
from sabot_assets.cli.verify import verify
from sabot_assets.cli.wave import wave


class _Sabot(click.Group):
    """An expected failure (a held store lock, a replay with nothing sound to replay, a refused
    input, a failed materialization) ends any command with one line naming what and where; its
    traceback only under --debug."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit):
            raise  # already one line (a refused argument: before the failure classes' imports, which take a second)
        except expected_failures() as exc:
            if debugging():
                raise
            raise click.ClickException(str(exc)) from exc
        finally:
            # Everything left is freed when the process exits: without this, the collector walks
            # Dagster's whole heap at interpreter shutdown, about a second after the output.
            gc.freeze()


@click.group(cls=_Sabot)
@click.option(
    "--debug",
    is_flag=True,
    help="Print Dagster's step failures and every traceback whole (default: one line per expected failure).",
)
def main(debug):
    """Sabot on Dagster: plant faults, score what the pipelines' own checks caught."""
    if debug:
        os.environ[DEBUG_ENV] = "1"  # read by the run processes too (a pipeline's own log goes to the terminal)


for command in (registry, corpus, wave, verify, explain, predictions, init, project, compare):
    main.add_command(command)
