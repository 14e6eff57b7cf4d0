"""The fork server preloads the pipelines a wave runs, and more only when a wave needs them (adapters.pool)."""

import sys

from adapters import pool

PIPELINE_MODULES = ("adapters.autogen_pipeline", "adapters.crewai_pipeline", "adapters.langgraph_pipeline")


def preloaded(_item) -> list[str]:
    """In a run's process: the pipelines it found imported, i.e. what its fork server preloaded."""
    return [m for m in PIPELINE_MODULES if m in sys.modules]


def _in_a_child() -> list[str]:
    [(_, loaded, _)] = pool.run_many(preloaded, ["probe"], concurrency=1)
    return loaded


def test_a_wave_of_one_framework_preloads_only_its_pipeline_and_a_later_one_adds_its_own():
    assert pool.stop_fork_server()  # no pool is open: whatever this process ran before is stopped
    try:
        pool.start_fork_server(["langgraph"])
        assert _in_a_child() == ["adapters.langgraph_pipeline"]  # crewai's ~3 s import not on the first run's path
        pool.start_fork_server(["langgraph"])  # already there: the same server
        pool.start_fork_server(["crewai"])  # restarted (no pool open) with both
        assert _in_a_child() == ["adapters.crewai_pipeline", "adapters.langgraph_pipeline"]
    finally:
        pool.start_fork_server()  # every pipeline again, for the tests that follow in this process
    assert _in_a_child() == list(PIPELINE_MODULES)


def test_a_pipeline_registered_as_an_object_is_preloaded_from_its_module(monkeypatch):
    from adapters.crewai_pipeline import CrewAIPipeline

    monkeypatch.setitem(pool.PIPELINES, "crewai", CrewAIPipeline)  # as a test that patches a pipeline leaves it
    assert "adapters.crewai_pipeline" in pool.preload(["crewai"])


def test_a_server_in_use_is_never_restarted_under_its_runs():
    assert pool.stop_fork_server()
    try:
        pool.start_fork_server(["autogen"])
        with pool._pool_open():  # a pool with runs in flight
            assert not pool.stop_fork_server()
            pool.start_fork_server(["crewai"])  # not restarted: its runs would die with it
            assert pool._Server.frameworks == {"autogen"}
    finally:
        pool.start_fork_server()
