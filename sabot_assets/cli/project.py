"""`sabot init` and the project forms of `wave run`, `registry lock` and `explain` (a team's own pipeline)."""

from pathlib import Path

import click

from sabot_assets.cli.common import guarded

SCAFFOLD = Path(__file__).resolve().parents[2] / "adapters" / "byo" / "scaffold"


def is_project(target) -> bool:
    return (Path(target) / "sabot" / "project.json").is_file()


def adopt_project(ctx, target: str) -> str:
    """When TARGET is a project folder, the context serves its registry and the wave is the project's."""
    if not is_project(target):
        return target
    from sabot.projects import ProjectRegistry

    ctx.registry = ProjectRegistry.from_dir(target)
    return ctx.registry.project.name


def landing_lines(store_path, wave) -> list[str]:
    """Per operator: how many fault runs landed, and why the others did not (INJECTION_UNVERIFIED)."""
    from sabot.store.db import connect
    from sabot.store.runs import read_runs

    keys = [(op, p.key) for op in wave.operators for p in wave.probes()]
    with connect(store_path, read_only=True) as con:
        runs = read_runs(con, wave.name, keys)
    lines = []
    for op in wave.operators:
        records = [r.record for (o, _), r in sorted(runs.items()) if o == op and r.record is not None]
        landed = sum(r.injection_verified for r in records)
        reasons = sorted({(r.extra.get("injection") or {}).get("why_not") or r.error or "no landing evidence" for r in records if not r.injection_verified})
        seam = next(((r.extra.get("injection") or {}).get("seam") for r in records), None)
        lines.append(f"  {op} ({seam} seam): landed {landed}/{len(records)}" + "".join(f"; INJECTION_UNVERIFIED: {why}" for why in reasons))
    return lines


@click.command("init")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--name", default=None, help="Project name (default: the folder's name).")
def init(directory: Path, name: str | None):
    """Scaffold a project folder for a team's own LangGraph pipeline: sabot/*.json beside its code."""
    guarded(_init, directory, name)


def _init(directory: Path, name: str | None):
    import re

    from sabot.registry import RegistryError

    name = name or re.sub(r"[^a-z0-9_]", "_", directory.resolve().name.lower())
    target = directory / "sabot"
    if target.exists():
        raise RegistryError(f"{target}: already exists; nothing written")
    target.mkdir(parents=True)
    written = []
    for template in sorted(SCAFFOLD.rglob("*")):
        if template.is_file():
            rel = template.relative_to(SCAFFOLD)
            dest = directory / rel
            if dest.exists():
                continue  # never overwrite the team's own files
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(template.read_text().replace("__NAME__", name))
            written.append(str(rel))
    click.echo(f"{directory}: scaffolded project {name!r}:" + "".join(f"\n  {w}" for w in written))
    click.echo(f"next: point sabot/project.json at your graph factory, write the mapping, then `sabot registry lock {directory}`")
