"""The registry check on every path that scores: the CLI, UI materializations, sensor ticks, backfills.

The command line refuses an edited registered file before it starts. Inside Dagster, every asset
of the definitions is guarded where it is defined once, in `build_definitions` (`guard_assets`):
its compute function first checks that the registry, as the definitions loaded it and as it is on
disk now, is the registered one (one read and hash per data file, about a millisecond), so a run
launched from the UI, by the `rescore` sensor or by a backfill cannot score under rules that are not
the registered ones, and an asset added later cannot forget the check. A project's registration
and the standard's are checked against the ones the store pinned (`sabot.project_registry.pin_registration`,
`sabot.registry.pin_standard`): an edited rule with an edited lock is refused by every asset, naming the lock.
A pin found to hold is not looked up again by this process for the same registry and store (the
registry check above still runs every time, so a registry edited since loading is still refused).
"""

import functools

import dagster as dg

from sabot.registry import Registry, RegistryError
from sabot.store.db import StoreLocked
from sabot_assets.dagster_private import op_function, with_function
from sabot_assets.resources import store_connection

GUARDED = "__sabot_registry_guarded__"
_PINS_HELD: set[tuple[str, str]] = set()  # (store database, registry content hash) whose pin this process checked


def require_registered(registry: Registry, store=None) -> None:
    """Fail the step, writing nothing, with the message the command line gives; with the store, also
    where it pinned another registration of the rules (a project's)."""
    try:
        registry.require_still_registered()
        if store is not None and (store.database, registry.content_hash) not in _PINS_HELD:
            registry.require_pinned(lambda: store_connection(store))
            _PINS_HELD.add((store.database, registry.content_hash))
    except (RegistryError, StoreLocked) as exc:  # a held store lock is said in one line too, naming its holder
        raise dg.Failure(description=str(exc), allow_retries=False) from exc


def guard_assets(assets: list[dg.AssetsDefinition], registry: Registry, store) -> list[dg.AssetsDefinition]:
    """The same assets, each refusing to run under a registry that no longer matches its
    registration, or (a project's) that differs from the one `store` pinned."""
    return [_guarded(asset, registry, store) for asset in assets]


def is_guarded(asset: dg.AssetsDefinition) -> bool:
    if isinstance(asset.node_def, dg.GraphDefinition):  # a graph-backed asset: every step checks for itself
        return all(getattr(op_function(op), GUARDED, False) for op in asset.node_def.iterate_op_defs())
    return getattr(op_function(asset.op), GUARDED, False)


def _guarded(asset: dg.AssetsDefinition, registry: Registry, store) -> dg.AssetsDefinition:
    if isinstance(asset.node_def, dg.GraphDefinition):
        # Rebuilding a graph's ops would mean rebuilding the graph: its ops call require_registered
        # themselves (sabot_assets.waves.live_runs) and are marked so; one that does not is refused.
        if not is_guarded(asset):
            raise TypeError(
                f"graph-backed asset {asset.key.to_user_string()} has a step that does not check the registry (sabot_assets.guard)"
            )
        return asset
    # Dagster has no pre-step hook, so the op is rebuilt around a wrapper of its function (the only
    # reach past Dagster's public API, isolated in sabot_assets.dagster_private). The wrapper keeps the
    # function's signature (functools.wraps), which is how Dagster decides what to pass it (context,
    # resources), so the asset behaves exactly as before after the check.
    compute = op_function(asset.op)

    @functools.wraps(compute)
    def checked(*args, **kwargs):
        require_registered(registry, store)  # before anything is read or written
        return compute(*args, **kwargs)

    setattr(checked, GUARDED, True)
    return with_function(asset, checked)
