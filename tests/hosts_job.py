"""A trivial job for the worker-host harness: every step records, in the shared run root, where it
ran (host label and the address its host reaches the coordinator from) and when."""

import json
import os
import socket
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import dagster as dg
from dagster_celery import celery_executor

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


def _step(index: int):
    @dg.op(name=f"step_{index}", pool=POOL)
    def _record(context):
        started = time.time()
        time.sleep(2.0)
        record = {"step": context.op_handle.name, "run_id": context.run_id, "started": started, "ended": time.time(), **where_am_i()}
        steps = Path(os.environ["SABOT_RUN_ROOT"]) / "steps"
        steps.mkdir(parents=True, exist_ok=True)
        (steps / f"{record['step']}.{uuid.uuid4().hex}.json").write_text(json.dumps(record))  # one file per execution

    return _record


@dg.job(executor_def=celery_executor)
def hosts_check():
    for index in range(STEPS):
        _step(index)()
