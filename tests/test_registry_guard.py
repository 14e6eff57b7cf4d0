"""The registry check guards every path that scores, not only the command line: a Dagster
materialization (UI, sensor tick, backfill) after an edit to a registered file is refused with the
command line's message, and nothing stored moves."""

import dagster as dg
import pytest
from dagster_duckdb import DuckDBResource

from sabot.registry import Registry, RegistryError
from sabot.store.db import connect
from sabot_assets.corpus_jobs import import_corpus, score_corpus
from sabot_assets.definitions import build_definitions
from sabot_assets.materialize import MaterializationError, WaveRunner
from tests.registry_copy import copy_registry, edit_registered_file
from tests.test_rescore import WAVE, copy_slice, key, materializations

EDITED = "standard/anchors.v0.2.0.json: edited after registration"
SCORING = ("cell_verdicts", "scoreboard", "report")


def stored(store_path) -> tuple:
    with connect(store_path, read_only=True) as con:
        return (
            con.execute(
                "SELECT count(*), count(DISTINCT dagster_run_id) FROM cell_verdicts WHERE wave = ?", [WAVE]
            ).fetchone(),
            con.execute("SELECT count(*) FROM scoreboard_manifest WHERE wave = ?", [WAVE]).fetchone(),
        )


@pytest.fixture(scope="module")
def scored_copy(tmp_path_factory):
    """A scored slice under a registry copy (so a test can edit a registered file; see `edited`)."""
    tmp_path = tmp_path_factory.mktemp("guard")
    slice_corpus = copy_slice(tmp_path)
    root = copy_registry(tmp_path)
    registry = Registry(root)
    store_path = tmp_path / "store.duckdb"
    store = DuckDBResource(database=str(store_path))
    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        defs = build_definitions(registry, store)
        imported = import_corpus(registry, defs, instance, store_path, slice_corpus, WAVE)
        score_corpus(imported)
        yield root, registry, defs, store, store_path, instance, imported, slice_corpus


@pytest.fixture
def edited(scored_copy):
    """Edit a registered file of the copy for one test, then put its bytes back."""
    path = scored_copy[0] / "standard" / "anchors.v0.2.0.json"
    original = path.read_bytes()
    edit_registered_file(scored_copy[0])
    yield scored_copy
    path.write_bytes(original)


def cell_range(imported):
    return imported.blocks[0].cell_range(imported.wave)


def test_the_command_line_refuses_an_edited_file(edited):
    root, _, defs, _, store_path, instance, _, slice_corpus = edited
    with pytest.raises(RegistryError, match=EDITED):
        import_corpus(Registry(root), defs, instance, store_path, slice_corpus, WAVE)


def test_a_materialization_after_an_edit_is_refused(edited):
    root, _, _, store, store_path, instance, imported, _ = edited
    before, counts = stored(store_path), {n: materializations(instance, n) for n in SCORING}
    # The UI reloads its code location after the edit: the definitions now read the edited file.
    reloaded = WaveRunner(build_definitions(Registry(root), store), imported.wave, instance)
    for names, partitions in ((["cell_verdicts"], cell_range(imported)), (["scoreboard", "report"], None)):
        with pytest.raises(MaterializationError, match=EDITED):
            reloaded.run(names, partitions)
    assert stored(store_path) == before
    assert {n: materializations(instance, n) for n in SCORING} == counts


def test_definitions_loaded_before_the_edit_refuse_too(edited):
    # A long-lived process (the UI, the sensor daemon) still holds the rules it loaded before the edit.
    root, _, defs, _, store_path, instance, imported, _ = edited
    before = stored(store_path)
    with pytest.raises(MaterializationError, match=EDITED):
        WaveRunner(defs, imported.wave, instance).run(["cell_verdicts"], cell_range(imported))
    assert stored(store_path) == before


def test_what_the_rescore_sensor_requests_after_an_edit_is_refused(scored_copy):
    root, registry, defs, store, store_path, instance, _, _ = scored_copy
    first = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    path = root / "standard" / "anchors.v0.2.0.json"
    original = path.read_bytes()
    edit_registered_file(root)
    edited = build_definitions(Registry(root), store)
    tick = dg.evaluate_automation_conditions(defs=edited, instance=instance, cursor=first.cursor)
    requested = sorted(tick.get_requested_partitions(key("cell_verdicts")))
    assert len(requested) == 30  # the edit changed the rules' hash: every cell of the slice is requested
    before = stored(store_path)
    result = dg.materialize(
        [*edited.assets, *edited.asset_checks],
        selection=[key("cell_verdicts")],
        instance=instance,
        resources=edited.resources,
        partition_key=requested[0],
        raise_on_error=False,
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert EDITED in failure.step_failure_data.user_failure_data.description
    assert stored(store_path) == before
    path.write_bytes(original)


KAPPA = "standard/kappa.v0.1.json"


def all_rows(store_path) -> dict[str, int]:
    """Every table's row count: what a refused step must leave exactly as it was."""
    with connect(store_path, read_only=True) as con:
        tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
        return {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}


def test_every_asset_of_the_definitions_refuses_an_edited_registry(scored_copy):
    """Walks every asset the definitions hold (a new asset is walked too), launched as the UI or a
    sensor would launch it, after the edit a hostile reviewer made: the kappa bound set to -1.0."""
    root, _, defs, store, store_path, instance, _, _ = scored_copy
    path = root / KAPPA
    original = path.read_bytes()
    path.write_text(path.read_text().replace('"bound": 0.7', '"bound": -1.0'))
    try:
        before = all_rows(store_path)
        reloaded = build_definitions(Registry(root), store)  # the UI reloads its code location after the edit
        for loaded in (defs, reloaded):  # and a long-lived process holds the definitions it loaded before
            assert len(loaded.assets) > 20  # every wave's assets and the contrasts, not a sample
            job = loaded.resolve_implicit_global_asset_job_def()
            for asset in loaded.assets:
                partition = asset.partitions_def.get_partition_keys()[0] if asset.partitions_def else None
                result = job.execute_in_process(
                    asset_selection=[asset.key], partition_key=partition, instance=instance, raise_on_error=False
                )
                failure = next((e for e in result.all_events if e.is_step_failure), None)
                assert failure is not None, f"{asset.key.to_user_string()} ran under an edited registry"
                assert f"{KAPPA}: edited after registration" in failure.step_failure_data.user_failure_data.description
        assert all_rows(store_path) == before
    finally:
        path.write_bytes(original)
