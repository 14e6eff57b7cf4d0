"""A run asset never runs a cell another live process has claimed, and takes over a claim whose
Dagster run has ended (sabot_assets/waves/live_prepare.py, live_execute.py, live_settle.py).

Real Dagster (in-process), a real DuckDB store and the scripted model; the claims are the run
root's files, written as another host's step would write them.
"""

import threading

import dagster as dg
from dagster_duckdb import DuckDBResource

from sabot import runroot
from sabot.matrix import Cell
from sabot_assets.constants import NOT_LAUNCHED_KEY
from sabot_assets.definitions import build_definitions

HELD, ENDED = "O1|langgraph.default.T1.s11", "O3|langgraph.default.T1.s11"
ELSEWHERE = "elsewhere:4242"  # a process on another host: never judged gone from here
RELEASE_AFTER_S = 3.0


def test_a_cell_claimed_elsewhere_is_not_run_and_an_ended_run_s_claim_is_taken_over(registry, tmp_path):
    store = tmp_path / "sabot.duckdb"
    run_root = tmp_path / "runroot"
    defs = build_definitions(registry, DuckDBResource(database=str(store)))
    fault_runs = dg.AssetKey(["demo", "fault_runs"])
    held, ended = Cell.parse(HELD), Cell.parse(ENDED)

    def materialize(instance, key: str) -> dg.ExecuteInProcessResult:
        return dg.materialize(
            defs.assets,
            selection=[fault_runs],
            partition_key=key,
            instance=instance,
            resources=defs.resources,
            raise_on_error=False,
        )

    with dg.instance_for_test() as instance:
        # Held by a live process elsewhere (another command's run still in flight): not run here; the
        # settle step waits for it to let go, finds no run of it, and leaves the cell missing.
        assert runroot.claim(
            run_root, "demo", held.probe, held.operator, ELSEWHERE, "elsewhere", owner="another-run/execute"
        )
        letting_go = threading.Timer(
            RELEASE_AFTER_S, runroot.release_claim, (run_root, "demo", held.probe, held.operator, ELSEWHERE)
        )
        letting_go.start()
        first = materialize(instance, HELD)
        letting_go.join()
        assert first.success
        assert runroot.finished_attempts(run_root, "demo", held.probe, held.operator) == []  # never run here
        assert not [e for e in first.get_asset_materialization_events() if e.partition == HELD]
        observed = [
            e.event_specific_data.asset_observation.metadata
            for e in first.all_events
            if e.event_type_value == "ASSET_OBSERVATION"
        ]
        assert any(m.get(NOT_LAUNCHED_KEY) and m[NOT_LAUNCHED_KEY].value == 1 for m in observed)  # missing, said so

        # Held in the name of a Dagster run that has ended (a host that died, its run terminated): taken over and run once.
        assert runroot.claim(
            run_root, "demo", ended.probe, ended.operator, ELSEWHERE, "elsewhere", owner=f"{first.run_id}/execute"
        )
        second = materialize(instance, ENDED)
        assert second.success
        assert len(runroot.finished_attempts(run_root, "demo", ended.probe, ended.operator)) == 1
        assert [e.partition for e in second.get_asset_materialization_events()] == [ENDED]
        assert runroot.claim_holder(run_root, "demo", ended.probe, ended.operator) is None  # released once run
