"""Errors crossing the run's process boundary as data: a client library's exception that cannot be
unpickled no longer breaks the pool (its neighbours finish and are kept), the user reads its message,
file and cell instead of an empty `_RemoteTraceback:` line, and a finished attempt is never relabelled
RUN_ERROR because another process died."""

import time
from concurrent.futures.process import BrokenProcessPool

import httpx
import openai
import pytest

from adapters.pool import RunFailed, crashed_attempt, run_many
from adapters.runner import RunSpec
from sabot import runroot
from sabot.matrix import Probe
from sabot.runroot import Identity
from sabot.trace import RunRecord


def _refused_by_the_provider(item: str):
    if item == "bad":
        time.sleep(1.0)  # its neighbours finish first: they must be yielded, not broken
        response = httpx.Response(404, request=httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions"))
        raise openai.NotFoundError("The model `gpt-5.6-luna` does not exist", response=response, body=None)
    return f"{item} done"


def test_an_unpicklable_client_error_reaches_the_parent_as_text_and_its_neighbours_finish():
    with pytest.raises(
        TypeError, match="missing 2 required keyword-only arguments"
    ):  # the premise: it cannot be unpickled
        import pickle

        response = httpx.Response(404, request=httpx.Request("POST", "http://x"))
        pickle.loads(pickle.dumps(openai.NotFoundError("m", response=response, body=None)))
    finished = []
    with pytest.raises(RunFailed) as caught:
        for _item, result, _ in run_many(_refused_by_the_provider, ["good-1", "bad", "good-2"], concurrency=3):
            finished.append(result)
    assert sorted(finished) == ["good-1 done", "good-2 done"]
    failure = caught.value
    assert str(failure).startswith(
        "bad: NotFoundError: The model `gpt-5.6-luna` does not exist (at test_run_errors_as_data.py:"
    )
    assert failure.__cause__ is None, "no remote traceback chained on: it printed as an empty _RemoteTraceback line"
    assert "_refused_by_the_provider" in failure.trace  # the whole trace is kept on the error for a log


def test_a_finished_attempt_is_kept_when_its_pool_breaks_afterwards(tmp_path):
    spec = RunSpec("demo", 2, "langgraph", "default", "T1", "O1", 11)
    probe = Probe("langgraph", "default", "T1", 11)
    identity = Identity("runner-v1", "simulation (scripted model on 127.0.0.1)", "gpt-5.6-terra", "gpt-5.6-luna", 2)
    directory = runroot.allocate(tmp_path, "demo", probe, "O1")
    record = RunRecord(spec.run_id, "langgraph", "default", "T1", "O1", 11, (), None, False, False, None, extra={})
    runroot.write_attempt(directory, "demo", record, "complete", identity, [], "dagster-run-1", runroot.started_now())
    kept = crashed_attempt(spec, BrokenProcessPool("another worker died"), tmp_path, identity, "dagster-run-1")
    assert kept == directory and runroot.read_attempt(tmp_path, kept).outcome == "complete"
    assert len(runroot.finished_attempts(tmp_path, "demo", probe, "O1")) == 1
    # An attempt of an earlier Dagster run is not this run's: the crash is recorded as its own attempt.
    crashed = crashed_attempt(spec, BrokenProcessPool("worker died"), tmp_path, identity, "dagster-run-2")
    assert crashed != directory and runroot.read_attempt(tmp_path, crashed).outcome == "run_error"
