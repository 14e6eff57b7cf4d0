"""Failures of a team's own code (its pipeline factory, test double or pass criterion), named plainly.

Such a failure is the team's to fix, not the platform's: the message names the file and line in
the project's folder where it happened and the error itself, and it crosses process boundaries as
that text (never as a live exception, whose remote traceback would arrive empty).
"""

import traceback
from pathlib import Path


class TeamCodeError(Exception):
    """The team's code failed: `str()` names what, the file and line in the project, and the error."""


def where_in(exc: BaseException, root: Path) -> str | None:
    """`file:line in function` of the innermost frame of `exc` (or what caused it) inside `root`."""
    root = Path(root).resolve()
    for error in (exc, exc.__cause__, exc.__context__):
        if error is None:
            continue
        if isinstance(error, SyntaxError) and error.filename and _inside(error.filename, root):
            return f"{_relative(error.filename, root)}:{error.lineno}"
        frames = [f for f in traceback.extract_tb(error.__traceback__) if _inside(f.filename, root)]
        if frames:
            return f"{_relative(frames[-1].filename, root)}:{frames[-1].lineno} in {frames[-1].name}"
    return None


def team_code_error(what: str, exc: BaseException, root: Path) -> TeamCodeError:
    """`what` (e.g. "pipeline factory refund_desk:build_graph") failed with `exc`, located in `root`."""
    where = where_in(exc, root)
    return TeamCodeError(f"{what} failed{f' at {where}' if where else ''}: {type(exc).__name__}: {exc}")


def _inside(filename: str, root: Path) -> bool:
    """A file of the team's own (a virtualenv kept inside the project is not the team's code)."""
    try:
        path = Path(filename).resolve()
    except (OSError, ValueError):
        return False
    return path.is_relative_to(root) and "site-packages" not in path.parts


def _relative(filename: str, root: Path) -> str:
    return Path(filename).resolve().relative_to(root).as_posix()
