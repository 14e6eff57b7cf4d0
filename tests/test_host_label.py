"""The dead-run sweep tells hosts apart by a host label, not the host name.

Worker hosts can share a host name (network namespaces, containers, cloned machines), and a PID
means something only on its own host: a sweep that went by host name would fail a live run of
another host whose PID happens to be free on its own.
"""

import socket
import subprocess

import dagster as dg

from sabot_assets.constants import LAUNCHER_TAG, LLM_POOL
from sabot_assets.waves.concurrency import free_slots_of_dead_runs, host_label, launcher_tag, set_pool_limit


def _free_pid() -> int:
    gone = subprocess.Popen(["true"])
    gone.wait()
    return gone.pid


def test_the_label_names_the_host_in_the_launcher_tag(monkeypatch):
    monkeypatch.delenv("SABOT_HOST_LABEL", raising=False)
    assert host_label() == socket.gethostname()
    monkeypatch.setenv("SABOT_HOST_LABEL", "w1")
    host, _, pid = launcher_tag()[LAUNCHER_TAG].rpartition(":")
    assert host == "w1" and pid.isdigit()


def test_a_run_of_another_label_is_left_to_its_own_host_even_under_the_same_host_name(tmp_path, monkeypatch):
    pid = _free_pid()  # free here; on host w1 it is the live process running the run
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        set_pool_limit(instance, 2)
        instance.add_run(
            dg.DagsterRun(
                job_name="__ASSET_JOB",
                run_id="run-on-w1",
                status=dg.DagsterRunStatus.STARTED,
                tags={LAUNCHER_TAG: f"w1:{pid}"},
            )
        )
        assert instance.event_log_storage.claim_concurrency_slot(LLM_POOL, "run-on-w1", "fault_runs").is_claimed

        monkeypatch.setenv("SABOT_HOST_LABEL", "w2")  # the same host name, another host
        assert free_slots_of_dead_runs(instance) == []
        assert instance.get_run_by_id("run-on-w1").status == dg.DagsterRunStatus.STARTED
        assert instance.event_log_storage.get_concurrency_run_ids() == {"run-on-w1"}

        monkeypatch.setenv("SABOT_HOST_LABEL", "w1")  # its own host, where the process is gone
        assert free_slots_of_dead_runs(instance) == ["run-on-w1"]
        assert instance.get_run_by_id("run-on-w1").status == dg.DagsterRunStatus.FAILURE
        assert instance.event_log_storage.get_concurrency_run_ids() == set()
