"""`sabot verify WAVE|BUNDLE`: re-derive every published number of a wave and compare."""

from pathlib import Path

import click

from sabot_assets.cli.common import Context, guarded


@click.command()
@click.argument("target")
def verify(target):
    """Re-derive every published number of a wave from its sealed evidence and the registered rules,
    and compare with what the store and its report say: TARGET is a wave of the project's store, or a
    bundle directory written by `sabot wave export` (checked with no store and no model call).
    Exit status 1 naming the first difference."""
    guarded(_verify, target)


def _verify(target: str):
    from sabot_assets.constants import STORE_PATH
    from sabot_assets.evidence import MANIFEST, verify_bundle, verify_wave

    if (Path(target) / MANIFEST).is_file():
        click.echo(verify_bundle(Path(target)).line())
    else:
        click.echo(verify_wave(Context().registry, STORE_PATH, target).line())
