"""One attempt at one run slot, written to the run root before any store is touched.

This is the unit a worker executes (in-process or in a worker process, on this host or another):
allocate an attempt directory, run the pipeline, write the record in the reference layout. The
parent then ingests the directory into the store (`sabot.store.runs.ingest_attempt`); if the
store is locked, the finished run waits on disk for the next ingest and is never lost.
"""

import contextlib
import logging
from pathlib import Path

from adapters.endpoint import provider_from_env, scripted
from adapters.runner import RunSpec, run
from sabot import runroot
from sabot.debug import debugging
from sabot.exchange_journal import ExchangeJournal
from sabot.runroot import Identity


def current_identity(registry, runner_version: str, protocol: int) -> Identity:
    """What a run made now would be made with: runner code version, endpoint, model ids, protocol
    (and for a project, the hashes of its code)."""
    models = registry.doc("standard/models.v0.1.1.json")
    pipeline, downgrade = models["pipeline_model"], models["o4_downgrade_model"]
    endpoint = provider_from_env(pipeline, downgrade) or scripted("", pipeline, downgrade)
    project = getattr(registry, "project", None)
    if project is not None:  # a team's pipeline: its own code is part of what a stored run was made with
        return Identity(runner_version, endpoint.label, pipeline, downgrade, protocol, project.code_hashes())
    return Identity(runner_version, endpoint.label, pipeline, downgrade, protocol)


def provider_circuit(registry, environ=None):
    """The host-wide breaker of the provider the environment points at; None for the scripted model."""
    import os

    from adapters.gateway import CallPolicy, Upstream, circuit_of

    models = registry.doc("standard/models.v0.1.1.json")
    endpoint = provider_from_env(models["pipeline_model"], models["o4_downgrade_model"])
    if endpoint is None:
        return None
    upstream = Upstream(endpoint.base_url, endpoint.api_key, endpoint.label, scripted=False)
    return circuit_of(upstream, CallPolicy.load(registry, os.environ if environ is None else environ))


REPLAY_ENDPOINT_PREFIX = "replay of "


def replay_identity(identity: Identity, replay) -> Identity:
    """A replayed attempt's identity: a replay of its source run, whatever endpoint the environment
    names. No live identity starts so, so a replay never satisfies reuse for provider (or scripted) work."""
    return Identity(
        identity.runner_version,
        f"{REPLAY_ENDPOINT_PREFIX}{replay.source or 'a stored run'} ({replay.endpoint_label})",
        identity.pipeline_model,
        identity.downgrade_model,
        identity.protocol,
        identity.code,
    )


def is_replay(identity: Identity) -> bool:
    return identity.endpoint.startswith(REPLAY_ENDPOINT_PREFIX)


def run_attempt(
    spec: RunSpec,
    registry,
    run_root: Path,
    work_root: Path,
    identity: Identity,
    dagster_run_id: str,
    replay=None,
    replays: dict | None = None,
) -> Path:
    """Run one slot once (the runner's own retry-once included) and return its finished attempt directory.

    `replay` (or this spec's entry in `replays`, for a pool handed one callable for many runs): a
    Recording that answers every model call, so nothing is sent.
    """
    replay = replay if replay is not None else (replays or {}).get(spec)
    if replay is not None:
        identity = replay_identity(identity, replay)
    directory = runroot.allocate(run_root, spec.wave, _probe(spec), spec.operator)
    started = runroot.started_now()
    journal = (
        None if replay is not None else ExchangeJournal(directory).begin(spec.run_id, identity, started, dagster_run_id)
    )
    with pipeline_log(directory):
        outcome = run(
            spec, registry, work_root, replay=replay, journal=journal
        )  # replay: answered from a Recording, nothing sent
    record = outcome.record
    # A run the endpoint's stop cut off is "stopped": stored with its calls, never scored, resumed later.
    kind = "stopped" if outcome.stop else "run_error" if record.error else "complete"
    return runroot.write_attempt(directory, spec.wave, record, kind, identity, outcome.intent, dagster_run_id, started)


@contextlib.contextmanager
def pipeline_log(directory: Path):
    """What the frameworks log while a run executes (AutoGen logs a provider's 401 with a page of traceback)
    goes to the attempt's `pipeline.log` (sealed with it), not the terminal; under --debug, to the terminal too."""
    if debugging():
        yield
        return
    handler = logging.FileHandler(directory / runroot.PIPELINE_LOG, delay=True)  # no file unless something is logged
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)  # with a handler on the root, logging's last-resort stderr handler stays unused
    try:
        yield
    finally:
        root.removeHandler(handler)
        handler.close()


def _probe(spec: RunSpec):
    from sabot.matrix import Probe

    return Probe(spec.framework, spec.config, spec.task, spec.seed)
