"""The registry: every file hashed and locked; an edit in place is named and blocks scoring."""

import json
import shutil

import dagster as dg
import pytest
from dagster_duckdb import DuckDBResource

from sabot.registry import DATA_DIR, Registry, RegistryError
from sabot_assets.definitions import build_definitions
from sabot_assets.materialize import MaterializationError, WaveRunner


@pytest.fixture
def data_copy(tmp_path):
    shutil.copytree(DATA_DIR, tmp_path / "data")
    return tmp_path / "data"


def test_the_committed_registry_matches_its_lock(registry):
    assert registry.lock_problems() == []
    assert set(registry.locked_hashes()) == set(registry.files)


def test_the_standard_is_all_there(registry):
    anchors = registry.doc("standard/anchors.v0.2.0.json")["anchors"]
    assert sum(len(ops) for ops in anchors.values()) == 30
    assert sum(len(a) for ops in anchors.values() for a in ops.values()) == 69
    assert registry.anchors("T2", "O1") == ("8,400", "4,800", "8400", "4800")  # thousands separators kept whole
    assert registry.doc("standard/exclusions.v0.1.3.json")["precedence"] == [
        "RUN_ERROR",
        "BASELINE_FAIL",
        "INJECTION_UNVERIFIED",
    ]
    assert registry.field("standard/kappa.v0.1.json", "bound") == 0.7
    assert registry.wave("public_wave1").seeds == registry.wave("public_wave2").seeds == (11, 12, 13, 14, 15)
    wave2 = registry.wave("public_wave2")
    carved = sum(wave2.is_carved_out(c) for c in _cells(wave2))
    assert carved == 75 and len(_cells(wave2)) - carved == 825


def _cells(wave):
    from sabot.matrix import Cell

    return [Cell(op, p) for p in wave.probes() for op in wave.operators]


def test_an_edited_file_is_named_and_cannot_be_relocked(data_copy):
    path = data_copy / "standard" / "anchors.v0.2.0.json"
    doc = json.loads(path.read_text())
    doc["anchors"]["T1"]["O1"].append("41.7")
    path.write_text(json.dumps(doc))
    edited = Registry(data_copy)
    assert [p.split(":")[0] for p in edited.lock_problems()] == ["standard/anchors.v0.2.0.json"]
    with pytest.raises(RegistryError, match="edited in place: standard/anchors.v0.2.0.json"):
        edited.write_lock()


def test_a_new_version_registers_alongside(data_copy):
    shutil.copy(data_copy / "rulesets" / "v0.2.1.json", data_copy / "rulesets" / "v0.2.2.json")
    reg = Registry(data_copy)
    assert reg.lock_problems() == ["rulesets/v0.2.2.json: not registered (run `sabot registry lock`)"]
    assert reg.write_lock() == ["rulesets/v0.2.2.json"]
    assert Registry(data_copy).lock_problems() == []


def test_the_blocking_preregistration_check_fails_on_an_edit(data_copy, tmp_path):
    reg = Registry(data_copy)
    defs = build_definitions(reg, DuckDBResource(database=str(tmp_path / "s.duckdb")))
    (data_copy / "seeds" / "wave2.json").write_text('{"seeds": [11, 12, 13, 14, 16]}')
    with dg.instance_for_test() as instance:
        # The preregistration asset is guarded like every asset: it refuses before its blocking check runs.
        with pytest.raises(
            MaterializationError,
            match=r"(?s)materializing preregistration failed .*seeds/wave2.json: edited after registration",
        ):
            WaveRunner(defs, reg.wave("public_wave2"), instance).preregister()
