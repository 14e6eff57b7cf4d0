"""Snapshot of every asset spec: a code-version bump or a wiring change is a reviewed diff.

Regenerate after an intended change with `SABOT_UPDATE_SNAPSHOTS=1 pytest tests/test_asset_specs.py`.
"""

import json
import os
from pathlib import Path

import pytest
from dagster_duckdb import DuckDBResource

from sabot_assets.definitions import build_definitions

SNAPSHOT = Path(__file__).with_name("snapshots") / "asset_specs.json"


def describe(spec) -> dict:
    partitions = spec.partitions_def
    return {
        "group": spec.group_name,
        "code_version": spec.code_version,
        "deps": sorted("/".join(d.asset_key.path) for d in spec.deps),
        "partitions": None
        if partitions is None
        else f"{type(partitions).__name__}({len(partitions.get_partition_keys())})",
        "automated": spec.automation_condition is not None,
        "tags": {k: v for k, v in sorted(spec.tags.items()) if not k.startswith("dagster/kind")},
    }


def test_asset_specs_match_the_snapshot(registry, tmp_path):
    defs = build_definitions(registry, DuckDBResource(database=str(tmp_path / "s.duckdb")))
    current = {"/".join(s.key.path): describe(s) for s in defs.resolve_all_asset_specs()}
    recorded = json.loads(SNAPSHOT.read_text())
    if os.environ.get("SABOT_UPDATE_SNAPSHOTS") and current != recorded:
        SNAPSHOT.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
        pytest.fail(f"{SNAPSHOT} regenerated: review the diff, then run again without SABOT_UPDATE_SNAPSHOTS")
    assert current == recorded, "asset specs changed: review, then regenerate the snapshot"


def test_run_assets_are_never_automated(registry, tmp_path):
    defs = build_definitions(registry, DuckDBResource(database=str(tmp_path / "s.duckdb")))
    for spec in defs.resolve_all_asset_specs():
        if spec.key.path[-1] in ("baseline_runs", "fault_runs", "preregistration"):
            assert spec.automation_condition is None, spec.key
