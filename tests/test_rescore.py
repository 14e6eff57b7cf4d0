"""Changing a scorer rule re-materializes only what lies downstream of it."""

import shutil

import dagster as dg
import pytest
from dagster_duckdb import DuckDBResource

from sabot_assets.corpus_jobs import import_corpus, score_corpus
from sabot_assets.definitions import build_definitions
from tests.conftest import WAVE2_DIR, require_corpus

WAVE = "public_wave2"


def key(name):
    return dg.AssetKey([WAVE, name])


def materializations(instance, name) -> int:
    return len(instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=key(name)), limit=10_000).records)


def copy_slice(tmp_path):
    """One (framework, config, task) block of the wave-2 corpus: 5 baselines, 30 fault runs."""
    require_corpus()
    block = "harness/runs/wave2/langgraph/default/T1"
    shutil.copytree(WAVE2_DIR / "langgraph" / "default" / "T1", tmp_path / "corpus" / block)
    return tmp_path / "corpus"


@pytest.fixture
def slice_corpus(tmp_path):
    return copy_slice(tmp_path)


def test_a_ruleset_bump_rescores_only_verdicts_scoreboard_and_report(registry, slice_corpus, tmp_path):
    store_path = tmp_path / "store.duckdb"
    store = DuckDBResource(database=str(store_path))
    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        before = build_definitions(registry, store, scorer="verdicts-rules-A")
        score_corpus(import_corpus(registry, before, instance, store_path, slice_corpus, WAVE))
        runs_before = {n: materializations(instance, n) for n in ("fault_runs", "baseline_runs", "cell_verdicts")}
        # fault_runs: the 30 imported cells, and the wave's 75 carved-out cells recorded once at registration.
        assert runs_before == {"fault_runs": 30 + 75, "baseline_runs": 5, "cell_verdicts": 30}

        first = dg.evaluate_automation_conditions(defs=before, instance=instance)
        after = build_definitions(registry, store, scorer="verdicts-rules-B")
        tick = dg.evaluate_automation_conditions(defs=after, instance=instance, cursor=first.cursor)

        requested = {
            k.path[-1]
            for k in (
                key(n)
                for n in ("preregistration", "baseline_runs", "fault_runs", "cell_verdicts", "scoreboard", "report")
            )
            if tick.get_num_requested(k)
        }
        assert requested == {"cell_verdicts", "scoreboard", "report"}
        assert tick.get_num_requested(key("cell_verdicts")) == 30  # exactly the imported cells

        # Carry the request out the way the sensor would, then count what ran.
        imported = import_corpus(registry, after, instance, store_path, slice_corpus, WAVE)
        assert not imported.runs_materialized  # unchanged corpus: the run assets are not re-run
        score_corpus(imported)
        assert materializations(instance, "fault_runs") == runs_before["fault_runs"]
        assert materializations(instance, "baseline_runs") == runs_before["baseline_runs"]
        assert materializations(instance, "cell_verdicts") == 2 * runs_before["cell_verdicts"]
