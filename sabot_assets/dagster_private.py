"""The one place this project reaches past Dagster's public API (pinned dagster 1.13.27), and why.

The registry guard (`sabot_assets.guard`) must run before every asset's step, on every path that
launches it (UI, sensor, backfill). Dagster has no public hook that runs before a step (its hooks
run after it), so the guard rebuilds each asset's op around a wrapper of the op's function. Building
the op (`dg.op`) and the asset (`dg.AssetsDefinition`) uses the public constructors; three reads have
no public form and are made here only:

- an op's Python function: `OpDefinition.compute_fn.decorated_fn`;
- an op's own code version: `OpDefinition._version` (the public `version` is deprecated);
- what an asset was built from: `AssetsDefinition.get_attributes_dict()`, the dictionary Dagster's
  own `with_attributes` hands back to the constructor.

`tests/test_dagster_private.py` pins what each one returns and that a rebuilt asset equals the
original in everything but its function: a Dagster release that changes one fails there, by name,
instead of letting an asset run unguarded or changed.
"""

import inspect
import warnings
from collections.abc import Callable

import dagster as dg


def op_function(op: dg.OpDefinition) -> Callable:
    """The Python function an op runs (what `@dg.op` or `@dg.asset` decorated)."""
    return op.compute_fn.decorated_fn


def op_code_version(op: dg.OpDefinition) -> str | None:
    return op._version


def asset_attributes(asset: dg.AssetsDefinition) -> dict:
    """Everything the asset was built from, as `dg.AssetsDefinition(**...)` takes it."""
    return asset.get_attributes_dict()


def with_function(asset: dg.AssetsDefinition, fn: Callable) -> dg.AssetsDefinition:
    """The same op-backed asset, running `fn` instead of its function. `fn` must keep the function's
    signature (`functools.wraps`): Dagster reads it to decide what to pass (context, resources)."""
    op = asset.op
    # `dg.op` reads resources and config from the function's parameters again; it takes as arguments
    # only the ones the function does not name (it refuses a resource named both ways).
    parameters = set(inspect.signature(fn).parameters)
    rebuilt = dg.op(
        name=op.name,
        ins=op.ins,
        out=op.outs,
        description=op.description,
        config_schema=None if "config" in parameters else op.config_schema,
        required_resource_keys=op.required_resource_keys - parameters,
        tags=op.tags,
        retry_policy=op.retry_policy,
        code_version=op_code_version(op),
        pool=op.pool,
    )(fn)
    with warnings.catch_warnings():  # the beta parameters passed back unchanged, as Dagster's own rebuild silences them
        warnings.simplefilter("ignore", dg.BetaWarning)
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return dg.AssetsDefinition(**{**asset_attributes(asset), "node_def": rebuilt})
