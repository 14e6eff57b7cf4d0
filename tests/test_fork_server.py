"""The fork server has the confined server preload the pipelines a wave runs, and more only when a
wave needs them (adapters.pool, adapters.confined_server); the harness's side imports none of them."""

import json
import sys

from adapters import pool
from adapters.confined_run import pipeline_modules

PIPELINE_MODULES = ("adapters.autogen_pipeline", "adapters.crewai_pipeline", "adapters.langgraph_pipeline")


def preloaded(_item) -> tuple[list[str], list[str]]:
    """In a run's process: the pipelines its confined server was started to import (the last word of
    that server's command), and those imported here (none: pipelines run only in the sandbox)."""
    from adapters.confined_server import _Server

    asked = json.loads(_Server.process.args[-1])
    return [m for m in PIPELINE_MODULES if m in asked], [m for m in PIPELINE_MODULES if m in sys.modules]


def _in_a_child() -> list[str]:
    [(_, (loaded, here), _)] = pool.run_many(preloaded, ["probe"], concurrency=1)
    assert here == [], here
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
    assert "adapters.crewai_pipeline" in pipeline_modules(["crewai"])


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
