"""`sabot verify WAVE|BUNDLE`: re-derive every published number of a wave and compare; for a bundle,
also say who made it (only as far as a key or hash the verifier holds shows) and under which rules."""

from pathlib import Path

import click

from sabot_assets.cli.common import Context, guarded


@click.command()
@click.argument("target")
@click.option(
    "--key",
    "key",
    default=None,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="The exporter's published Ed25519 public key (PEM): the bundle must be signed by it.",
)
@click.option(
    "--expect",
    default=None,
    metavar="SHA256",
    help="The bundle's published manifest SHA-256: the bundle must be that one.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 1 unless the bundle is authenticated (--key or --expect) and scored under your registered rules.",
)
def verify(target, key, expect, strict):
    """Re-derive every published number of a wave from its sealed evidence and the registered rules,
    and compare with what the store and its report say: TARGET is a wave of the project's store, or a
    project folder (its wave, with its registration checked against the store's pin), or a bundle
    directory written by `sabot wave export` (checked with no store and no model call).
    Exit status 1 naming the first difference.

    A bundle's consistency does not say who made it: it is "signed by" a key only with --key, or the
    published one only with --expect; otherwise "consistent, not authenticated". Its rules are
    compared with your registered standard and each differing file named."""
    guarded(_verify, target, key, expect, strict)


def _verify(target: str, key: Path | None, expect: str | None, strict: bool):
    from sabot_assets.bundle_trust import NotAuthenticated, authenticate
    from sabot_assets.cli.project import adopt_project, is_project
    from sabot_assets.constants import STORE_PATH
    from sabot_assets.evidence import VerifyError, verify_wave
    from sabot_assets.evidence_bundle import MANIFEST, verify_bundle

    ctx = Context()
    bundle = Path(target)
    # A bundle is a directory with its manifest; one without, unless it names a wave, is refused naming it.
    is_bundle = not is_project(target) and (
        (bundle / MANIFEST).is_file() or (bundle.is_dir() and target not in ctx.registry.wave_names())
    )
    if not is_bundle and (key or expect or strict):
        raise VerifyError(
            f"{target}: --key, --expect and --strict are for a bundle directory; a store's waves are checked under the store's own key"
        )
    if is_project(target):  # a team's own pipeline: its wave, under its registered mapping
        name = adopt_project(ctx, target)
        click.echo(verify_wave(ctx.registry, STORE_PATH, name).line())
    elif not is_bundle:
        click.echo(verify_wave(ctx.registry, STORE_PATH, target).line())
    elif not (bundle / MANIFEST).is_file():
        click.echo(verify_bundle(bundle).line())  # refused, naming the missing manifest
    else:
        try:
            trust = authenticate(bundle, key, expect)  # first: a rewritten manifest is named as such
        except NotAuthenticated as exc:
            raise VerifyError(str(exc)) from None
        click.echo(verify_bundle(bundle).line())
        for line in trust.lines():
            click.echo(line)
        if strict and trust.strict_failure():
            raise VerifyError(trust.strict_failure())
