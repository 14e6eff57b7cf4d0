"""Worker hosts: Dagster's Celery executor (dagster-celery) as deploy/hosts/celery.yaml configures
it, and the queues a deployment's steps go to (deploy/hosts/: the instance, the broker, the workers).

The executor's default queue is the store queue, which one worker on the coordinator serves:
DuckDB keeps one writer, on the host that holds the file, so a step made for no host in particular
(a verdict, a board) can never write the store from a worker host. Only the steps that execute
pipeline runs (the run assets' `execute`, which never opens the store) are tagged for the worker
hosts' queue. A deployment names its broker in SABOT_CELERY_BROKER; without it every step runs in
the run's own process, as on one machine.
"""

import os

import dagster as dg

from sabot_assets.constants import PROJECT_ROOT

# dagster_celery.tags.DAGSTER_CELERY_QUEUE_TAG, spelled here so the code location imports Celery
# only where it executes on worker hosts (tests/test_worker_hosts.py checks the two agree).
DAGSTER_CELERY_QUEUE_TAG = "dagster-celery/queue"

CELERY_CONFIG = PROJECT_ROOT / "deploy" / "hosts" / "celery.yaml"
WORKER_QUEUE = "dagster"  # what the worker hosts listen on (dagster-celery's own default name)
STORE_QUEUE = "sabot-store"  # the coordinator's single store writer; the executor's default queue
BROKER_ENV = "SABOT_CELERY_BROKER"


def on_worker_hosts() -> bool:
    """Whether this deployment executes on worker hosts (it names a Celery broker)."""
    return bool(os.environ.get(BROKER_ENV))


def run_executor() -> dg.ExecutorDefinition:
    """The code location's executor: the worker hosts' where the deployment has them, else in-process
    (every step is short on one machine; one process per run avoids store contention)."""
    return hosts_executor() if on_worker_hosts() else dg.in_process_executor


def hosts_executor() -> dg.ExecutorDefinition:
    """The Celery executor with the settings every worker host was started with (one file for both)."""
    from dagster_celery import celery_executor

    return celery_executor.configured(
        dg.config_from_files([str(CELERY_CONFIG)])["execution"]["config"], name="celery_hosts"
    )


def store_step_tags() -> dict[str, str]:
    """Op tags that send a step to the coordinator's store writer (also where an untagged step goes)."""
    return {DAGSTER_CELERY_QUEUE_TAG: STORE_QUEUE}


def worker_step_tags() -> dict[str, str]:
    """Op tags that send a step to the worker hosts: only for a step that never opens the store."""
    return {DAGSTER_CELERY_QUEUE_TAG: WORKER_QUEUE}
