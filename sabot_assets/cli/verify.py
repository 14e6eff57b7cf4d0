"""`sabot verify WAVE|BUNDLE`: re-derive every published number of a wave and compare."""

from pathlib import Path

import click

from sabot_assets.cli.common import Context, guarded


@click.command()
@click.argument("target")
def verify(target):
    """Re-derive every published number of a wave from its sealed evidence and the registered rules,
    and compare with what the store and its report say: TARGET is a wave of the project's store, or a
    project folder (its wave, with its registration checked against the store's pin), or a bundle
    directory written by `sabot wave export` (checked with no store and no model call).
    Exit status 1 naming the first difference."""
    guarded(_verify, target)


def _verify(target: str):
    from sabot_assets.cli.project import adopt_project, is_project
    from sabot_assets.constants import STORE_PATH
    from sabot_assets.evidence import MANIFEST, verify_bundle, verify_wave

    ctx = Context()
    if is_project(target):  # a team's own pipeline: its wave, under its registered mapping
        name = adopt_project(ctx, target)
        click.echo(verify_wave(ctx.registry, STORE_PATH, name).line())
        return
    bundle = Path(target)
    # A bundle is a directory with its manifest; one without, unless it names a wave, is refused naming it.
    if (bundle / MANIFEST).is_file() or (bundle.is_dir() and target not in ctx.registry.wave_names()):
        click.echo(verify_bundle(bundle).line())
    else:
        click.echo(verify_wave(ctx.registry, STORE_PATH, target).line())
