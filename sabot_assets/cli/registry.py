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
    """Register new data files, or a PROJECT folder (its mapping first); a registered file never changes in place."""
    from sabot.registry import Registry, RegistryError

    try:
        added = _lock_project(project) if project else Registry().write_lock()
    except RegistryError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"registered {len(added)} new file(s)" + "".join(f"\n  {a}" for a in added))


def _lock_project(directory) -> list[str]:
    """Register a project folder and pin its registration in the store, before any run of it: the
    lock file can be edited with the mapping, the store's pin cannot (`sabot.projects`)."""
    from sabot.projects import Project, pin_registration
    from sabot.store.db import connect, transaction
    from sabot_assets.constants import STORE_PATH

    project = Project.load(directory)
    project.require_lockable()  # an edited registered file is refused before the store is opened
    with connect(STORE_PATH) as con, transaction(con):
        pin_registration(con, project, "registry lock")  # refuses a registration other than the one pinned
        return project.write_lock()  # what it writes is what was pinned: the same files, the same bytes
