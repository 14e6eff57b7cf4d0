"""The standard's registration is pinned in the store like a project's: a rule edited together with
`data/registry.lock.json` passes the lock check, but every asset refuses it against a store that met
the registered rule, naming the lock and the file; a new dated file is pinned as it appears."""

import json
import shutil

import dagster as dg
import pytest
from dagster_duckdb import DuckDBResource

from sabot.registry import DATA_DIR, LOCK_NAME, Registry
from sabot.store.db import connect
from sabot_assets.definitions import build_definitions
from sabot_assets.materialize import MaterializationError, WaveRunner
from tests.registry_copy import add_one_anchor_ruleset

RULE = "standard/anchors.v0.2.0.json"


@pytest.fixture
def data_copy(tmp_path):
    shutil.copytree(DATA_DIR, tmp_path / "data")
    return tmp_path / "data"


def edit_rule_and_lock(root, rel: str = RULE) -> Registry:
    """What someone holding the code tree can do: edit a rule, then write its new hash into the lock."""
    path = root / rel
    doc = json.loads(path.read_text())
    doc["anchors"]["T1"]["O1"].append("41.7")
    path.write_text(json.dumps(doc))
    lock = json.loads((root / LOCK_NAME).read_text())
    lock["files"][rel] = Registry(root).files[rel].sha256
    (root / LOCK_NAME).write_text(json.dumps(lock, indent=1))
    edited = Registry(root)
    edited.require_registered()  # the lock alone no longer tells
    return edited


def store_rows(store) -> dict:
    with connect(store, read_only=True) as con:
        tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
        return {t: sorted(map(repr, con.execute(f'SELECT * FROM "{t}"').fetchall())) for t in tables}


def test_an_edited_rule_with_an_edited_lock_is_refused_by_every_asset_naming_the_lock(data_copy, tmp_path):
    store = tmp_path / "s.duckdb"
    with dg.instance_for_test() as instance:
        WaveRunner(
            build_definitions(Registry(data_copy), DuckDBResource(database=str(store))),
            Registry(data_copy).wave("demo"),
            instance,
        ).preregister()
        pinned = store_rows(store)
        assert RULE in repr(pinned["standard_registration"])
        edited = edit_rule_and_lock(data_copy)
        runner = WaveRunner(
            build_definitions(edited, DuckDBResource(database=str(store))), edited.wave("demo"), instance
        )
        for step in (runner.preregister, runner.board):
            with pytest.raises(MaterializationError) as refused:
                step()
            message = str(refused.value)
            assert f"data/{LOCK_NAME}: the standard's registration differs from the one this store pinned" in message, (
                message
            )
            assert f"{RULE}: registered as sha256 {edited.files[RULE].sha256[:12]}, but this store pinned" in message
    assert store_rows(store) == pinned  # nothing re-recorded


def test_a_new_dated_file_is_pinned_as_it_appears_and_a_fresh_store_pins_what_it_meets(data_copy, tmp_path):
    store = tmp_path / "s.duckdb"
    with dg.instance_for_test() as instance:
        WaveRunner(
            build_definitions(Registry(data_copy), DuckDBResource(database=str(store))),
            Registry(data_copy).wave("demo"),
            instance,
        ).preregister()
        added = add_one_anchor_ruleset(data_copy)
        WaveRunner(
            build_definitions(added, DuckDBResource(database=str(store))), added.wave("demo"), instance
        ).preregister()
        with connect(store, read_only=True) as con:
            assert {"rulesets/v0.2.0-x1.json", "standard/anchors.v0.2.0-x1.json"} <= {
                p for (p,) in con.execute("SELECT path FROM standard_registration").fetchall()
            }
        edited = edit_rule_and_lock(data_copy)
        fresh = tmp_path / "fresh.duckdb"  # a store that never met the old rule: it pins the new one
        WaveRunner(
            build_definitions(edited, DuckDBResource(database=str(fresh))), edited.wave("demo"), instance
        ).preregister()
