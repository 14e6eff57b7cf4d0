"""The registry check on every path that scores: the CLI, UI materializations, sensor ticks, backfills.

The command line refuses an edited registered file before it starts; the scoring assets refuse it
again inside their runs (a few milliseconds: one read and hash per data file), so a run launched
from the UI or by the `rescore` sensor cannot score under rules that are not the registered ones.
"""

import dagster as dg

from sabot.registry import Registry, RegistryError


def require_registered(registry: Registry) -> None:
    """Fail the step, writing nothing, with the message the command line gives."""
    try:
        registry.require_still_registered()
    except RegistryError as exc:
        raise dg.Failure(description=str(exc), allow_retries=False) from exc
