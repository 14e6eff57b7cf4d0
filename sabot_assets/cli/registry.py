"""`sabot registry`: verify or register the standard as data."""

import sys

import click


@click.group()
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
@click.argument("project", required=False, type=click.Path(file_okay=False))
def registry_lock(project):
    """Register new data files, or a PROJECT folder (its mapping first, and only once `sabot project
    check` passes on it); a registered file never changes in place."""
    from sabot.registry import Registry, RegistryError
    from sabot_assets.cli.project import lock_project
    from sabot_assets.cli.targets import require_project

    if project:
        require_project(project)
    try:
        added = lock_project(project) if project else Registry().write_lock()
    except RegistryError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"registered {len(added)} new file(s)" + "".join(f"\n  {a}" for a in added))
