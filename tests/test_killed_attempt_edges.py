"""The edges of finishing a killed attempt (sabot.exchange_journal.finish_killed), each met when a kill lands
in the instant a run starts or while its process is still dying: an attempt directory created but not yet
begun, a run process killed but not yet reaped, one that ends a moment after the next command looks."""

import json
import subprocess
import sys

import pytest

from sabot import exchange_journal, runroot
from sabot.exchange_journal import JOURNAL_FILE, ExchangeJournal, finish_killed
from sabot.matrix import Probe
from sabot.pricing import PriceTable
from sabot.runroot import Identity
from sabot.shared_state import host_label

PROBE = Probe("langgraph", "default", "T1", 11)
IDENTITY = Identity("runner-v1", "simulation (scripted model on 127.0.0.1)", "gpt-5.6-terra", "gpt-5.6-luna", 2)


@pytest.fixture
def prices(registry) -> PriceTable:
    return PriceTable.from_registry(registry)


def _begun_by(root, pid: int):
    """An attempt of slot O5 whose journal says process `pid` of this host runs it, one call answered."""
    directory = runroot.allocate(root, "demo", PROBE, "O5")
    journal = ExchangeJournal(directory).begin("run-o5", IDENTITY, runroot.started_now(), "dagster-run")
    header = json.loads((directory / JOURNAL_FILE).read_text())
    header["header"]["holder"] = f"{host_label()}:{pid}"
    (directory / JOURNAL_FILE).write_text(json.dumps(header) + "\n")
    journal.write(
        {"n": 1, "status": 200, "model": "gpt-5.6-terra", "usage": {"prompt_tokens": 10, "completion_tokens": 5}}
    )
    return directory


def _stopped(directory) -> dict:
    return json.loads((directory / runroot.META_FILE).read_text())


def test_an_attempt_killed_before_its_journal_began_is_removed_and_one_with_content_is_kept(tmp_path, prices):
    empty = runroot.allocate(tmp_path, "demo", PROBE, "O5")
    kept = runroot.allocate(tmp_path, "demo", PROBE, "O5")
    (kept / "pipeline.log").write_text("something began here\n")
    assert finish_killed(tmp_path, "demo", PROBE, "O5", prices) == []
    assert not empty.exists()  # nothing was made in it: no call, no answer
    assert (kept / "pipeline.log").exists() and not (kept / runroot.META_FILE).exists()


def test_an_attempt_whose_run_process_is_killed_but_not_yet_reaped_is_finished(tmp_path, prices):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        for _ in range(200):  # exited; this test, its parent, has not reaped it: a zombie
            with open(f"/proc/{child.pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            subprocess.run(["sleep", "0.05"])
        directory = _begun_by(tmp_path, child.pid)
        assert finish_killed(tmp_path, "demo", PROBE, "O5", prices) == [directory]
    finally:
        child.wait()
    assert _stopped(directory)["outcome"] == "stopped"


def test_a_run_process_still_dying_is_waited_for_within_the_grace(tmp_path, prices):
    dying = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.0)"])
    try:
        directory = _begun_by(tmp_path, dying.pid)
        assert finish_killed(tmp_path, "demo", PROBE, "O5", prices) == [directory]
    finally:
        dying.wait()
    assert _stopped(directory)["outcome"] == "stopped"


def test_a_run_process_alive_past_the_grace_is_left_running(tmp_path, prices, monkeypatch):
    monkeypatch.setattr(exchange_journal, "ORPHAN_GRACE_SECONDS", 0.3)
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        directory = _begun_by(tmp_path, alive.pid)
        assert finish_killed(tmp_path, "demo", PROBE, "O5", prices) == []
        assert not (directory / runroot.META_FILE).exists()
    finally:
        alive.kill()
        alive.wait()
