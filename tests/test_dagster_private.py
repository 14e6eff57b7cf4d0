"""What `sabot_assets.dagster_private` relies on in Dagster, pinned: the three reads past the public
API return what the registry guard needs, and an asset rebuilt around a new function equals the
original in everything but that function. A Dagster release that changes one fails here, by name."""

import functools

import dagster as dg
import pytest

from sabot.registry import Registry
from sabot_assets.dagster_private import asset_attributes, op_code_version, op_function, with_function
from sabot_assets.quiet import beta_used_on_purpose
from sabot_assets.waves.factory import build_wave


def _op_properties(op: dg.OpDefinition) -> dict:
    return {
        "name": op.name,
        "ins": op.ins,
        "outs": op.outs,
        "description": op.description,
        "config_schema": op.config_schema.as_field().config_type.key,
        "required_resource_keys": op.required_resource_keys,
        "tags": op.tags,
        "retry_policy": op.retry_policy,
        "pool": op.pool,
        "code_version": op_code_version(op),
    }


def _attributes(asset: dg.AssetsDefinition) -> dict:
    attributes = asset_attributes(asset)
    return {**attributes, "specs": list(attributes["specs"])}  # a dict view compares by identity


def _wrapped(asset: dg.AssetsDefinition):
    original = op_function(asset.op)

    @functools.wraps(original)
    def fn(*args, **kwargs):
        fn.calls += 1
        return original(*args, **kwargs)

    fn.calls = 0
    return fn


def _every_option_asset():
    @dg.asset(
        key_prefix="w",
        name="every_option",
        deps=[dg.AssetKey(["w", "upstream"])],
        code_version="v7",
        partitions_def=dg.StaticPartitionsDefinition(["a", "b"]),
        op_tags={"team": "sabot"},
        pool="store",
        retry_policy=dg.RetryPolicy(max_retries=2),
        kinds={"duckdb"},
        metadata={"m": 1},
        group_name="w",
        automation_condition=dg.AutomationCondition.eager(),
        backfill_policy=dg.BackfillPolicy.single_run(),
        check_specs=[dg.AssetCheckSpec("fresh", asset=dg.AssetKey(["w", "every_option"]))],
        description="An asset with every option the project's assets use.",
    )
    def every_option(context: dg.AssetExecutionContext, store: dg.ResourceParam[str]):
        """What the op runs."""
        yield dg.MaterializeResult(metadata={"store": store, "partition": context.partition_key})
        yield dg.AssetCheckResult(passed=True, check_name="fresh")

    return every_option


def test_op_function_is_the_decorated_function_and_code_version_the_given_one():
    def plain(context: dg.AssetExecutionContext) -> None:
        return None

    asset = dg.asset(name="plain", code_version="v3")(plain)
    assert op_function(asset.op) is plain
    assert op_code_version(asset.op) == "v3"
    assert op_code_version(dg.asset(name="unversioned")(plain).op) is None


def test_asset_attributes_are_what_the_public_constructor_takes():
    asset = _every_option_asset()
    rebuilt = dg.AssetsDefinition(**asset_attributes(asset))
    assert _attributes(rebuilt) == _attributes(asset)


def _assert_same_but_function(asset: dg.AssetsDefinition, rebuilt: dg.AssetsDefinition, fn) -> None:
    assert op_function(rebuilt.op) is fn
    assert _op_properties(rebuilt.op) == _op_properties(asset.op)
    before, after = _attributes(asset), _attributes(rebuilt)
    assert after.pop("node_def") is rebuilt.op and before.pop("node_def") is asset.op
    assert after == before
    assert list(rebuilt.check_specs) == list(asset.check_specs)


def test_a_rebuilt_asset_differs_only_in_its_function_and_runs_it_with_the_same_arguments():
    asset = _every_option_asset()
    fn = _wrapped(asset)
    rebuilt = with_function(asset, fn)
    _assert_same_but_function(asset, rebuilt, fn)
    result = dg.materialize([rebuilt], partition_key="b", resources={"store": "the store"})
    assert result.success and fn.calls == 1
    [materialized] = result.get_asset_materialization_events()
    metadata = materialized.materialization.metadata
    assert metadata["store"].value == "the store" and metadata["partition"].value == "b"
    assert [c.passed for c in result.get_asset_check_evaluations()] == [True]


@pytest.mark.parametrize("wave", ["demo"])
def test_every_op_backed_asset_of_a_wave_rebuilds_unchanged(wave):
    registry = Registry()
    with beta_used_on_purpose():
        assets = build_wave(registry.wave(wave), registry).assets
    op_backed = [a for a in assets if not isinstance(a.node_def, dg.GraphDefinition)]
    assert len(op_backed) >= 5  # preregistration, verdicts, judging, scoreboard, report
    for asset in op_backed:
        fn = _wrapped(asset)
        _assert_same_but_function(asset, with_function(asset, fn), fn)
