"""A trivial job for the worker-host harness: every step records, in the shared run root, where it
ran (host label and the address its host reaches the coordinator from) and when. The steps run on
the worker hosts (tagged for their queue); the last one, which collects them, goes to the coordinator's
store queue, the executor's default, as a settle step that writes the store does."""

import json
import os
import socket
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import dagster as dg

from sabot_assets.hosts import hosts_executor, worker_step_tags
from sabot_assets.waves.concurrency import host_label

STEPS = 8
POOL = "hosts_check"  # its limit is set by the test


def where_am_i() -> dict:
    """This host's label and its own address towards the broker's host (the coordinator)."""
    coordinator = urlsplit(os.environ["SABOT_CELERY_BROKER"]).hostname
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((coordinator, 9))  # UDP: picks the route and source address, sends nothing
        address = probe.getsockname()[0]
    return {"label": host_label(), "address": address, "pid": os.getpid()}


def record_step(context, started: float) -> str:
    record = {
        "step": context.op_handle.name,
        "run_id": context.run_id,
        "started": started,
        "ended": time.time(),
        **where_am_i(),
    }
    steps = Path(os.environ["SABOT_RUN_ROOT"]) / "steps"
    steps.mkdir(parents=True, exist_ok=True)
    (steps / f"{record['step']}.{uuid.uuid4().hex}.json").write_text(json.dumps(record))  # one file per execution
    return record["step"]


def _step(index: int):
    @dg.op(name=f"step_{index}", pool=POOL, tags=worker_step_tags())
    def _work(context) -> str:
        started = time.time()
        time.sleep(2.0)
        return record_step(context, started)

    return _work


@dg.op(ins={f"step_{i}": dg.In(str) for i in range(STEPS)})
def collect(context, **done):
    record_step(context, time.time())


@dg.job(executor_def=hosts_executor())  # the executor config of deploy/hosts/celery.yaml
def hosts_check():
    collect(**{f"step_{index}": _step(index)() for index in range(STEPS)})
