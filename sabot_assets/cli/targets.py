"""What a command's TARGET names: a project folder (a path) or a registered wave (a name), told apart
at once, before Dagster is imported or any store is created.

An argument that contains a "/" or exists on disk is a path, so a project: a missing, empty or
non-project folder is refused in one line with the near folders (difflib, the standard library's
fuzzy match). Anything else is a wave name, checked against the registered waves the same way.
A refusal never advises creating a project under a name it could not find without saying that
nothing is there.
"""

import difflib
import os
from pathlib import Path

import click

PROJECT_FILE = Path("sabot") / "project.json"  # sabot.projects.PROJECT_DIR / project.json, without importing it


class TargetError(click.ClickException):
    """A TARGET that names no project folder and no registered wave (one line, exit status 1)."""


def looks_like_path(target: str) -> bool:
    return "/" in target or os.sep in target or Path(target).exists()


def is_project(target) -> bool:
    return (Path(target) / PROJECT_FILE).is_file()


def _near(name: str, candidates: list[str]) -> list[str]:
    return difflib.get_close_matches(name, sorted(set(candidates)), n=3, cutoff=0.6)


def _nearby_folders(path: Path) -> list[Path]:
    """The folders beside `path` (in its parent, when that exists), projects first."""
    parent = path.parent if str(path.parent) else Path(".")
    try:
        folders = [p for p in parent.iterdir() if p.is_dir() and not p.name.startswith(".") and p != path]
    except OSError:
        return []
    return sorted(folders, key=lambda p: (not is_project(p), p.name))


def _did_you_mean(target: str) -> str:
    path = Path(target)
    folders = _nearby_folders(path)
    close = _near(path.name, [p.name for p in folders])
    if not close:
        projects = [p for p in folders if is_project(p)]
        return f"; project folders beside it: {', '.join(_shown(target, p) for p in projects)}" if projects else ""
    return f"; did you mean {' or '.join(_shown(target, path.parent / c) for c in close)}?"


def _shown(asked: str, found: Path) -> str:
    """A near folder spelled the way the user spelled theirs (./x stays ./x)."""
    text = str(found)
    return f"./{text}" if asked.startswith("./") and not text.startswith(("./", "/")) else text


def require_project(target: str) -> Path:
    """The project folder TARGET names, or a one-line refusal saying what is (not) there."""
    path = Path(target)
    if is_project(path):
        return path
    if not path.exists():
        raise TargetError(
            f"{target}: no such folder{_did_you_mean(target)} (nothing is there; `sabot init {target}` would "
            "scaffold a new project at that path)"
        )
    if not path.is_dir():
        raise TargetError(f"{target}: a file, not a project folder{_did_you_mean(target)}")
    if not any(path.iterdir()):
        raise TargetError(
            f"{target}: an empty folder, not a project (no {PROJECT_FILE}){_did_you_mean(target)}; "
            f"`sabot init {target}` scaffolds a project in it"
        )
    raise TargetError(
        f"{target}: not a project folder (no {PROJECT_FILE}){_did_you_mean(target)}; "
        f"`sabot init {target}` adds one beside the code already there"
    )


def registered_waves() -> list[str]:
    """The registered wave names, from the file names under data/waves (no registry parse needed)."""
    from sabot_assets.constants import PROJECT_ROOT

    return sorted(p.stem for p in (PROJECT_ROOT / "data" / "waves").glob("*.json"))


def resolve(target: str) -> str:
    """TARGET as given, once it names a project folder or a registered wave; else a one-line refusal."""
    if looks_like_path(target):
        require_project(target)
        return target
    waves = registered_waves()
    if target in waves:
        return target
    projects_here = [p.name for p in _nearby_folders(Path(target)) if is_project(p)]  # a folder meant, without its ./
    close = [repr(c) for c in _near(target, waves)] + [f"./{c}" for c in _near(target, projects_here)]
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise TargetError(
        f"{target!r}: no registered wave of that name and no folder of that name here; {hint}"
        f"registered waves: {', '.join(waves)} (a project folder is given as a path, e.g. ./{target})"
    )
