"""Worker hosts: Dagster's Celery executor (dagster-celery) as deploy/hosts/celery.yaml configures
it, and the queues a deployment's steps go to (deploy/hosts/: the instance, the broker, the workers).

Steps on the executor's default queue run on the worker hosts. A step that writes the store is
tagged for the store queue instead, which one worker on the coordinator serves: DuckDB keeps one
writer, on the host that holds the file.
"""

import dagster as dg
from dagster_celery import celery_executor
from dagster_celery.tags import DAGSTER_CELERY_QUEUE_TAG

from sabot_assets.constants import PROJECT_ROOT

CELERY_CONFIG = PROJECT_ROOT / "deploy" / "hosts" / "celery.yaml"
WORKER_QUEUE = "dagster"  # dagster-celery's default queue: what the worker hosts listen on
STORE_QUEUE = "sabot-store"  # the coordinator's single store writer


def hosts_executor() -> dg.ExecutorDefinition:
    """The Celery executor with the settings every worker host was started with (one file for both)."""
    return celery_executor.configured(dg.config_from_files([str(CELERY_CONFIG)])["execution"]["config"], name="celery_hosts")


def store_step_tags() -> dict[str, str]:
    """Op tags that send a step to the coordinator's store writer rather than to a worker host."""
    return {DAGSTER_CELERY_QUEUE_TAG: STORE_QUEUE}
